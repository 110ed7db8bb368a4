"""fsck by the index's keys (fsck_keys.ROWS_HELD = 0: its tables read in place, by the file each was opened as) beside
a writer appending to the index, whose commits merge the tables fsck is reading (their files removed meanwhile): every
fsck of the store, damaged in no way, reports it clean; and one by rows between them too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import index
from clawstore.store.core.packfile import iter_pack_ids, pack_path
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services import fsck_keys
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.store.test_fsck_memory import _campaign
from tests.support.storefiles import age_packs

WRITER = """
import sys, time
from clawstore.store import Store
from clawstore.store.core import index
index.SMALL_ROWS = 64  # (each commit's segment a table, merged as at scale)
store = Store(sys.argv[1], create=False)
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:
    with store.batch():
        for _ in range(100):
            store.put_json({"appended": n, "pad": "p" * 100})
            n += 1
    store.runtime.close_writer()
print(n)
"""


def test_fsck_by_keys_beside_a_writer_merging_the_index_reports_it_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store = _campaign(tmp_path / "store", 300)[0]
    assert fsck(store).problems == []
    segments = set(os.listdir(store.root / "index"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store.root), "8"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    reports, by_keys = [], 0
    try:
        while writer.poll() is None:
            for rows_held in (0, fsck_keys.ROWS_HELD):
                monkeypatch.setattr(fsck_keys, "ROWS_HELD", rows_held)
                reports.append(fsck(Store(store.root, create=False)).problems)
            by_keys += 1
    finally:
        out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err[-2000:]
    assert int(out) >= 1000 and by_keys >= 3, (out, by_keys)
    assert not segments & set(os.listdir(store.root / "index"))  # (the tables fsck began with merged away)
    assert all(problems == [] for problems in reports), [problems for problems in reports if problems][:1]


GC = """
import sys, time
from clawstore.store import Store
from clawstore.store.core import index
from clawstore.store.services.gc import collect
from tests.support.storefiles import age_packs
index.SMALL_ROWS = 64
end = time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < end:  # (a pack of objects nothing names, then a gc that deletes it and swaps the index)
    store = Store(sys.argv[1], create=False)
    with store.batch():
        for i in range(150):
            store.put_json({"junk": n, "i": i})
    store.runtime.close_writer()
    age_packs(store, 7200)
    collect(store, grace_s=0, max_unused=0)
    n += 1
print(n)
"""


def test_fsck_beside_a_gc_swapping_the_index_reports_no_object_the_index_no_longer_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gc deletes a pack of garbage and swaps the index meanwhile: an fsck that read the old index's entries of that
    pack before, and found the pack gone after, named each of them 'where the pack does not hold it' (by keys and by
    rows, ~3% of the fscks here): the index, now, no longer puts them there. Every fsck reports the store clean."""
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store = _campaign(tmp_path / "store", 300)[0]
    assert fsck(store).problems == []
    out, reports = fscks_while(GC, store.root, monkeypatch)
    assert int(out) >= 20 and len(reports) >= 40, (out, len(reports))
    bad = [problems for problems in reports if problems]
    assert not bad, (len(bad), len(reports), bad[0][:2])


def test_a_pack_a_gc_deletes_between_its_scan_and_its_verification_is_a_pack_gone_not_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window the test above hit once in CI: fsck scanned a pack, a gc deleted it (and swapped the index), then
    fsck opened it to verify its blobs: FileNotFoundError, a traceback. A pack gone then is what one gone before its
    scan is: its entries matched against nothing, and the index, now, no longer naming them, nothing reported."""
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store = _campaign(tmp_path / "store", 60)[0]
    with store.batch():
        for i in range(150):
            store.put_json({"junk": i})
    store.runtime.close_writer()
    age_packs(store, 7200)
    junk = max(iter_pack_ids(store.runtime.packs_dir), key=lambda pack: os.stat(
        pack_path(store.runtime.packs_dir, pack)).st_mtime_ns)
    real_scan = fsck_module.scan_pack

    def scanned_then_collected(path: Path) -> object:
        scan = real_scan(path)
        if path.name.startswith(junk):
            collect(Store(store.root, create=False), grace_s=0, max_unused=0)
            assert not path.exists()
        return scan

    monkeypatch.setattr(fsck_module, "scan_pack", scanned_then_collected)
    assert fsck(Store(store.root, create=False)).problems == []


def fscks_while(gc_script: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[list]]:
    """What fsck reports, by keys and by rows in turn, for as long as `gc_script` (a process of its own, given the
    store and 8 rounds) runs beside it; the script's output."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    gc = subprocess.Popen([sys.executable, "-c", gc_script, str(root), "8"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    reports: list[list] = []
    try:
        while gc.poll() is None:
            for rows_held in (0, fsck_keys.ROWS_HELD):
                monkeypatch.setattr(fsck_keys, "ROWS_HELD", rows_held)
                reports.append(fsck(Store(root, create=False)).problems)
    finally:
        out, err = gc.communicate(timeout=60)
    assert gc.returncode == 0, err[-2000:]
    return out, reports
