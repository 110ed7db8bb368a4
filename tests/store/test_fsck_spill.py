"""fsck's grouped rows (store/services/fsck_spill.py) hold at most BUDGET bytes as Python holds them, however many are
added: the rest is spilled, and every pack's rows come back whole, in the order added."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.store.services import fsck_spill
from clawstore.store.services.fsck_spill import PackRows
from tests.support.fresh import measured_in_fresh_process


def _row(i: int) -> bytes:
    return i.to_bytes(8, "little") * 9 + b"x"  # (73 bytes: a record's row, fsck._RECORD_ROW)


def held_peak(root: str, rows: str) -> int:
    """tracemalloc's peak while `rows` rows over 14 packs are added (in a fresh interpreter)."""
    tracemalloc.start()
    with PackRows(Path(root)) as grouped:
        for i in range(int(rows)):
            grouped.add(f"pack{i % 14}", _row(i))
        peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_the_rows_held_are_bounded_by_the_budget_as_python_holds_them(tmp_path: Path) -> None:
    small = measured_in_fresh_process(held_peak, tmp_path, 20_000)
    large = measured_in_fresh_process(held_peak, tmp_path, 60_000)  # (4.4 MB of rows' bytes: the budget three times)
    # main counted a row's bytes alone against 8 MiB (9b6df0d9^): 6.9 MB held at the peak here, 15.0 MB at 200,000
    # rows; now 2.41 MB at both
    assert large < fsck_spill.BUDGET + (512 << 10), (small, large)


def test_every_pack_gets_its_rows_back_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsck_spill, "BUDGET", 4 << 10)
    added: dict[str, list[bytes]] = {}
    with PackRows(tmp_path) as grouped:
        for i in range(5_000):
            pack = f"pack{i * 7 % 5}" if i % 3 else ""
            grouped.add(pack, _row(i))
            added.setdefault(pack, []).append(_row(i))
        assert grouped.packs() == set(added)
        for pack in sorted(added):
            assert grouped.take(pack) == added[pack]
        assert grouped.packs() == set() and grouped.take("pack1") == []
