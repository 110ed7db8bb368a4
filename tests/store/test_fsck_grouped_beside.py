"""The records' grouping on a helper of its own (services/fsck.py `_GroupedBeside`, fsck_beside.Once): forked before
the packs are verified, it groups the records that entries and heads' nodes name into fsck's spill file and answers
where its runs are, the refs it read and the heads whose nodes it added. fsck takes that answer only whole and
accounting for exactly the file (its runs tiling it, each run's count its length, the file hashing as the helper
hashed it); a helper killed, failing, or answering cut, garbled or not what it wrote leaves fsck grouping the records
itself after the packs, with the same report: no bad entry or bad head node hidden. By the index's rows and by its
keys (past ROWS_HELD, where fsck's own process grouped them after the packs)."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services import fsck_beside, fsck_keys, fsck_spill
from clawstore.store.services.fsck import fsck
from clawstore.store.services.fsck_spill import PackRows
from tests.store.test_fsck_groups_beside import PACKS, _damaged
from tests.support.fresh import in_fresh_process


def _report(root: Path, beside: bool, log: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """fsck of the store at `root`: what it found (the seconds aside; the index's objects counted too). The pid of
    each process that grouped the records is appended to `log`."""
    group = fsck_module._group_records

    def noted(store: Store, rows: PackRows) -> Any:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\n")
        return group(store, rows)

    monkeypatch.setattr(fsck_module, "_group_records", noted)
    report = fsck(Store(root), beside=beside)
    monkeypatch.setattr(fsck_module, "_group_records", group)
    return report.objects, report.actions, report.bad_actions, report.bad_head_nodes, report.bad_refs, report.problems


def _groupers(log: Path) -> list[int]:
    return [int(pid) for pid in log.read_text().split()]


def _stores(tmp_path: Path, by_keys: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Two copies of a store damaged three ways (an input document lost, an artifact damaged, an entry moved to
    another key's record: 3 bad entries, 2 bad head nodes); what one process's fsck reports of the first."""
    if by_keys:
        from clawstore.store.core import index

        monkeypatch.setattr(index, "SMALL_ROWS", 8)  # (each commit's segment a table: what the keys are made of)
        monkeypatch.setattr(fsck_keys, "ROWS_HELD", 0)
    _damaged(tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    expected = _report(tmp_path / "a", False, tmp_path / "alone.log", monkeypatch)
    objects, actions, bad_actions, bad_nodes, bad_refs, _ = expected
    assert objects > 3 * 8 * PACKS and actions == 8 * PACKS and not bad_refs
    assert len(bad_actions) == 3 and len(bad_nodes["campaigns/x"]) == 2
    assert _groupers(tmp_path / "alone.log") == [os.getpid()]
    return expected


@pytest.mark.parametrize("by_keys", [False, True])
def test_the_helper_groups_the_records_and_fsck_reports_the_same(tmp_path: Path, by_keys: bool) -> None:
    in_fresh_process(__name__, "_helper_groups", tmp_path, _walk(by_keys))  # (fsck forks only with no thread)


def _walk(by_keys: bool) -> str:
    return "keys" if by_keys else "rows"  # (in_fresh_process passes its arguments as text)


def _helper_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: str) -> None:
    from clawstore.store.core.index import ObjectsMap

    by_keys = walk == "keys"
    expected = _stores(tmp_path, by_keys, monkeypatch)
    counted, count = tmp_path / "counted.log", ObjectsMap.__len__

    def noted(objects: ObjectsMap) -> int:
        with open(counted, "a") as out:
            out.write(f"{os.getpid()}\n")
        return count(objects)

    monkeypatch.setattr(ObjectsMap, "__len__", noted)
    assert _report(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch) == expected
    groupers = _groupers(tmp_path / "beside.log")
    assert len(groupers) == 1 and groupers[0] != os.getpid(), "grouped by the helper alone"
    assert _groupers(counted) == groupers, "the index's objects counted by the helper (a stream of them all)"


# How the grouping's helper goes wrong: each leaves fsck grouping the records itself
def _killed(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
    """SIGKILLed at work, once some of its rows were spilled to fsck's file."""
    add = PackRows.add

    def killed(rows: PackRows, pack: str, row: bytes) -> None:
        if os.getpid() != parent and rows._end:
            os.kill(os.getpid(), signal.SIGKILL)
        add(rows, pack, row)

    monkeypatch.setattr(PackRows, "add", killed)
    monkeypatch.setattr(fsck_spill, "BUDGET", 512)  # (spilled early: the file half written)


def _failed(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
    """An exception once its rows are spilled (it answers nothing)."""
    spilled = PackRows.spilled

    def failing(rows: PackRows) -> Any:
        found = spilled(rows)
        if os.getpid() != parent:
            raise OSError("no space left")
        return found

    monkeypatch.setattr(PackRows, "spilled", failing)


def _answered(change: Callable[[bytes], bytes]) -> Callable[[pytest.MonkeyPatch, int], None]:
    """Its answer changed on the way (the line it writes)."""
    def patch(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
        answer_once = fsck_beside._answer_once
        monkeypatch.setattr(fsck_beside, "_answer_once",
                            lambda work, answers: answer_once(lambda: change(work()), answers))
    return patch


def _run_left_out(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
    """A run it wrote left out of its answer (the file's end as written)."""
    spilled = PackRows.spilled

    def short(rows: PackRows) -> Any:
        runs, end = spilled(rows)
        return (runs[:-1] if os.getpid() != parent else runs), end

    monkeypatch.setattr(PackRows, "spilled", short)


def _row_changed(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
    """A row of the file changed after the helper hashed it (its runs and counts as written)."""
    digest = fsck_module._rows_digest

    def changed(file: int, end: int) -> str:
        found = digest(file, end)
        if os.getpid() != parent:
            byte = os.pread(file, 1, end - 1)
            os.pwrite(file, bytes([byte[0] ^ 1]), end - 1)
        return found

    monkeypatch.setattr(fsck_module, "_rows_digest", changed)


def _count_changed(monkeypatch: pytest.MonkeyPatch, parent: int) -> None:
    """A run's count one less than it wrote (its last row not taken), the file hashed after."""
    spilled = PackRows.spilled

    def fewer(rows: PackRows) -> Any:
        runs, end = spilled(rows)
        if os.getpid() != parent:
            _, offset, _ = runs[-1]
            file = rows.opened()
            count = int.from_bytes(os.pread(file, 4, offset), "little")
            os.pwrite(file, (count - 1).to_bytes(4, "little"), offset)
        return runs, end

    monkeypatch.setattr(PackRows, "spilled", fewer)


WRONG: dict[str, Callable[[pytest.MonkeyPatch, int], None]] = {
    "killed": _killed,
    "failed": _failed,
    "cut": _answered(lambda answer: answer[:len(answer) // 2]),
    "garbled": _answered(lambda answer: b"[garbled\n" + answer),
    "not json": _answered(lambda answer: b"{" + answer),
    "a run left out": _run_left_out,
    "a row changed": _row_changed,
    "a count changed": _count_changed,
    "a head number out of range": _answered(lambda answer: answer.replace(b'"added": [0]', b'"added": [7]')),
    "a ref's target not an id": _answered(lambda answer: answer.replace(b'"blake3:', b'"blake4:', 1)),
}


@pytest.mark.parametrize("by_keys", [False, True])
def test_a_helper_that_goes_wrong_leaves_the_grouping_to_fsck(tmp_path: Path, by_keys: bool) -> None:
    in_fresh_process(__name__, "_goes_wrong", tmp_path, _walk(by_keys), timeout=300)


def _goes_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, walk: str) -> None:
    expected = _stores(tmp_path, walk == "keys", monkeypatch)
    for number, (how, wrong) in enumerate(WRONG.items()):
        root, log = tmp_path / f"w{number}", tmp_path / f"w{number}.log"
        shutil.copytree(tmp_path / "b", root)
        with monkeypatch.context() as patch:
            wrong(patch, os.getpid())
            found = _report(root, True, log, patch)
        assert found == expected, how
        groupers = _groupers(log)
        assert len(groupers) == 2 and groupers[0] != os.getpid() and groupers[1] == os.getpid(), (how, groupers)


def test_grouped_by_the_helper_beside_a_gc_copying_live_records_reports_it_clean(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_beside_a_gc", tmp_path, timeout=600)


def _beside_a_gc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper groups by the index as it was before the packs were verified: beside a gc that copies a live run
    out of a pack of garbage each round (the pack deleted, the index swapped), every fsck, by keys and by rows, still
    reports the store clean (test_fsck_grouped_after.py: the same with the records grouped after the packs)."""
    import subprocess
    import sys

    from clawstore.store.core import index
    from tests.store.test_fsck_grouped_after import GC
    from tests.store.test_fsck_memory import _campaign

    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store = _campaign(tmp_path / "store", 300)[0]
    assert fsck(store).problems == []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    gc = subprocess.Popen([sys.executable, "-c", GC, str(store.root), "8"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    reports, log = [], tmp_path / "grouped.log"
    try:
        while gc.poll() is None:
            for rows_held in (0, fsck_keys.ROWS_HELD):
                monkeypatch.setattr(fsck_keys, "ROWS_HELD", rows_held)
                reports.append(_report(store.root, True, log, monkeypatch)[-1])
    finally:
        out, err = gc.communicate(timeout=60)
    assert gc.returncode == 0, err[-2000:]
    rounds, rewritten = map(int, out.split())
    assert rounds >= 10 and rewritten >= 10 and len(reports) >= 20, (out, len(reports))
    assert not [problems for problems in reports if problems]
    assert os.getpid() not in _groupers(log), "grouped by the helper"


def test_fsck_stopped_by_an_error_leaves_no_helper_grouping(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_stopped", tmp_path)


def _stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error while the packs are verified (the helper still grouping: slowed here) ends fsck with the helper ended
    and reaped, not left at work until its grouping is done."""
    import time

    from clawstore.errors import StoreError

    _damaged(tmp_path / "a")
    group = fsck_module._group_records

    def slow(store: Store, rows: PackRows) -> Any:
        time.sleep(30)
        return group(store, rows)

    def failing(*args: Any) -> None:
        raise StoreError("the disk went away")

    monkeypatch.setattr(fsck_module, "_group_records", slow)
    monkeypatch.setattr(fsck_module, "_match", failing)
    with pytest.raises(StoreError):
        fsck(Store(tmp_path / "a"), beside=True)
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # (no child left: each helper killed and reaped)


def test_one_cpu_allowed_groups_in_fsck_as_before(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_one_cpu", tmp_path)


def _one_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _stores(tmp_path, False, monkeypatch)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert _report(tmp_path / "b", True, tmp_path / "beside.log", monkeypatch) == expected
    assert _groupers(tmp_path / "beside.log") == [os.getpid()], "no helper forked: grouped here"
