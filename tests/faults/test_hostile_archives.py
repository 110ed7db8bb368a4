"""Crafted archives with a valid seal are refused with one line, before anything is written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.faults.forge import Forgery
from tests.support.claw import Claw
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` with its bytes (links with their target): 'byte-for-byte unchanged'."""
    found: dict[str, bytes | str] = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            rel = str(path.relative_to(root))
            found[rel] = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return found


def _with_head(forgery: Forgery, change: Callable[[dict], object]) -> None:
    head = forgery.json(forgery.manifest["head"])
    replaced = change(head)
    new = forgery.add(head if replaced is None else replaced)
    forgery.manifest["head"] = new
    forgery.manifest["refs"] = {f"campaigns/{forgery.manifest['campaign']['id']}": new}


def _with_first_part(forgery: Forgery, change: Callable[[dict], object]) -> None:
    """Change the first part of the head's nodes (clawstore/store/headdoc.py) and name the new part."""
    def swap(head: dict) -> None:
        part = forgery.json(head["node_parts"][0])
        change(part)
        head["node_parts"][0] = forgery.add(part)

    _with_head(forgery, swap)


def _with_tree(forgery: Forgery, entry: dict) -> None:
    tree_id = forgery.manifest["configs"]["tree"]
    tree = forgery.json(tree_id)
    tree["entries"].append(entry)
    forgery.manifest["configs"]["tree"] = forgery.add(tree)


def _file_entry(forgery: Forgery, path: str) -> dict:
    data = b"escaped\n"
    return {"path": path, "type": "file", "mode": 0o100644, "size": len(data), "object": forgery.add(data)}


def _swap_entries(forgery: Forgery) -> None:
    """Cache poisoning: two entries exchange their records (e.g. a judgement of 5.0 served for a run
    the judge scored 9.0), and the archive is re-sealed."""
    actions = forgery.manifest["actions"]
    first, second = sorted(actions)[:2]
    actions[first], actions[second] = actions[second], actions[first]


def _rekeyed_record(forgery: Forgery, entry: str, **changes: str) -> None:
    """An entry for `entry` pointing at a copy of another entry's record with `changes` made to it."""
    actions = forgery.manifest["actions"]
    donor = forgery.json(actions[sorted(actions)[1]])
    actions[entry] = forgery.add({**donor, **changes})


def _entry_for_absent_input(forgery: Forgery) -> None:
    invented = "blake3:" + "cd" * 32
    _rekeyed_record(forgery, invented, key=invented, input=invented)


def _entry_naming_another_input(forgery: Forgery) -> None:
    actions = forgery.manifest["actions"]
    key, other = sorted(actions)[:2]
    _rekeyed_record(forgery, key, key=key, input=other)


# Each attack: what it changes, and the words of the one-line refusal.
ATTACKS: dict[str, Callable[[Forgery], None]] = {
    "NUL in the manifest's build_id": lambda f: f.manifest.update(build_id="2026\x00evil"),
    "5,000 characters in the manifest's build_id": lambda f: f.manifest.update(build_id="b" * 5000),
    "../../../x as the manifest's build_id": lambda f: f.manifest.update(build_id="../../../x"),
    "NUL in the head's build_id": lambda f: _with_head(f, lambda h: h.update(build_id="a\x00b")),
    "5,000 characters in the head's build_id": lambda f: _with_head(f, lambda h: h.update(build_id="x" * 5000)),
    "../../../x as the head's build_id": lambda f: _with_head(f, lambda h: h.update(build_id="../../../x")),
    "a list as the manifest's head": lambda f: f.manifest.update(head=[f.manifest["head"]]),
    "a list as the head object": lambda f: _with_head(f, lambda h: [h]),
    "a head naming another campaign": lambda f: _with_head(f, lambda h: h.update(campaign={"id": "other"})),
    "a head node naming a record not in the archive": lambda f: _with_first_part(
        f, lambda p: p["nodes"][0].update(record="blake3:" + "ab" * 32)),
    "a head naming a part not in the archive": lambda f: _with_head(
        f, lambda h: h["node_parts"].append("blake3:" + "ef" * 32)),
    "a head naming its config tree as a part": lambda f: _with_head(
        f, lambda h: h["node_parts"].__setitem__(0, f.manifest["configs"]["tree"])),
    "a head with its parts in a string": lambda f: _with_head(
        f, lambda h: h.update(node_parts=",".join(h["node_parts"]))),
    "a ref escaping refs/": lambda f: f.manifest["refs"].update({"campaigns/../../../x": f.manifest["head"]}),
    "an extra ref to another object": lambda f: f.manifest["refs"].update(
        {"pins/evil": f.manifest["configs"]["tree"]}),
    "../ in the campaign id": lambda f: f.manifest.update(campaign={"id": "../../x"}),
    "a config tree entry ../escape.txt": lambda f: _with_tree(f, _file_entry(f, "../escape.txt")),
    "a config tree entry configs/../../escape.txt": lambda f: _with_tree(
        f, _file_entry(f, "configs/../../escape.txt")),
    "an absolute config tree entry": lambda f: _with_tree(f, _file_entry(f, "/tmp/escape.txt")),
    "NUL in a config tree entry": lambda f: _with_tree(f, _file_entry(f, "configs/a\x00b")),
    "a config tree entry outside configs/": lambda f: _with_tree(f, _file_entry(f, "bin/run.sh")),
    "an escaping symlink in the config tree": lambda f: _with_tree(f, {
        "path": "configs/cases/link", "type": "symlink", "mode": 0o120000, "size": 14,
        "target": "../../../../etc"}),
    "an absolute symlink in the config tree": lambda f: _with_tree(f, {
        "path": "configs/shadow", "type": "symlink", "mode": 0o120000, "size": 11, "target": "/etc/shadow"}),
    "a config tree that is not a tree": lambda f: f.manifest["configs"].update(tree=f.add(b"not a tree")),
    "two action-cache entries swapped": _swap_entries,
    "an entry pointing at another key's record": lambda f: f.manifest["actions"].update(
        {sorted(f.manifest["actions"])[0]: f.manifest["actions"][sorted(f.manifest["actions"])[1]]}),
    "a record re-keyed to an input not in the archive": _entry_for_absent_input,
    "a record naming another node's input document": _entry_naming_another_input,
}


EXPECTED = {
    "NUL in the manifest's build_id": "'build_id' is not",
    "5,000 characters in the manifest's build_id": "'build_id' has 5000 characters",
    "../../../x as the manifest's build_id": "'build_id' is not",
    "NUL in the head's build_id": 'build_id is not',
    "5,000 characters in the head's build_id": 'build_id has 5000 characters',
    "../../../x as the head's build_id": 'build_id is not',
    "a list as the manifest's head": "'head' does not name",
    'a list as the head object': 'is not a campaign head',
    'a head naming another campaign': 'campaign does not match',
    'a head node naming a record not in the archive': 'node 0 is not a node',
    'a head naming a part not in the archive': 'part blake3:efefefef',
    'a head naming its config tree as a part': 'is not a part of a campaign head',
    'a head with its parts in a string': 'node_parts: expected a list',
    'a ref escaping refs/': 'is not a valid ref name',
    'an extra ref to another object': 'may only point',
    '../ in the campaign id': "'campaign.id' is not",
    'a config tree entry ../escape.txt': "'..' segment",
    'a config tree entry configs/../../escape.txt': "'..' segment",
    'an absolute config tree entry': 'is absolute',
    'NUL in a config tree entry': 'NUL or control character',
    'a config tree entry outside configs/': 'is outside configs/',
    'an escaping symlink in the config tree': 'points outside the checkout',
    'an absolute symlink in the config tree': 'points outside the checkout',
    'a config tree that is not a tree': 'is not a tree',
    'two action-cache entries swapped': 'its record is for another key',
    "an entry pointing at another key's record": 'its record is for another key',
    'a record re-keyed to an input not in the archive': 'the input document its key is computed from is missing',
    "a record naming another node's input document": 'does not name the input document',
}


@pytest.fixture
def exported(ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> Path:
    code, _, err = claw("build", *RUNS)
    assert code == 0, err
    archive = tmp_path / "good.claw"
    code, _, err = claw("archive", "export", *RUNS, "-o", str(archive))
    assert code == 0, err
    return archive


def test_forged_archives_are_refused_and_nothing_is_written(exported: Path, claw: Claw, tmp_path: Path) -> None:
    target = tmp_path / "target-store"  # a store that has other content already
    code, _, err = claw("archive", "import", str(exported), "--store", str(target))
    assert code == 0, err
    before = snapshot(target)
    refused = 0
    for what, attack in ATTACKS.items():
        forgery = Forgery.read(exported)
        attack(forgery)
        forged = forgery.write(tmp_path / "forged.claw")
        assert claw("archive", "verify", str(forged))[0] in (0, 2), what  # seal and frames are valid
        for store_args, where in (((("--store", str(target))), target), (("--store", str(tmp_path / "new")), None)):
            code, out, err = claw("archive", "import", str(forged), *store_args)
            assert code in (2, 3), f"{what}: {code} {out} {err}"
            assert err.startswith("claw: error: ") and err.count("\n") == 1, (what, err)
            assert "Traceback" not in err and len(err) < 400 and EXPECTED[what] in err, (what, err)
            if where is not None:
                assert snapshot(target) == before, what
            else:
                assert not (tmp_path / "new").exists(), what  # not even an empty store
        configs_to = tmp_path / "ws-copy"
        code, _, err = claw("archive", "import", str(forged), "--configs-to", str(configs_to))
        assert code in (2, 3) and err.count("\n") == 1, (what, err)
        assert not configs_to.exists() and not (tmp_path.parent / "escape.txt").exists(), what
        refused += 1
    assert refused == len(ATTACKS) >= 24
    assert claw("fsck", "--store", str(target))[0] == 0


def test_import_refuses_a_folder_that_is_not_a_store(exported: Path, claw: Claw, tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"\xff\xd8 not a store")
    before = snapshot(folder)
    code, out, err = claw("archive", "import", str(exported), "--store", str(folder))
    assert code == 2 and "is not a claw store and not empty" in err and err.count("\n") == 1, out + err
    assert snapshot(folder) == before and sorted(os.listdir(folder)) == ["holiday.jpg"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = claw("archive", "import", str(exported), "--store", str(empty))
    assert code == 0 and (empty / "CLAWSTORE").is_file(), err


def test_bad_pin_names_are_refused_before_anything_is_written(exported: Path, claw: Claw, tmp_path: Path) -> None:
    for name in ("../x", "a/b", "x\x00y", "p" * 5000, ".."):
        code, _, err = claw("archive", "import", str(exported), "--store", str(tmp_path / "s"), "--pin", name)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (name, err)
        assert not (tmp_path / "s").exists()


def test_importing_what_is_not_a_file_says_which(claw: Claw, tmp_path: Path) -> None:
    for path, why in ((tmp_path / "missing.claw", "no such file"), (Path("/dev/null"), "not a regular file")):
        code, _, err = claw("archive", "import", str(path), "--store", str(tmp_path / "s"))
        assert (code, err) == (2, f"claw: error: archive {path}: {why}\n")
        assert not (tmp_path / "s").exists()
