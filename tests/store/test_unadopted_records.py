"""gc's roots from killed builds (store/buildlogs.py `unadopted_records`): every record a killed build's journal names,
a node a fix line failed after all left out, read a line at a time; none once a later build told of it, none of a
build that ended; a damaged journal is a StoreError naming it (gc cannot know what it keeps)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.buildlogs import (
    TOLD_BY,
    UNJOURNALED_WINDOW_S,
    JournalsRead,
    append_journal,
    builds_dir,
    encode_node,
    unadopted_records,
    unadopted_windows,
)

R = ["blake3:" + c * 64 for c in "abcd"]


def _killed(store: Store, build_id: str, state: str = "running", **fields: object) -> None:
    append_journal(store.root, build_id, [encode_node({"kind": "run", "record": R[0]}),
                                          encode_node({"kind": "run", "record": R[1]}),
                                          encode_node({"kind": "run", "record": None}),
                                          b'{"fix":1}',
                                          encode_node({"kind": "judge", "record": R[2]})], create=True)
    (builds_dir(store.root) / f"{build_id}.json").write_text(json.dumps({"state": state, **fields}))


def test_a_killed_build_s_records_are_roots_but_those_a_fix_failed(tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        _killed(store, "b1")
        assert list(unadopted_records(store)) == [("b1", R[0]), ("b1", R[2])]


@pytest.mark.parametrize("state, fields", [("running", {TOLD_BY: "b2"}), ("complete", {}), ("refused", {})])
def test_none_once_told_of_or_ended(tmp_path: Path, state: str, fields: dict[str, object]) -> None:
    with Store(tmp_path / "store") as store:
        _killed(store, "b1", state, **fields)
        assert list(unadopted_records(store)) == []


def test_lines_read_by_their_record_alone_name_what_json_reads_them_to_name(tmp_path: Path) -> None:
    """A line's record is decoded alone (msgspec, session 77: a third of the time); a line that reading does not take
    (not an object, a record not a string, JSON only Python's json reads) is read as before, whole."""
    lines = [b'{"kind":"run","record":"%s","address":{"record":"%s"}}' % (R[0].encode(), R[3].encode()),
             b'["a node", "not an object"]', b'{"record":5}', b'{"score":NaN,"record":"%s"}' % R[1].encode(),
             b'{"record":"%s","record":"%s"}' % (R[3].encode(), R[2].encode())]
    with Store(tmp_path / "store") as store:
        append_journal(store.root, "b1", lines, create=True)
        (builds_dir(store.root) / "b1.json").write_text(json.dumps({"state": "running"}))
        assert [record for _, record in unadopted_records(store)] == [R[0], R[1], R[2]]


def test_a_damaged_journal_stops_gc_naming_it(tmp_path: Path) -> None:
    with Store(tmp_path / "store") as store:
        _killed(store, "b1")
        with open(builds_dir(store.root) / "b1.jsonl", "ab") as fh:
            fh.write(b"{not json\n")
        with pytest.raises(StoreError, match=r"b1\.jsonl: line 6: not a JSON node"):
            list(unadopted_records(store))


def test_gc_keeps_the_entries_written_around_an_untold_killed_build_s_last_log_write(tmp_path: Path) -> None:
    """What a killed build finished after its log's last write is in no journal: gc keeps every entry written within
    UNJOURNALED_WINDOW_S of that write (`unadopted_windows`: its journal's or log's mtime, the later); none once it is
    told of. Not every entry since it began: a killed build nobody builds again would keep all later ones."""
    with Store(tmp_path / "store") as store:
        assert unadopted_windows(store) == []
        _killed(store, "b1")
        last = 1_796_000_000.0
        for path in (builds_dir(store.root) / "b1.jsonl", builds_dir(store.root) / "b1.json"):
            os.utime(path, (last - 5, last - 5))
        os.utime(builds_dir(store.root) / "b1.json", (last, last))
        assert unadopted_windows(store) == [(last - UNJOURNALED_WINDOW_S, last + UNJOURNALED_WINDOW_S)]
        _killed(store, "b1", **{TOLD_BY: "b2"})
        assert unadopted_windows(store) == []


def test_a_journal_already_read_is_read_again_only_once_it_changed(tmp_path: Path) -> None:
    """gc reads the killed builds' journals before its plan and again under its locks, for builds killed meanwhile
    (~0.3 s a read at 10,000 × 5, session 77): with `read`, a journal the same as at its last read (the same file,
    size and mtime) is skipped; one that changed, or a build killed since, is read."""
    with Store(tmp_path / "store") as store:
        _killed(store, "b1")
        read = JournalsRead()
        assert list(unadopted_records(store, read)) == [("b1", R[0]), ("b1", R[2])]
        assert list(unadopted_records(store, read)) == [] and read.skipped == 2  # (its records marked already)
        _killed(store, "b2")  # killed between gc's two looks
        assert list(unadopted_records(store, read)) == [("b2", R[0]), ("b2", R[2])]
        append_journal(store.root, "b1", [encode_node({"kind": "run", "record": R[3]})])
        assert list(unadopted_records(store, read)) == [("b1", R[0]), ("b1", R[2]), ("b1", R[3])]
        assert list(unadopted_records(store)) == [("b1", R[0]), ("b1", R[2]), ("b1", R[3]), ("b2", R[0]),
                                                  ("b2", R[2])]  # (without `read`: every journal, as before)


@pytest.mark.parametrize("dry_run", [True, False])
def test_gc_reads_each_killed_build_s_journal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   dry_run: bool) -> None:
    """Before session 77 gc read each journal twice (both its marks of the roots), though nothing changed between."""
    from clawstore.store import buildlogs
    from clawstore.store.services.gc import collect

    with Store(tmp_path / "store") as store:
        kept = [store.put_json({"record": n}) for n in range(2)]
        append_journal(store.root, "b1", [encode_node({"kind": "run", "record": oid}) for oid in kept], create=True)
        (builds_dir(store.root) / "b1.json").write_text(json.dumps({"state": "running"}))
        opened: list[Path] = []
        real = buildlogs._journal_lines
        monkeypatch.setattr(buildlogs, "_journal_lines", lambda path: (opened.append(path), real(path))[1])
        report = collect(store, grace_s=0, dry_run=dry_run)
        assert report.roots == 2  # (its records counted among the roots, as when it was read twice)
        assert opened == [builds_dir(store.root) / "b1.jsonl"] * 2  # one read: its fix lines, then its records
        assert all(store.has(oid) for oid in kept)
