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
from clawstore.store.services import fsck_keys
from clawstore.store.services.fsck import fsck
from tests.store.test_fsck_memory import _campaign

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
