"""An object found in a big index segment is kept as found in that table (`Table.hits`): a build asks for the same few
objects again run after run, and each answer was a row read, a system call. What is kept answers as the row does,
stays within HITS_HELD, and never keeps a miss."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from clawstore.store.core import index
from clawstore.store.core.index import ActionEntry, Entries, Segment, new_segment_name, open_table, write_segment

PACKS = [bytes([i]) * 16 for i in range(3)]


def _table_of(tmp_path: Path, rng: random.Random, objects: int) -> tuple[Entries, Segment]:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    segment = Segment(new_segment_name())
    for _ in range(objects):
        segment.objects[rng.randbytes(32)] = (rng.choice(PACKS).hex(), rng.randrange(1 << 40), rng.randrange(1 << 20))
    for _ in range(100):
        segment.actions[rng.randbytes(32)] = ActionEntry(rng.randbytes(32), rng.randrange(1 << 60), PACKS[0].hex(), 1)
    write_segment(index_dir, tmp_path, segment)
    return Entries(tables=(open_table(index_dir, segment.name),)), segment


def _counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = os.pread
    monkeypatch.setattr(index.os, "pread", lambda fd, n, at: reads.append(n) or real(fd, n, at))
    return reads


def test_an_object_asked_again_is_answered_without_reading_its_row(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Five objects asked 200 times each (a build's check outputs, results, system prompt): five row reads, not 1,000;
    every answer the segment's."""
    rng = random.Random(3)
    entries, segment = _table_of(tmp_path, rng, 20_000)
    assert entries.find_object(rng.randbytes(32)) is None  # (the table's lookup built before reads are counted)
    reads = _counted_reads(monkeypatch)
    hot = list(segment.objects)[:5]
    for _ in range(200):
        for digest in hot:
            assert entries.find_object(digest) == segment.objects[digest]
    assert len(reads) == len(hot), f"{len(reads)} row reads for {len(hot)} objects asked 200 times each"


def test_what_is_kept_answers_as_the_rows_do_within_its_bound_and_keeps_no_miss(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for 16, 3,000 lookups of 40 present objects and absent ones mixed in random order: each present one
    gives its segment's place, each absent one None; the table never holds more than 16, nor an absent one."""
    monkeypatch.setattr(index, "HITS_HELD", 16)
    rng = random.Random(4)
    entries, segment = _table_of(tmp_path, rng, 5_000)
    present = list(segment.objects)[::125]
    absent = [rng.randbytes(32) for _ in range(40)]
    absent += [digest[:6] + rng.randbytes(26) for digest in present]  # (a present one's bucket and tag: its row read)
    table = entries.tables[0]
    for _ in range(3_000):
        digest = rng.choice(present + absent)
        assert entries.find_object(digest) == segment.objects.get(digest)
        assert len(table.hits) <= 16
        assert not table.hits.keys() - set(present)
