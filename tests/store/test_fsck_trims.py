"""fsck gives the heap back (heap.trim) as it lets packs, groups and edges files go (session 62), but a trim walks
the heaps (~0.1 ms): one after each of 1,500 packs of 5 objects cost a later fsck +17 % CPU. It trims once TRIMMED
rows were let go: after each pack at scale (~75,000 blobs), once in thousands of small ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.host import heap
from clawstore.store import Store
from clawstore.store.services import fsck as fsck_module
from clawstore.store.services import fsck_reach
from clawstore.store.services.fsck import fsck

PACKS = 30  # (on the code before the trims were paced, d5c3d064^: 32 trims for 30 packs, as 302 for 300)


def _small_packs(root: Path) -> Store:
    store = Store(root)
    for p in range(PACKS):
        with store.batch():
            for i in range(5):
                store.put_json({"pack": p, "i": i})
        store.runtime.close_writer()
    return store


def _trims(store: Store, monkeypatch: pytest.MonkeyPatch) -> int:
    calls: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: calls.append(1))
    assert fsck(Store(store.root, create=False)).problems == []
    monkeypatch.undo()
    return len(calls)


@pytest.mark.parametrize("first", [True, False])
def test_many_small_packs_are_not_each_followed_by_a_trim(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: bool) -> None:
    store = _small_packs(tmp_path / "store")
    if not first:
        assert fsck(store).problems == []  # (each pack's edges file written: the later fsck reads its table alone)
    assert _trims(store, monkeypatch) <= 3  # (the grouping's, the end's; before: one a pack, 30+)


def test_packs_of_TRIMMED_rows_are_each_followed_by_a_trim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _small_packs(tmp_path / "store")
    for module in (fsck_module, fsck_reach):
        monkeypatch.setattr(module, "TRIMMED", 5)
    assert _trims(store, monkeypatch) >= PACKS
