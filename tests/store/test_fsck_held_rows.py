"""fsck holds the index's object rows for its look-ups (fsck_reach.HELD: 52 bytes an object) while it groups the records
and while it checks them, not while it verifies the packs (the first fsck's peak): measured in a fresh interpreter."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from clawstore.store import edges
from clawstore.store.core import ids, index
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services import fsck_spill
from clawstore.store.services.fsck import fsck
from tests.store.test_fsck_memory import _campaign
from tests.support.fresh import measured_in_fresh_process


def held_while_verifying(root: str, runs: str) -> int:
    """The most tracemalloc counts held as a pack's verification starts, in a first fsck of a store of `runs` runs
    (4 objects and an entry each; the constant buffers shrunk)."""
    fsck_spill.BUDGET = 32 << 10
    edges.REGION = ids.FILE_CHUNK = 64 << 10
    index.SMALL_ROWS = 64  # (each batch's segment a table read in place, whose rows the look-ups hold)
    store = _campaign(Path(root) / runs, int(runs))[0]
    store.runtime.index.reload()
    verify, held = fsck_module._verify_pack, [0]

    def measured(*args: object, **kwargs: object) -> set[int]:
        held[0] = max(held[0], tracemalloc.get_traced_memory()[0])
        return verify(*args, **kwargs)  # type: ignore[arg-type]

    fsck_module._verify_pack = measured  # type: ignore[assignment]
    tracemalloc.start()
    report = fsck(store)
    tracemalloc.stop()
    assert report.problems == [] and report.actions == int(runs)
    return held[0]


def test_the_index_rows_are_not_held_while_the_packs_are_verified(tmp_path: Path) -> None:
    small = measured_in_fresh_process(held_while_verifying, tmp_path, 600)
    large = measured_in_fresh_process(held_while_verifying, tmp_path, 1800)
    # 4,800 more objects: held rows would be 250 KB more (52 bytes each); main held them from the grouping on (the code
    # before, 5baa6418^: 346 -> 668 KB, +322; now 269 -> 349 KB, +80; at 3,000 runs +687 before and +187 now)
    assert large < small + (200 << 10), (small, large)
