"""The index's rule for action-cache entries: the newest time wins, whatever order segments are read
in, and within one segment too (claw never writes a key twice in one, but a reader must not care)."""

from __future__ import annotations

import itertools
import struct
from collections import Counter
from pathlib import Path

import blake3
import pytest

from clawstore.store import Store
from clawstore.store.core import index, runtime
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


def test_own_segments_and_merges_are_never_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup of another thread lists the index just after each segment this process writes (before it
    took the segment in): it takes the segment from memory. Compaction takes its inputs, segments this
    process wrote, from memory too; a merge of segments the view holds is not read nor taken in again. The
    view stays exact."""
    store = Store(tmp_path / "store")
    full_reads: Counter[str] = Counter()
    real_read, real_write = index.open_table, index.write_segment

    def counted_read(index_dir: Path, name: str, verify: bool = True) -> index.Table:
        full_reads[name] += 1
        return real_read(index_dir, name, verify)

    def write_then_look(index_dir: Path, tmp_dir: Path, segment: Segment) -> None:
        real_write(index_dir, tmp_dir, segment)
        store.runtime.index.refresh()

    monkeypatch.setattr(index, "open_table", counted_read)
    monkeypatch.setattr(index, "write_segment", write_then_look)
    monkeypatch.setattr(runtime, "write_segment", write_then_look)
    ids = [store.put_bytes(b"object %d" % i) for i in range(3 * index.COMPACT_AT)]  # a commit each
    merges = [name for name in index.list_segments(store.root / "index")
              if index.read_segment(store.root / "index", name, header_only=True).replaces]
    assert merges and len(index.list_segments(store.root / "index")) < index.COMPACT_AT
    assert not full_reads  # (before: each segment read once more, as a merge's input)
    fresh = IndexView(store.root / "index", store.root / "tmp", store.root / "locks")
    fresh.refresh()
    assert store.runtime.index.objects == fresh.objects and all(store.has(oid) for oid in ids)


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    full_reads: Counter[str] = Counter()
    real_read = index.open_table

    def counted_read(index_dir: Path, name: str, verify: bool = True) -> index.Table:
        full_reads[name] += 1
        return real_read(index_dir, name, verify)

    monkeypatch.setattr(index, "open_table", counted_read)
    return full_reads


def _exact(store: Store) -> dict[bytes, tuple[str, int, int]]:
    """The objects a fresh reader of the store's index/ sees (another process starting now)."""
    fresh = IndexView(store.root / "index", store.root / "tmp", store.root / "locks")
    fresh.refresh()
    assert fresh.actions == store.runtime.index.actions
    return fresh.objects


def test_a_merge_reads_the_segments_other_processes_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments another process published meanwhile are not this process's: a merge reads them from
    index/, and takes its own from memory; what it writes holds both."""
    store = Store(tmp_path / "store")
    store.put_bytes(b"first")
    full_reads = _counting_reads(monkeypatch)
    others = [Segment(index.new_segment_name(), objects={bytes([i]) * 32: (PACK, i, 1)},
                      actions={bytes([100 + i]) * 32: _entry(i, 1000 + i)}) for i in range(index.COMPACT_AT // 2)]
    for segment in others:  # as another process publishes them
        write_segment(store.root / "index", store.root / "tmp", segment)
    ids = [store.put_bytes(b"object %d" % i) for i in range(2 * index.COMPACT_AT)]  # a commit each: merges
    assert len(index.list_segments(store.root / "index")) < index.COMPACT_AT
    assert set(full_reads) <= {segment.name for segment in others}  # never its own
    assert not {segment.name for segment in others} & set(index.list_segments(store.root / "index"))  # merged
    objects = _exact(store)
    assert objects == store.runtime.index.objects and all(store.has(oid) for oid in ids)
    assert all(segment.objects.items() <= objects.items() for segment in others)
    actions = store.runtime.index.actions
    assert all(actions[key] == entry for segment in others for key, entry in segment.actions.items())


def test_big_segments_are_merged_by_streaming_and_looked_up_in_place(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past SMALL_ROWS a segment is mapped, not held as dicts, and a merge of such segments streams their sorted
    rows into a file (write_merged): what every reader sees is the same, and the view holds no dict of them."""
    monkeypatch.setattr(index, "SMALL_ROWS", 4)
    store = Store(tmp_path / "store")
    streamed: list[str] = []
    real_merge = index.write_merged

    def counted_merge(index_dir: Path, tmp_dir: Path, name: str, replaces: list[str],
                      parts: list[index.Part]) -> index.Table:
        streamed.append(name)
        return real_merge(index_dir, tmp_dir, name, replaces, parts)

    monkeypatch.setattr(index, "write_merged", counted_merge)
    ids = []
    for n in range(3 * index.COMPACT_AT):
        with store.batch():  # a commit of 6 objects each: a big segment
            ids += [store.put_bytes(b"object %d.%d" % (n, i)) for i in range(6)]
    assert streamed and len(index.list_segments(store.root / "index")) < index.COMPACT_AT
    entries = store.runtime.index._entries
    assert entries.tables and not entries.objects  # (all mapped)
    assert _exact(store) == store.runtime.index.objects and all(store.has(oid) for oid in ids)
    assert [oid for oid in store.iter_objects()] == sorted(ids)


def test_a_segment_merged_away_between_listing_and_reading_is_found_in_its_merge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup lists index/, and another process merges a listed segment (writes the merge, removes the
    segment) before the lookup reads it: the listing does not name the merge. The lookup lists again and
    finds the entry there (once a cross-process test's reader failed on an object just committed)."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    view = IndexView(index_dir, tmp_path, tmp_path)
    view.refresh()  # (an empty index, loaded)
    old = Segment(index.new_segment_name(), objects={KEY: (PACK, 0, 1)}, actions={OTHER: _entry(1, 7)})
    write_segment(index_dir, tmp_path, old)  # another process commits
    real_list = index.list_segments
    merged: list[str] = []

    def list_then_merge(where: Path) -> list[str]:
        names = real_list(where)
        if not merged:  # a third process merges right after this listing
            merge = Segment(index.new_segment_name(), pure=True, replaces=[old.name], objects=dict(old.objects),
                            actions=dict(old.actions))
            write_segment(index_dir, tmp_path, merge)
            index.remove_segments(index_dir, [old.name])
            merged.append(merge.name)
        return names

    monkeypatch.setattr(index, "list_segments", list_then_merge)
    assert view.find_object(KEY) == (PACK, 0, 1)
    assert view.find_action(OTHER) == _entry(1, 7) and view.loaded == set(merged)
