"""Past fsck_keys.ROWS_HELD fsck groups the records after the packs are verified (session 62; before, beside them):
the index it then reads may put a record in a pack a gc wrote since, which fsck never verified. Beside a gc that
copies a live run out of a pack of garbage each round (the pack deleted, the index swapped), every fsck, by keys and
by rows, reports the store clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import index
from clawstore.store.services.fsck import fsck
from tests.store.test_fsck_keys_beside import fscks_while
from tests.store.test_fsck_memory import _campaign

GC = """
import sys, time
from clawstore.store import Store
from clawstore.store.actions import put_action
from clawstore.store.core import index
from clawstore.store.headdoc import write_head
from clawstore.store.services.gc import collect
from tests.support.storefiles import age_packs
index.SMALL_ROWS = 64
end = time.monotonic() + float(sys.argv[2])
n = rewritten = 0
while time.monotonic() < end:  # (a live run among garbage: gc copies the run out, deletes the pack, swaps the index)
    store = Store(sys.argv[1], create=False)
    with store.batch():
        for i in range(150):
            store.put_json({"junk": n, "i": i})
        key = store.put_json({"node": "late", "n": n})
        artifact = store.put_bytes(b"late artifact %d" % n)
        record = put_action(store, key, {"kind": "run", "key": key, "input": key, "outputs": {"artifact": artifact}})
        node = {"kind": "run", "key": key, "record": record,
                "address": {"model_id": "m", "case_id": "c%05d" % n, "repetition": 0}}
        store.set_ref("campaigns/late%d" % n, write_head(store, {"campaign": "late%d" % n}, [node]))
    store.runtime.close_writer()
    age_packs(store, 7200)
    rewritten += collect(store, grace_s=0, max_unused=0).packs_rewritten
    n += 1
print(n, rewritten)
"""


def test_fsck_grouping_after_the_packs_beside_a_gc_copying_live_records_reports_it_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "SMALL_ROWS", 64)
    store = _campaign(tmp_path / "store", 300)[0]
    assert fsck(store).problems == []
    out, reports = fscks_while(GC, store.root, monkeypatch)
    rounds, rewritten = map(int, out.split())
    assert rounds >= 10 and rewritten >= 10 and len(reports) >= 20, (out, len(reports))
    bad = [problems for problems in reports if problems]
    assert not bad, (len(bad), len(reports), bad[0][:2])
    assert fsck(Store(store.root, create=False)).problems == []
