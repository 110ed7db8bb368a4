"""Big index segments are looked up where they lie (mapped, sorted rows): what a reader holds per entry, that every
lookup and pass agrees with a plain dict of the same segments, and that damage and disorder are refused."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import blake3
import pytest

from clawstore.store.core import index
from clawstore.store.core.index import (
    ActionEntry,
    BadSegmentError,
    Entries,
    IndexView,
    Segment,
    decode_segment,
    encode_segment,
    merge_action,
    new_segment_name,
    open_table,
    segment_path,
    write_segment,
)

PACKS = [bytes([i]) * 16 for i in range(3)]


def _segment(rng: random.Random, objects: int, actions: int, keys: list[bytes] = ()) -> Segment:  # type: ignore[assignment]
    segment = Segment(new_segment_name())
    for _ in range(objects):
        segment.objects[rng.randbytes(32)] = (rng.choice(PACKS).hex(), rng.randrange(1 << 40), rng.randrange(1 << 20))
    for key in [*keys, *(rng.randbytes(32) for _ in range(actions))]:
        record = rng.choice([None, rng.randbytes(32)]) if keys else rng.randbytes(32)
        segment.actions[key] = ActionEntry(record, rng.randrange(1 << 60), rng.choice(PACKS).hex(), rng.randrange(99))
    return segment


def _view(index_dir: Path) -> IndexView:
    view = IndexView(index_dir, index_dir.parent, index_dir.parent)
    view.refresh()
    return view


def _two_tables_and_dicts(tmp_path: Path, seed: int, sizes: tuple[int, ...], actions: int,
                          shared: int) -> tuple[Path, list[Segment], random.Random]:
    """Segments of these many objects written (SMALL_ROWS patched low: the big ones tables, the last in the dicts), the
    second also holding the first's first `shared` objects; the index dir, the segments and the rng that made them."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(seed)
    segments = [_segment(rng, n, actions) for n in sizes]
    segments[1].objects.update(list(segments[0].objects.items())[:shared])
    for segment in segments:
        write_segment(index_dir, tmp_path, segment)
    return index_dir, segments, rng


def test_opening_an_index_of_100000_entries_holds_under_60_bytes_each(tmp_path: Path) -> None:
    """(The dicts of before held ~280 bytes an entry, whatever their number: 208 MB of each read command at 10,000 x
    5. The tables hold 8.2 bytes an entry here, 8.3 at 200,060 entries, 9.4 at 44,504.)"""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(1)
    for objects, actions in ((45_000, 45_000), (5_000, 5_000), (30, 30)):
        write_segment(index_dir, tmp_path, _segment(rng, objects, actions))
    probe = rng.randbytes(32)
    tracemalloc.start()
    try:
        view = _view(index_dir)
        assert view.find_object(probe, look_again=False) is None  # (the first lookups build the fan-outs)
        assert view.find_action(probe, look_again=False) is None
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / 100_060 < 60, f"{held / 100_060:.1f} bytes per entry"
    assert len(view._entries.tables) == 2  # the two big ones mapped; the small one as dicts


def test_lookups_and_passes_agree_with_the_segments_merged_into_dicts(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables and dicts together, a key in several segments (newest wins, removed entries included), an object in two:
    every lookup, and the sorted streams, say what merging the segments into dicts says."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(2)
    shared = [rng.randbytes(32) for _ in range(40)]
    segments = [_segment(rng, n, n, shared) for n in (3000, 700, 10, 5)]
    segments[1].objects.update(list(segments[0].objects.items())[:100])  # (the same object twice)
    objects: dict[bytes, tuple[str, int, int]] = {}
    actions: dict[bytes, ActionEntry] = {}
    for segment in segments:
        write_segment(index_dir, tmp_path, segment)
        objects.update(segment.objects)
        for key, entry in segment.actions.items():
            merge_action(actions, key, entry)
    view = _view(index_dir)
    assert len(view._entries.tables) == 2 and view._entries.objects  # both kinds in play
    for digest in [*objects, *(rng.randbytes(32) for _ in range(500))]:
        loc = view.find_object(digest, look_again=False)
        assert loc is None if digest not in objects else loc in [s.objects.get(digest) for s in segments]
    for key in [*actions, *(rng.randbytes(32) for _ in range(500))]:
        assert view.actions.get(key) == actions.get(key)
        expected = actions.get(key)
        assert view.find_action(key, look_again=False) == (expected if expected and expected.record else None)
    assert [digest for digest, _ in view.objects.items()] == sorted(objects)
    assert list(view.actions.items()) == sorted(actions.items())
    assert len(view.objects) == len(objects) and set(view.objects.keys() - set(shared)) == set(objects)


def test_every_object_digest_at_once_is_what_the_sorted_stream_names(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`object_digests` (a push's and a pull's set of this store's objects) cuts each big table's digests from its rows
    a batch at a time, and takes the dicts' too: the set the merged stream names, an object in two segments once."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    monkeypatch.setattr(index, "_STREAM_ROWS", 64)  # (many batches, the last one short)
    index_dir, segments, _ = _two_tables_and_dicts(tmp_path, 3, (1000, 333, 20), 0, shared=50)
    view = _view(index_dir)
    assert len(view._entries.tables) == 2 and view._entries.objects
    assert view.object_digests() == {digest for digest, _ in view.objects.items()} == {
        digest for segment in segments for digest in segment.objects}
    assert len(view.object_digests()) == 1000 + 333 + 20  # (the 50 in two segments counted once)


def test_every_entry_at_once_is_each_keys_newest_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`entry_digests` (a push's whole store) cuts each big table's keys and records from its rows a batch at a time
    and takes the dicts' too: each key's newest entry with a record, as the merged stream says; a key in several
    segments (tables and dicts) settled by its newest entry, a newer removal hiding an older record."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    monkeypatch.setattr(index, "_STREAM_ROWS", 64)  # (many batches, the last one short)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(5)
    shared = [rng.randbytes(32) for _ in range(60)]
    segments = [_segment(rng, 0, n, shared) for n in (900, 400, 10, 5)]
    for segment in segments:
        write_segment(index_dir, tmp_path, segment)
    view = _view(index_dir)
    assert len(view._entries.tables) == 2 and view._entries.actions  # both kinds in play
    expected = {key: entry.record for key, entry in view.actions.items() if entry.record is not None}
    merged: dict[bytes, ActionEntry] = {}
    for segment in segments:
        for key, entry in segment.actions.items():
            merge_action(merged, key, entry)
    assert expected == {key: entry.record for key, entry in merged.items() if entry.record is not None}
    assert any(entry.record is None for entry in merged.values())  # (removals in play, some hiding a record)
    assert view.entry_digests() == expected


def test_a_key_twice_in_one_table_gives_its_newest_record_to_every_entry_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """claw writes a key once a segment, a reader does not rely on it: a table whose rows name a key twice, the later
    row older, gives `entry_digests` the newer row's record, as a lookup and the merged stream do."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(6)
    segment = _segment(rng, 0, 300)
    keys = sorted(segment.actions)
    first, second = segment.actions[keys[10]], segment.actions[keys[11]]
    segment.actions[keys[10]] = ActionEntry(rng.randbytes(32), 2_000, first.pack, first.offset)  # the newer row
    segment.actions[keys[11]] = ActionEntry(rng.randbytes(32), 1_000, second.pack, second.offset)
    body = bytearray(encode_segment(segment)[:-32])
    row = len(body) - index._ACT.size * (300 - 11)  # the second row's key becomes the first's
    body[row:row + 32] = keys[10]
    segment_path(index_dir, segment.name).write_bytes(bytes(body) + blake3.blake3(bytes(body)).digest())
    view = _view(index_dir)
    assert len(view._entries.tables) == 1
    newest = segment.actions[keys[10]].record
    assert view.actions.get(keys[10]).record == newest  # (what a lookup says)
    digests = view.entry_digests()
    assert digests[keys[10]] == newest and keys[11] not in digests and len(digests) == 299


@pytest.mark.parametrize("small_rows", [100, index.SMALL_ROWS])
def test_the_records_of_many_keys_at_once_are_what_each_lookup_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    small_rows: int) -> None:
    """A pull's own-entry look-ups (find_records): with big tables read in place and with every segment held as dicts,
    each key's record is find_action's (newest wins, a removed entry none), a miss none."""
    monkeypatch.setattr(index, "SMALL_ROWS", small_rows)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(4)
    shared = [rng.randbytes(32) for _ in range(40)]
    for n in (300, 70, 5):
        write_segment(index_dir, tmp_path, _segment(rng, 0, n, shared))
    view = _view(index_dir)
    assert bool(view._entries.tables) == (small_rows == 100)
    keys = [*view.actions.keys(), *(rng.randbytes(32) for _ in range(50))]
    rng.shuffle(keys)
    expected = [None if (entry := view.find_action(key, look_again=False)) is None else entry.record for key in keys]
    assert None in expected and any(expected)
    assert any(view.actions.get(key) is not None and view.actions.get(key).record is None for key in keys)  # (removed)
    assert view.find_records(keys) == expected


@pytest.mark.parametrize("held", ["all", "the first", "none"])
def test_held_rows_answer_every_lookup_as_the_tables_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        held: str) -> None:
    """fsck's look-ups (HeldObjects): the big tables' object rows read into memory while they fit its limit, the rest
    looked up in place, the small segments' dict first: every object found where the view finds it, every miss a
    miss, whichever tables fit."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(3)
    segments = [_segment(rng, n, 20) for n in (3000, 700, 10)]
    segments[1].objects.update(list(segments[0].objects.items())[:100])  # (the same object in both tables)
    for segment in segments:
        write_segment(index_dir, tmp_path, segment)
    view = _view(index_dir)
    entries = view.snapshot().entries
    assert [table.rows for table in entries.tables] == [3020, 820] and entries.objects
    limit = {"all": 1 << 30, "the first": 52 * 3000, "none": 0}[held]
    found = index.HeldObjects(entries, limit)
    assert len(found._held) == {"all": 2, "the first": 1, "none": 0}[held]
    probes = [digest for segment in segments for digest in segment.objects]
    probes += [rng.randbytes(32) for _ in range(500)] + [probe[:31] + bytes([probe[31] ^ 1]) for probe in probes[:50]]
    for digest in probes:
        assert found.find(digest) == view.find_object(digest, look_again=False)
    assert all(found.find(digest) is not None for segment in segments for digest in segment.objects)


def test_a_mapped_segment_merged_away_meanwhile_keeps_answering(tmp_path: Path) -> None:
    """gc or a merge removes the file while a reader holds it mapped: on Linux the pages stay valid."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    segment = _segment(random.Random(3), 6000, 6000)
    write_segment(index_dir, tmp_path, segment)
    table = open_table(index_dir, segment.name)
    os.unlink(segment_path(index_dir, segment.name))
    digest, loc = next(iter(segment.objects.items()))
    assert Entries(tables=(table,)).find_object(digest) == loc
    assert dict(table.iter_objects()) == segment.objects


def _sealed(body: bytes) -> bytes:
    return body + blake3.blake3(body).digest()


def test_damaged_or_unsorted_big_segments_are_refused(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    segment = _segment(random.Random(4), 6000, 0)
    data = bytearray(encode_segment(segment))
    data[1000] ^= 1
    segment_path(index_dir, segment.name).write_bytes(bytes(data))
    with pytest.raises(BadSegmentError, match="checksum"):
        open_table(index_dir, segment.name)
    # Rows out of order (claw never writes them: lookups would miss): sealed with a good checksum, refused on the
    # first lookup and by fsck's check.
    body = bytearray(encode_segment(segment)[:-32])
    rows_at = len(body) - 52 * 6000
    first, last = bytes(body[rows_at:rows_at + 52]), bytes(body[-52:])
    body[rows_at:rows_at + 52], body[-52:] = last, first
    segment_path(index_dir, segment.name).write_bytes(_sealed(bytes(body)))
    table = open_table(index_dir, segment.name)
    with pytest.raises(BadSegmentError, match="not sorted"):
        table.check()
    with pytest.raises(BadSegmentError, match="not sorted"):
        Entries(tables=(table,)).find_object(first[:32])



def _rss() -> int:
    return int(next(line for line in Path("/proc/self/status").read_text().splitlines()
                    if line.startswith("VmRSS:")).split()[1]) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")
def test_a_big_segment_looked_up_everywhere_or_read_whole_stays_out_of_rss(tmp_path: Path) -> None:
    """A build looks up nearly every part of a big segment, a merge or fsck reads all of it: the segment is read by
    offset, not mapped, so the process's RSS does not take its pages in (mapped, it did, a 2 MB folio a lookup on
    Linux 6: ~40 MB of a cold build at 10,000 x 5)."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    segment = _segment(random.Random(5), 100_000, 100_000)  # 13.6 MB
    write_segment(index_dir, tmp_path, segment)
    table = open_table(index_dir, segment.name)
    entries = Entries(tables=(table,))
    objects, actions = list(segment.objects.items()), list(segment.actions.items())
    assert entries.find_object(objects[0][0]) and entries.find_action(actions[0][0])  # (builds the fan-outs and tags:
    before = _rss()  # held by design, ~1.4 MB here, and bounded per entry by the test above; alone, before any other
    assert all(entries.find_object(digest) == loc for digest, loc in objects)  # test, their making moved RSS 3-4 MB)
    assert all(entries.find_action(key) == entry for key, entry in actions)
    assert sum(1 for _ in table.iter_objects()) + sum(1 for _ in table.iter_actions()) == 200_000
    table.check()
    assert _rss() - before < 3 << 20, f"RSS grew {(_rss() - before) >> 20} MB"


def test_a_segment_is_its_rows_in_key_order_as_the_format_lays_them_out() -> None:
    """The objects' rows are made a column at a time: the bytes are still those of one `<32sIQQ` row per object (and
    `<32s32sqIQ` per entry) in key order, the pack slots in first-seen order, as docs/store.md (Index) lays them out."""
    import struct

    rng = random.Random(54)
    segment = _segment(rng, 700, 300)
    segment.objects[bytes(32)] = (PACKS[2].hex(), (1 << 64) - 1, 0)  # (extremes of the columns)
    segment.objects[b"\xff" * 32] = (PACKS[0].hex(), 0, (1 << 64) - 1)
    segment.actions[rng.randbytes(32)] = ActionEntry(None, 5, PACKS[1].hex(), 7)  # (a removal: no record)
    slots: dict[str, int] = {}
    for pack in [loc[0] for loc in segment.objects.values()] + [entry.pack for entry in segment.actions.values()]:
        slots.setdefault(pack, len(slots))
    body = struct.pack("<8sIIIIQQ", b"CLAWIDX\x00", 1, 0, 0, len(slots), len(segment.objects), len(segment.actions))
    body += b"".join(bytes.fromhex(pack) for pack in slots)
    body += b"".join(struct.pack("<32sIQQ", key, slots[pack], offset, length)
                     for key, (pack, offset, length) in sorted(segment.objects.items()))
    body += b"".join(struct.pack("<32s32sqIQ", key, entry.record or bytes(32), entry.time_ns, slots[entry.pack],
                                 entry.offset) for key, entry in sorted(segment.actions.items()))
    assert encode_segment(segment) == body + blake3.blake3(body).digest()
    assert encode_segment(Segment(new_segment_name())).startswith(b"CLAWIDX\x00")  # (no rows at all)


def test_object_rows_made_ahead_per_pack_encode_the_segment_its_objects_make() -> None:
    """A pull makes each pack's object rows as the pack is checked (`object_run`) and merges them at its commit
    (`merged_runs`): the segment is byte for byte the one its objects dict encodes to (the packs in the same slots);
    rows that do not match the objects are refused, not written."""
    rng = random.Random(44)
    packs = [pack.hex() for pack in PACKS[:3]]
    objects: dict[bytes, tuple[str, int, int]] = {}
    runs = []
    for slot, pack in enumerate(packs):
        mine = sorted(rng.randbytes(32) for _ in range(500 + 200 * slot))
        locs = [(rng.randrange(1 << 40), rng.randrange(1 << 20)) for _ in mine]
        objects.update((key, (pack, offset, length)) for key, (offset, length) in zip(mine, locs, strict=True))
        runs.append(index.object_run(mine, (loc[0] for loc in locs), (loc[1] for loc in locs), slot))
    actions = _segment(rng, 0, 300).actions
    plain = Segment("x", objects=objects, actions=actions)
    made = Segment("x", objects=objects, actions=actions, object_rows=index.merged_runs(packs, runs))
    assert encode_segment(made) == encode_segment(plain)
    assert decode_segment("x", encode_segment(made)).objects == objects
    short = Segment("x", objects=objects, object_rows=index.merged_runs(packs, runs[:2]))
    with pytest.raises(ValueError, match="do not match its objects"):
        encode_segment(short)


def test_a_miss_reads_no_row_and_a_hit_reads_only_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each table holds its rows' tags (their keys' bytes 4-5): a key that is absent is answered without a read (a
    cold build's dedup checks and its nodes' keys: half of its index reads at 2,000 x 4), a present one with one read of
    its row; keys that share their first 6 bytes with present ones (the same bucket, the same tag) still miss, and
    present keys sharing them are each found as themselves."""
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    rng = random.Random(7)
    segment = _segment(rng, 20_000, 20_000)
    twins = [key[:6] + rng.randbytes(26) for key in list(segment.objects)[:50]]  # present, tag and bucket shared
    for twin in twins:
        segment.objects[twin] = (PACKS[0].hex(), rng.randrange(1 << 40), rng.randrange(1 << 20))
    action_twins = [key[:6] + rng.randbytes(26) for key in list(segment.actions)[:50]]
    for twin in action_twins:
        segment.actions[twin] = ActionEntry(rng.randbytes(32), rng.randrange(1 << 60), PACKS[1].hex(), 5)
    write_segment(index_dir, tmp_path, segment)
    entries = Entries(tables=(open_table(index_dir, segment.name),))
    assert entries.find_object(rng.randbytes(32)) is None and entries.find_action(rng.randbytes(32)) is None
    reads = []
    real = os.pread
    monkeypatch.setattr(index.os, "pread", lambda fd, n, at: reads.append(n) or real(fd, n, at))
    absent = [rng.randbytes(32) for _ in range(4000)]
    assert not any(entries.find_object(key) for key in absent)
    assert not any(entries.find_action(key) for key in absent)
    assert len(reads) <= 2, f"{len(reads)} reads for 8,000 misses"  # (a tag shared by chance: 1 in 65,536 rows)
    near = [key[:31] + bytes([key[31] ^ 1]) for key in [*segment.objects, *segment.actions][::97]]
    assert not any(entries.find_object(key) for key in near) and not any(entries.find_action(key) for key in near)
    reads.clear()
    probes = list(segment.objects)[50:20_000:7]  # (not the twins: a twin of a key can be read before it)
    assert all(entries.find_object(key) == segment.objects[key] for key in probes)
    assert len(reads) == len(probes) and set(reads) == {index._OBJ.size}  # one row each, not its bucket
    assert all(entries.find_object(twin) == segment.objects[twin] for twin in twins)
    assert all(entries.find_action(key) == segment.actions[key] for key in [*action_twins, *list(segment.actions)[:50]])


@pytest.mark.parametrize("dense", [True, False])
def test_a_sorted_run_is_found_as_each_lookup_finds_it_dense_ones_in_batches(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            dense: bool) -> None:
    """Entries.find_sorted (a push's pack of the objects a remote lacks): each object where find_object finds it,
    misses None, the small segments' dict and two tables (an object in both) in play. A run dense in a table is matched
    against that table's rows in its range, read a batch at a time: no read of a row per object."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    index_dir, segments, rng = _two_tables_and_dicts(tmp_path, 11, (3000, 700, 10), 20, shared=100)
    entries = _view(index_dir).snapshot().entries
    assert len(entries.tables) == 2 and entries.objects
    every = sorted({digest for segment in segments for digest in segment.objects})
    misses = [rng.randbytes(32) for _ in range(50)] + [digest[:31] + bytes([digest[31] ^ 1]) for digest in every[:50]]
    # dense: most of the store in one run; sparse: a few objects spread over the whole range of digests
    run = sorted(set(every + misses) if dense else set(every[::400] + misses[:5]))
    expected = [entries.find_object(digest) for digest in run]
    rows_read = []
    real = index.Table.object_at
    monkeypatch.setattr(index.Table, "object_at",
                        lambda self, digest, at: rows_read.append(at) or real(self, digest, at))
    assert entries.find_sorted(run) == expected
    assert sum(loc is None for loc in expected) == (100 if dense else 5)
    hits = sum(loc is not None and digest not in entries.objects for digest, loc in zip(run, expected, strict=True))
    if dense:
        assert rows_read == []  # (every table's rows in the range read in batches)
    else:
        assert len(rows_read) >= hits  # (one read of its row each, as find_object)
    assert entries.find_sorted([]) == []
