"""fsck's first pass on two cores (services/fsck_beside.py): a forked helper verifies the last packs; what fsck
reports and the edges files it leaves are the same as one process's, with damaged packs, with one CPU allowed (no
helper), and with the helper SIGKILLed at work."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store, edges
from clawstore.store.services import fsck_beside
from clawstore.store.services.fsck import fsck
from tests.support.fresh import in_fresh_process
from tests.support.storefiles import blob_span, flip_in_frame


def _store(root: Path, packs: int) -> tuple[Store, list[str]]:
    """`packs` sealed packs of records naming documents (edges and facts to write); the ids put, in pack order."""
    store = Store(root)
    oids = []
    for number in range(packs):
        with store.batch():
            for i in range(20):
                artifact = store.put_bytes(f"artifact {number} {i} ".encode() * 30)
                oids.append(artifact)
                oids.append(store.put_json({"kind": "run", "key": artifact, "outputs": {"artifact": artifact}}))
        store.runtime.close_writer()
    return store, oids


def _run(root: Path, beside: bool, log: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], dict[str, str]]:
    """fsck of the store at `root` (a fresh Store): its problems (the root's path taken out) and its edges files'
    digests. Which process verified which pack is appended to `log`."""
    verify, verify_whole = edges.verify_noting, fsck_beside.verify_whole

    def noted(fh: Any, pack: str, blobs: Any, named: Any, facts: bool = False) -> Iterator[Any]:
        with open(log, "a") as out:
            out.write(f"{os.getpid()} {pack}\n")
        yield from verify(fh, pack, blobs, named, facts)

    def sent(root: Path, packs_dir: Path, tmp_dir: Path, pack: str, by_arrays: bool = False) -> bytes | None:
        with open(log, "a") as out:
            out.write(f"sent {pack}\n")
        time.sleep(0.1)  # (a slow helper: fsck must wait for what it was sent, not verify it too)
        fsck_beside.verify_whole = verify_whole  # (once: the helper's own module)
        digest = verify_whole(root, packs_dir, tmp_dir, pack, by_arrays)
        fsck_beside.verify_whole = sent
        return digest

    def hashed(path: Path) -> bytes:
        with open(log, "a") as out:
            out.write(f"hashed-by-{os.getpid()} {path.name[:-len('.pack')]}\n")
        return pack_digest(path)

    pack_digest = edges.pack_digest
    monkeypatch.setattr(edges, "pack_digest", hashed)
    monkeypatch.setattr(edges, "verify_noting", noted)
    monkeypatch.setattr(fsck_beside, "verify_whole", sent)
    report = fsck(Store(root), beside=beside)
    monkeypatch.setattr(edges, "verify_noting", verify)
    monkeypatch.setattr(edges, "pack_digest", pack_digest)
    monkeypatch.setattr(fsck_beside, "verify_whole", verify_whole)
    problems = [problem.replace(str(root), "<store>") for problem in report.problems]
    files = {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted((root / "edges").iterdir())}
    return problems, files


def _verified(root: Path) -> set[str]:
    """The packs an edges file says fsck verified."""
    packs = [path.name[:-len(".edges")] for path in (root / "edges").iterdir()]
    return {pack for pack in packs if (found := edges.load(root, root / "packs", pack)) is not None and found.verified}


def _who(log: Path) -> tuple[set[str], list[tuple[int, str]]]:
    """The packs sent to the helper; (process, pack) of each verification, in order."""
    lines = [line.split() for line in log.read_text().splitlines()] if log.exists() else []
    return {pack for who, pack in lines if who == "sent"}, [(int(who), pack) for who, pack in lines if who.isdigit()]


def _hashed_here(log: Path) -> list[str]:
    """The packs fsck's own process hashed (not its helper), in order."""
    here = f"hashed-by-{os.getpid()}"
    return [pack for who, pack in (line.split() for line in log.read_text().splitlines()) if who == here]


def _damaged_copies(tmp_path: Path) -> tuple[Path, Path, str]:
    """Two copies of a six-pack store: a byte flipped in the first and the fifth pack made, the second truncated
    (its name returned)."""
    store, oids = _store(tmp_path / "a", 6)
    flip_in_frame(store, oids[0], -2)
    flip_in_frame(store, oids[4 * 40 + 5], -2)
    second, offset, _ = blob_span(store, oids[40 + 10])
    os.truncate(second, offset + 3)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    return tmp_path / "a", tmp_path / "b", second.name[:-len(".pack")]


def test_the_helper_verifies_packs_and_fsck_reports_the_same(tmp_path: Path) -> None:
    # A new interpreter: fsck forks its helper only where no other thread runs, and in CI's worker earlier tests had
    # left threads (the helper was never forked, and these tests checked nothing of it).
    in_fresh_process(__name__, "_helper_verifies", tmp_path)


def _helper_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, beside, truncated = _damaged_copies(tmp_path)
    expected = _run(alone, False, tmp_path / "alone.log", monkeypatch)
    sound = _verified(alone)
    assert len(expected[0]) >= 3 and len(sound) == 3  # the damage named; the three sound packs verified
    assert _run(beside, True, tmp_path / "beside.log", monkeypatch) == expected
    helped, who = _who(tmp_path / "beside.log")
    packs = sorted(path.name[:-len(".pack")] for path in (beside / "packs").iterdir())
    assert set(packs[-2:]) <= helped and packs[0] not in helped  # (sent the last packs, two ahead)
    assert {pack for pid, pack in who if pid != os.getpid()} == helped - {truncated}  # (not sealed: not read)
    # A pack the helper verified whole is not verified again; a damaged one is, here, where its damage is named.
    assert [pack for pid, pack in who if pid == os.getpid()] == [pack for pack in packs if pack not in helped & sound]
    # Nor hashed again here: the helper answers the digest it hashed the pack to before verifying it (main hashed
    # each pack the helper verified a second time, and read its new file whole)
    hashed_here = set(_hashed_here(tmp_path / "beside.log"))
    assert sound - helped <= hashed_here and not hashed_here & helped & sound
    assert _verified(beside) == sound
    assert _run(beside, True, tmp_path / "again.log", monkeypatch) == expected  # (and a second fsck agrees)


def test_one_cpu_allowed_forks_no_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store(tmp_path / "a", 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    problems, files = _run(tmp_path / "a", True, tmp_path / "log", monkeypatch)
    assert problems == [] and len(files) == 4
    helped, who = _who(tmp_path / "log")
    assert not helped and {pid for pid, _ in who} == {os.getpid()} and len(who) == 4


def test_a_helper_killed_at_work_leaves_its_packs_to_fsck(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_helper_killed", tmp_path)  # (its timeout: a dead helper's answers awaited would hang)


def _helper_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone, beside, _ = _damaged_copies(tmp_path)
    expected = _run(alone, False, tmp_path / "alone.log", monkeypatch)
    parent = os.getpid()
    verify_whole, calls = fsck_beside.verify_whole, [0]

    def killed_second(root: Path, packs_dir: Path, tmp_dir: Path, pack: str, by_arrays: bool = False
                      ) -> bytes | None:
        calls[0] += 1  # (the helper's own count: it is forked)
        if os.getpid() != parent and calls[0] == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # after the first pack it verifies
        return verify_whole(root, packs_dir, tmp_dir, pack, by_arrays)

    monkeypatch.setattr(fsck_beside, "verify_whole", killed_second)
    assert _run(beside, True, tmp_path / "beside.log", monkeypatch) == expected
    helped, _ = _who(tmp_path / "beside.log")
    assert len(helped) >= 2, "forked, and killed at its second pack"


def test_past_rows_held_the_helper_makes_its_files_by_arrays(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_helper_by_arrays", tmp_path)  # (no thread left by earlier tests: the helper forks)


def _helper_by_arrays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ROWS_HELD (fsck imports numpy for the index's keys) the helper imports it before its first pack and makes
    its edges files by arrays; fsck's own process does not beside the packs (its memory's peak): the files and the
    report are those of one process's fsck."""
    from clawstore.store.core import edgefile, index
    from clawstore.store.services import fsck_keys

    monkeypatch.setattr(index, "SMALL_ROWS", 8)  # (each commit's segment a table: what the keys are made of)
    monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    _store(tmp_path / "a", 6)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    log, by_arrays = tmp_path / "arrays.log", edgefile._tokens_by_arrays

    def noted(*args: Any) -> Any:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        return by_arrays(*args)

    monkeypatch.setattr(edgefile, "_tokens_by_arrays", noted)
    assert "numpy" not in sys.modules
    beside = _run(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch)
    helped, _ = _who(tmp_path / "beside.log")
    pids = log.read_text().split()
    assert len(pids) == len(helped) >= 2 and str(os.getpid()) not in pids
    assert "numpy" in sys.modules  # (imported here for the index's keys, once the packs were verified)
    assert _run(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch) == beside
