"""A segment's header (what it replaces) is read without the rest of the segment: every read command's first lookup
lists the index, and a merge replacing hundreds of segments read whole held megabytes it did not need."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store.core.index import Segment, read_segment, segment_path, write_segment
from tests.support.fresh import measured_in_fresh_process

PACK = "ab" * 16


def header_peak_alone(index_dir: str, name: str) -> tuple[list[str], bool, int]:
    """(what the segment replaces, whether it is pure, the peak bytes traced reading its header). Called in a new
    interpreter (measured_in_fresh_process): the bound is 200 KB, which a test worker's leftovers (their threads, their
    garbage's finalizers) could eat."""
    tracemalloc.start()
    try:
        header = read_segment(Path(index_dir), name, header_only=True)
        return header.replaces, header.pure, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_header_of_a_merge_replacing_many_segments_is_read_without_its_objects(tmp_path: Path) -> None:
    index_dir, tmp = tmp_path / "index", tmp_path / "tmp"
    index_dir.mkdir()
    tmp.mkdir()
    replaces = [f"{i:032x}" for i in range(600)]  # past the first read's 4 KB: 9.6 KB of names
    objects = {i.to_bytes(32, "big"): (PACK, i, 1) for i in range(40_000)}
    merge = Segment("f" * 32, pure=True, replaces=replaces, objects=objects)
    write_segment(index_dir, tmp, merge)
    size = segment_path(index_dir, merge.name).stat().st_size
    assert size > 1_500_000
    replaced, pure, peak = measured_in_fresh_process(header_peak_alone, index_dir, merge.name)
    assert (replaced, pure) == (replaces, True)
    assert peak < 200_000, peak  # the names it replaces, not the segment (1.7 MB here)
    assert read_segment(index_dir, merge.name).objects == objects  # (the whole segment still reads)


def test_a_header_cut_short_is_named_truncated(tmp_path: Path) -> None:
    index_dir, tmp = tmp_path / "index", tmp_path / "tmp"
    index_dir.mkdir()
    tmp.mkdir()
    merge = Segment("e" * 32, pure=True, replaces=[f"{i:032x}" for i in range(600)])
    write_segment(index_dir, tmp, merge)
    path = segment_path(index_dir, merge.name)
    path.write_bytes(path.read_bytes()[:6000])
    with pytest.raises(StoreError, match="truncated"):
        read_segment(index_dir, merge.name, header_only=True)
