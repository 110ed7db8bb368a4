"""`claw archive export|verify|ls|import` with real builds, real stores in two places, real files."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import blake3
import pytest

from clawstore.testing.standin import StandIn
from tests.gc.helpers import actions, state
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace, write_yaml

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")


@pytest.fixture
def built(ws: Workspace, claw: Claw, standin: StandIn) -> Workspace:
    """The standard workspace plus a grouped case with an attachment, a message source and a hook,
    scored by a judge; built once."""
    case_dir = ws.configs / "cases" / "group" / "gamma"
    (case_dir / "files").mkdir(parents=True)
    (case_dir / "files" / "data.csv").write_text("city,temp\nOslo,4\nRome,18\n")
    (case_dir / "messages").mkdir()
    (case_dir / "messages" / "ask.yaml").write_text("role: user\ncontent: Which city is warmer?\n")
    (case_dir / "hooks").mkdir()
    (case_dir / "hooks" / "check.py").write_text("def check(artifact):\n    return artifact['status'] == 'success'\n")
    (case_dir / "hooks" / "__pycache__").mkdir()
    (case_dir / "hooks" / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"\0junk")
    write_yaml(case_dir / "test.yaml", {
        "schema_version": 1, "case_id": "gamma", "title": "Grouped case", "runner": {"type": "llm_probe"},
        "input": {"messages": [{"role": "system", "content": "Be brief."},
                               {"role": "user", "source": {"path": "messages/ask.yaml"}}],
                  "attachments": ["files/data.csv"]},
        "deterministic_checks": [{"check_id": "hook", "python_hook": {"path": "hooks/check.py",
                                                                       "callable_name": "check"}}],
        "tags": ["smoke"]})
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True, "network_access": "allow"})
    standin.script(JUDGE, judge_reply(6))
    code, out, err = claw("build", *CAMPAIGN)
    assert code == 0, out + err
    return ws


def _export(claw: Claw, path: Path, *extra: str) -> str:
    code, out, err = claw("archive", "export", *CAMPAIGN, "-o", str(path), *extra)
    assert code == 0, err
    return next(line.split()[1] for line in out.splitlines() if line.startswith("digest "))


def _report(claw: Claw, *extra: str) -> dict:
    code, out, err = claw("report", *CAMPAIGN, "--output", "json", "--no-chart", *extra)
    assert code == 0, err
    return json.loads(out)


def test_export_is_byte_identical_and_lists_its_configs(built: Workspace, claw: Claw, tmp_path: Path) -> None:
    first, second = tmp_path / "a.claw", tmp_path / "b.claw"
    digest = _export(claw, first)
    assert _export(claw, second) == digest
    assert first.read_bytes() == second.read_bytes()
    assert digest == "blake3:" + blake3.blake3(first.read_bytes()).hexdigest()
    with tarfile.open(first) as tar:  # plain tar tools read it
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[0] == "clawarchive.json" and names[-1] == "clawarchive.seal"
    assert names[1:-1] == sorted(names[1:-1]) and all(n.startswith("objects/") for n in names[1:-1])
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, 0, "", "", 0o644)}

    code, out, err = claw("archive", "verify", str(first))
    assert code == 0 and digest in out, err
    code, out, err = claw("archive", "ls", str(first))
    assert code == 0, err
    for path in ("configs/suites/main.yaml", "configs/run_profiles/rp.yaml", "configs/evaluation_profiles/ev.yaml",
                 "configs/cases/alpha/test.yaml", "configs/cases/group/gamma/files/data.csv",
                 "configs/cases/group/gamma/messages/ask.yaml", "configs/cases/group/gamma/hooks/check.py"):
        assert f"  {path}  " in out
    assert "__pycache__" not in out and "main__rp__ev" in out
    manifest = json.loads(claw("archive", "ls", str(first), "--json")[1])
    assert manifest["refs"] == {"campaigns/main__rp__ev": manifest["head"]}
    assert len(manifest["actions"]) == 3 * 2 * 4  # checks, judge, result and run per model x case
    assert str(tmp_path) not in json.dumps(manifest)  # no host paths: the same content, the same bytes


def test_import_elsewhere_rebuilds_with_zero_requests_and_reports_the_same(
        built: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:
    archive = tmp_path / "campaign.claw"
    _export(claw, archive)
    origin = _report(claw)
    other = tmp_path / "elsewhere" / "store"  # does not exist yet
    code, out, err = claw("archive", "import", str(archive), "--store", str(other))
    assert code == 0, err
    assert "0 already present" in out
    assert "kept from gc" not in out  # (nothing beyond its head: no imports/ ref, tests/gc/test_archive_elsewhere.py)
    assert list(json.loads(claw("refs", "--json", "--store", str(other))[1])) == ["campaigns/main__rp__ev"]
    after_import = state(other)
    assert _report(claw, "--store", str(other)) == origin
    code, out, err = claw("query", "select count(*) as n from runs", "--format", "json", "--store", str(other))
    assert code == 0 and json.loads(out)[0]["n"] == 6, err  # the imported campaign is queryable

    code, out, err = claw("archive", "import", str(archive), "--store", str(other))
    assert code == 0 and " 0 new objects" in out
    assert state(other) == after_import  # importing twice changes nothing

    spent = len(standin.requests)
    code, out, err = claw("build", *CAMPAIGN, "--store", str(other), "--output", "json")
    assert code == 0, err
    assert set(actions(json.loads(out)).values()) == {"reuse"}
    assert {r["eval"] for r in json.loads(out)["rows"]} == {"reuse"}
    assert len(standin.requests) == spent  # no run and no judge request
    rebuilt = _report(claw, "--store", str(other))
    assert [(r["model_id"], r["case_id"], r["score"], r["total_cost_usd"]) for r in rebuilt["rows"]] == \
        [(r["model_id"], r["case_id"], r["score"], r["total_cost_usd"]) for r in origin["rows"]]
    assert claw("fsck", "--store", str(other))[0] == 0


def test_configs_to_gives_a_workspace_that_rebuilds_and_reexports_identically(
        built: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "campaign.claw"
    _export(claw, archive)
    other, target = tmp_path / "other-store", tmp_path / "rebuilt"
    code, out, err = claw("archive", "import", str(archive), "--store", str(other), "--configs-to", str(target))
    assert code == 0, err
    originals = {p.relative_to(built.root).as_posix(): p.read_bytes() for p in built.configs.rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    copies = {p.relative_to(target).as_posix(): p.read_bytes() for p in (target / "configs").rglob("*") if p.is_file()}
    assert copies == originals
    assert os.access(target / "configs/cases/group/gamma/hooks/check.py", os.R_OK)

    monkeypatch.chdir(target)
    again = tmp_path / "again.claw"
    _export(claw, again, "--store", str(other))  # from the copy: same configs, same store content
    assert again.read_bytes() == archive.read_bytes()

    spent = len(standin.requests)
    code, out, err = claw("build", *CAMPAIGN, "--store", str(other), "--output", "json")
    assert code == 0, err
    assert set(actions(json.loads(out)).values()) == {"reuse"}
    assert len(standin.requests) == spent


def _members(path: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(path) as tar:
        return tar.getmembers()


def test_a_changed_byte_or_a_truncation_is_rejected_and_the_store_is_unchanged(
        built: Workspace, claw: Claw, tmp_path: Path) -> None:
    archive = tmp_path / "campaign.claw"
    _export(claw, archive)
    good = archive.read_bytes()
    members = _members(archive)
    big = max(members[1:-1], key=lambda m: m.size)
    padded = next(m for m in members if m.size % 512)
    changes = {
        "manifest data": members[0].offset_data + 20,
        "object data": big.offset_data + big.size // 2,
        "object header name": big.offset + 20,
        "object header mtime": big.offset + 140,
        "padding": padded.offset_data + padded.size,
        "seal": members[-1].offset_data + 10,
        "trailer": len(good) - 1,
    }
    cuts = {"last byte": len(good) - 1, "trailer": len(good) - 1024, "mid object": big.offset_data + big.size // 3,
            "manifest": 300, "nothing left": 0}
    store = tmp_path / "target"  # a store of its own, sharing some objects with the archive
    code, _, err = claw("build", "--suite", "main", "--run-profile", "rp", "--store", str(store))
    assert code == 0, err
    before = state(store)
    assert claw("fsck", "--store", str(store))[0] == 0
    bad = tmp_path / "bad.claw"
    variants = {f"byte in {k}": good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:] for k, at in changes.items()}
    variants |= {f"cut at {k}": good[:at] for k, at in cuts.items()}
    variants["a byte appended"] = good + b"\0"
    for what, data in variants.items():
        bad.write_bytes(data)
        code, out, err = claw("archive", "import", str(bad), "--store", str(store))
        assert code == 2, f"{what}: {out}{err}"
        assert err.startswith("claw: error: archive ") and err.count("\n") == 1, (what, err)
        assert state(store) == before, what
        code, _, err = claw("archive", "verify", str(bad))
        assert code == 2 and err.count("\n") == 1, (what, err)
    assert claw("fsck", "--store", str(store))[0] == 0
    assert claw("archive", "import", str(archive), "--store", str(store))[0] == 0  # the good one still imports
    assert claw("fsck", "--store", str(store))[0] == 0


def test_bad_requests_are_one_line_errors(built: Workspace, claw: Claw, tmp_path: Path) -> None:
    archive = tmp_path / "campaign.claw"
    cases = [
        ("archive", "export", "--suite", "main", "--run-profile", "rp", "-o", str(archive)),  # never built
        ("archive", "export", *CAMPAIGN, "--case", "alpha", "-o", str(archive)),
        ("archive", "export", *CAMPAIGN, "-o", str(tmp_path / "missing" / "x.claw")),
        ("archive", "import", str(tmp_path / "nope.claw")),
        ("archive", "verify", str(built.configs / "suites" / "main.yaml")),
        ("archive", "ls", str(built.configs / "suites" / "main.yaml")),
        ("pin", "bad/../name", *CAMPAIGN),
    ]
    for args in cases:
        code, out, err = claw(*args)
        assert code == 2, (args, out, err)
        assert err.startswith("claw: error: ") and err.count("\n") == 1, (args, err)
    _export(claw, archive)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    code, _, err = claw("archive", "import", str(archive), "--configs-to", str(tmp_path / "full"))
    assert code == 2 and "not empty (holds x)" in err
    # A store below a file: refused before any work (it was imported whole into a staging store beside the file,
    # then failed to make the directory: exit 3, "…/x: File exists").
    before = sorted(p.name for p in (tmp_path / "full").iterdir())
    below = tmp_path / "full" / "x"
    code, _, err = claw("archive", "import", str(archive), "--store", str(below / "store"))
    assert code == 2 and err == f"claw: error: --store {below / 'store'}: {below} is not a directory\n", err
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == before  # (no staging store left beside it)


def test_importing_an_older_state_keeps_the_newer_ref_and_pins_on_request(
        built: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:
    archive = tmp_path / "old.claw"
    _export(claw, archive)
    old_head = json.loads(claw("archive", "ls", str(archive), "--json")[1])["head"]
    built.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    assert claw("build", *CAMPAIGN)[0] == 0
    code, out, _ = claw("refs", "--json")
    new_head = json.loads(out)["campaigns/main__rp__ev"]
    assert claw("gc", "--grace", "0")[0] == 0  # the old beta runs are gone from the store
    code, out, err = claw("archive", "import", str(archive), "--pin", "before-fruit")
    assert code == 0, err
    assert "already points at" in err and "campaigns/main__rp__ev" in err
    assert "use --pin" not in err, err  # (given: it told the user to do what they had just done; session 77)
    refs = json.loads(claw("refs", "--json")[1])
    assert refs["campaigns/main__rp__ev"] == new_head and refs["pins/before-fruit"] == old_head
    assert " 0 new objects" not in out  # the collected runs came back
    assert claw("gc", "--grace", "0")[0] == 0
    assert claw("fsck")[0] == 0
    built.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a colour."))
    spent = len(standin.requests)
    code, out, err = claw("build", *CAMPAIGN, "--output", "json")
    assert code == 0, err
    assert set(actions(json.loads(out)).values()) == {"reuse"}  # served by the pinned, imported state
    assert len(standin.requests) == spent


def test_an_export_of_a_campaign_whose_configs_changed_since_its_build_says_what_its_build_will_pay(
        built: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:
    """An archive holds the configs as they are now and the results the store has: exported after an edit, its build
    elsewhere paid for the edited case's runs and judgements without a word at the export (s60-qa: "wrote …", exit 0,
    then 8 requests at the importer's). The export says how many nodes such a build runs, and a build here first
    archives them built. (Not refused: a campaign a budget stopped half way is archived as it stands.)"""
    stale = tmp_path / "edited.claw"
    built.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content="Name a fruit."))
    code, out, err = claw("archive", "export", *CAMPAIGN, "-o", str(stale))
    assert code == 0 and stale.exists(), out + err
    assert err.startswith("claw: note: 8 node(s) of campaign main__rp__ev are not built") and \
        "a build of this archive runs and pays for them" in err and err.count("\n") == 1, err
    spent = len(standin.requests)
    assert _build_of_the_import(claw, stale, tmp_path / "stale") == {"exec", "reuse"}
    paid_elsewhere, spent = len(standin.requests) - spent, len(standin.requests)
    built_first = tmp_path / "built.claw"
    assert claw("build", *CAMPAIGN)[0] == 0
    assert len(standin.requests) - spent == paid_elsewhere > 0  # (what a build here pays: the edited case's, alone)
    code, out, err = claw("archive", "export", *CAMPAIGN, "-o", str(built_first))
    assert code == 0 and err == "", err
    spent = len(standin.requests)
    assert _build_of_the_import(claw, built_first, tmp_path / "built") == {"reuse"}
    assert len(standin.requests) == spent


def _build_of_the_import(claw: Claw, archive: Path, elsewhere: Path) -> set[str]:
    """The actions of a build of `archive` imported into a store and workspace of its own under `elsewhere`."""
    store, configs = str(elsewhere / "store"), elsewhere / "ws"
    code, out, err = claw("archive", "import", str(archive), "--store", store, "--configs-to", str(configs))
    assert code == 0, err
    os.chdir(configs)
    code, out, err = claw("build", *CAMPAIGN, "--store", store, "--output", "json")
    assert code == 0, out + err
    return set(actions(json.loads(out)).values())
