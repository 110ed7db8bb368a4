"""The index's rule for action-cache entries: the newest time wins, whatever order segments are read
in, and within one segment too (claw never writes a key twice in one, but a reader must not care)."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import blake3

from clawstore.store.core.index import (
    ActionEntry,
    IndexView,
    Segment,
    decode_segment,
    encode_segment,
    write_segment,
)

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))
PACK = "ab" * 16


def _entry(record: int, time_ns: int) -> ActionEntry:
    return ActionEntry(bytes([record + 1]) * 32, time_ns, PACK, record)  # (all zeros: a removed entry)


def test_the_newest_entry_wins_whatever_order_segments_are_read_in(tmp_path: Path) -> None:
    segments = [Segment(f"{i:032x}", actions={KEY: _entry(i, time_ns), OTHER: _entry(10 + i, 5)})
                for i, time_ns in enumerate((300, 100, 200))]
    for order in itertools.permutations(segments):
        index_dir = tmp_path / "".join(s.name[-1] for s in order)
        index_dir.mkdir()
        for segment in order:
            write_segment(index_dir, tmp_path, segment)
        view = IndexView(index_dir, tmp_path, tmp_path)
        view.refresh()
        assert view.actions[KEY] == _entry(0, 300)  # the newest, from whichever segment held it
        assert view.actions[OTHER].time_ns == 5  # equal times: one of them, any
        assert set(view.actions) == {KEY, OTHER}


def test_a_key_twice_in_one_segment_keeps_the_newest(tmp_path: Path) -> None:
    # encode_segment cannot write this (a dict has each key once): patch the bytes of a two-key
    # segment so that both rows name KEY, and seal it with a good checksum.
    data = encode_segment(Segment("0" * 32, actions={KEY: _entry(1, 500), OTHER: _entry(2, 900)}))
    body = bytearray(data[:-32])
    row = struct.calcsize("<32s32sqIQ")
    body[-row:-row + 32] = KEY  # the second row (OTHER sorts after KEY) now names KEY too
    damaged = bytes(body) + blake3.blake3(bytes(body)).digest()
    assert decode_segment("0" * 32, damaged).actions == {KEY: _entry(2, 900)}
