"""An index segment is written in a few system calls, not one a row: the group commit publishes one per window, in its
own thread, and each write handed the interpreter lock to the build's threads and back (docs/scale/building.md,
Session 63). Chunks a generator yields are still never held all at once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.host import durable
from clawstore.host.durable import write_file_atomic
from clawstore.store.core.index import ActionEntry, Segment, read_segment, write_segment

PACK = "ab" * 16


def _count_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = os.write

    def counted(fd: int, data: bytes | memoryview) -> int:
        sizes.append(len(data))
        return real(fd, data)

    monkeypatch.setattr(os, "write", counted)
    return sizes


def test_a_segment_of_a_thousand_actions_is_one_write_and_reads_back(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    index_dir, tmp = tmp_path / "index", tmp_path / "tmp"
    index_dir.mkdir()
    tmp.mkdir()
    actions = {i.to_bytes(32, "big"): ActionEntry(bytes([i % 251 + 1]) * 32, 10**18 + i, PACK, 4096 * i)
               for i in range(1000)}
    objects = {(i + 7).to_bytes(32, "big"): (PACK, i, 10) for i in range(300)}
    segment = Segment("c" * 32, actions=actions, objects=objects)
    sizes = _count_writes(monkeypatch)
    write_segment(index_dir, tmp, segment)
    monkeypatch.undo()
    # (a write a row before: 1,000 of 84 bytes and more; now a write a run of COALESCE_BYTES)
    assert len(sizes) <= 1 + sum(sizes) // durable.COALESCE_BYTES < 10, sizes
    back = read_segment(index_dir, segment.name)
    assert back.actions == actions and back.objects == objects


def test_many_small_chunks_go_in_bounded_pieces_and_land_whole(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def chunks() -> Iterator[bytes]:  # 5 MiB in 100-byte chunks, one large chunk in the middle
        for i in range(26_000):
            yield bytes([i % 256]) * 100
        yield b"L" * (3 << 20)
        for i in range(26_000):
            yield bytes([i % 256]) * 100

    sizes = _count_writes(monkeypatch)
    target = tmp_path / "out"
    write_file_atomic(target, chunks(), tmp_path)
    monkeypatch.undo()
    assert b"".join(chunks()) == target.read_bytes()
    small = [size for size in sizes if size != 3 << 20]
    assert 3 << 20 in sizes  # a large chunk is written as it is, not copied into a run
    assert max(small) <= durable.COALESCE_BYTES + 100  # memory held for a run: bounded
    assert len(small) <= sum(small) // durable.COALESCE_BYTES + 2, len(small)  # (two runs: each ends once short)
