"""A received pack's small frames checked in batches of bounded content (transfer._verify_small), a lying table
refused."""

from __future__ import annotations

import mmap
from pathlib import Path

import blake3
import pytest

from clawstore.store.core import codec
from clawstore.store.core.packfile import KIND_OBJECT, PackCheckError, PackWriter
from clawstore.store.services import transfer


def test_small_frames_are_checked_in_batches_bounded_by_their_content(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch ends with the frame whose content reaches _BATCH_BYTES (decoded memory stays bounded whatever the pack
    holds); every frame is checked, the big ones streamed; a swapped one is named."""
    monkeypatch.setattr(transfer, "_BATCH_BYTES", 10_000)
    contents = [bytes([i]) * (1000 + 700 * (i % 5)) for i in range(40)] + [b"w" * (2 << 20)]
    writer = PackWriter(tmp_path)
    blobs = writer.append_many([(KIND_OBJECT, blake3.blake3(content).digest(), codec.encode(content, 3))
                                for content in contents])
    writer.seal()
    writer.close()
    held: list[int] = []
    real = codec.decode_frames
    monkeypatch.setattr(codec, "decode_frames", lambda buffer, spans, size: held.append(size) or real(buffer, spans,
                                                                                                       size))
    with open(writer.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        picks = transfer._Picks(frozenset(), None, {})
        room = codec.content_bound(writer.path.stat().st_size)
        large, _ = transfer._verify_small(mapped, view, blobs, "pack", picks, room)
        view.release()
    assert [blob.id for blob in large] == [blobs[-1].id]
    sizes = [len(content) for content in contents[:-1]]
    expected, total = [], 0
    for size in sizes:  # (the rule, one frame at a time)
        total += size
        if total >= 10_000:
            expected.append(total)
            total = 0
    assert held == expected + ([total] if total else [])
    assert sum(held) == sum(sizes)

    data = bytearray(writer.path.read_bytes())  # (two frames of the same length swapped: the table lies about both)
    first, second = blobs[7], blobs[12]
    assert first.length == second.length
    data[first.offset:first.offset + first.length], data[second.offset:second.offset + second.length] = (
        data[second.offset:second.offset + second.length], data[first.offset:first.offset + first.length])
    writer.path.write_bytes(bytes(data))
    with pytest.raises(PackCheckError, match=first.id.hex()):
        transfer.verify_pack(writer.path, blake3.blake3(bytes(data)).hexdigest(), "pack")


def test_a_blob_that_is_no_frame_among_good_ones_is_named(tmp_path: Path) -> None:
    """The frames' sizes are read all at once; a blob whose header is no zstd frame's (that read fails) sends the pack
    to the frame-by-frame sizes, and the bad blob is checked and named, not skipped."""
    contents = [b"object %d " % i * 30 for i in range(50)]
    frames = [codec.encode(content, 3) for content in contents]
    frames[31] = [b"no zstd frame at all, " * 4]
    writer = PackWriter(tmp_path)
    writer.append_many([(KIND_OBJECT, blake3.blake3(content).digest(), frame)
                        for content, frame in zip(contents, frames, strict=True)])
    writer.seal()
    writer.close()
    assert codec.declared_sizes(writer.path.read_bytes(), [len(b"CLAWPACK") + 8 + 41]) is not None
    with pytest.raises(PackCheckError, match=blake3.blake3(contents[31]).hexdigest()):
        transfer.verify_pack(writer.path, blake3.blake3(writer.path.read_bytes()).hexdigest(), "pack")


def test_records_that_all_have_room_are_kept_and_their_room_taken(tmp_path: Path) -> None:
    """When every record asked for has room (a pull's usual case: kept all at once), each is kept and the room they
    take is what `reserve` of each would take: room exactly theirs keeps them all and leaves none."""
    from clawstore.store.services.archive_verify import Kept

    contents = [b"record %d " % i * (5 + i % 7) for i in range(60)]
    ids = [blake3.blake3(content).digest() for content in contents]
    writer = PackWriter(tmp_path)
    writer.append_many([(KIND_OBJECT, oid, codec.encode(content, 3))
                        for oid, content in zip(ids, contents, strict=True)])
    writer.seal()
    writer.close()
    asked = {ids[i] for i in range(0, 60, 3)}
    kept = Kept()
    kept.room = sum(len(contents[i]) for i in range(0, 60, 3))
    name = blake3.blake3(writer.path.read_bytes()).hexdigest()
    transfer.verify_pack(writer.path, name, "pack", asked, kept)
    assert kept.contents == {ids[i].hex(): contents[i] for i in range(0, 60, 3)} and kept.room == 0
    kept = Kept()
    kept.room = sum(len(contents[i]) for i in range(0, 60, 3)) - 1  # (one short: the last one asked has none)
    unkept: dict[str, object] = {}
    transfer.verify_received(writer.path, name, "pack", asked, kept, unkept)  # type: ignore[arg-type]
    assert set(kept.contents) == {ids[i].hex() for i in range(0, 57, 3)} and list(unkept) == [ids[57].hex()]


def test_a_checked_pack_holding_entries_gives_its_objects_only(tmp_path: Path) -> None:
    """A pack with action-cache entries among its objects: the check gives its object blobs alone (a pack of objects
    only: all its blobs, found by its table's kinds)."""
    from clawstore.store.core.packfile import KIND_ACTION

    contents = [b"object %d" % i for i in range(6)]
    writer = PackWriter(tmp_path)
    blobs = writer.append_many([(KIND_ACTION if i % 2 else KIND_OBJECT, blake3.blake3(content).digest(),
                                 [bytes(40)] if i % 2 else codec.encode(content, 3))
                                for i, content in enumerate(contents)])
    writer.seal()
    writer.close()
    checked = transfer.verify_pack(writer.path, blake3.blake3(writer.path.read_bytes()).hexdigest(), "pack")
    assert checked == [blob for blob in blobs if blob.kind == KIND_OBJECT] and len(checked) == 3


def test_a_checked_packs_object_ids_are_those_its_table_names_in_its_order(tmp_path: Path) -> None:
    """What a pull compares with a listing of format 4 (`Incoming.object_ids`, from the blobs the check made): the ids
    packfile.table_object_ids reads from the table the check returned, in table order, entries left out, an object
    stored twice named twice (listing.object_ids counts each once)."""
    from clawstore.store import Store
    from clawstore.store.core.packfile import KIND_ACTION, table_object_ids

    contents = [b"object %d" % (i % 5) for i in range(9)]  # (objects 0-3 twice, one of them as an entry's row)
    writer = PackWriter(tmp_path)
    writer.append_many([(KIND_ACTION if i % 3 == 1 else KIND_OBJECT, blake3.blake3(content).digest(),
                         [bytes(40)] if i % 3 == 1 else codec.encode(content, 3))
                        for i, content in enumerate(reversed(contents))])
    writer.seal()
    writer.close()
    name = blake3.blake3(writer.path.read_bytes()).hexdigest()
    incoming = transfer.Incoming(Store(tmp_path / "store"))
    table = incoming.check(writer.path, name, "pack")
    ids = incoming.object_ids(name)
    assert ids == table_object_ids(table) and len(ids) == 6 and len(set(ids)) == 4
