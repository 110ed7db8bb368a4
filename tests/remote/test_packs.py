"""Push and pull move packs: the store's own sealed packs travel as they are, other objects in new
packs, every received pack is checked whole before any of it becomes visible."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from clawstore.errors import UsageError
from clawstore.remote import listing, pull, push, sync
from clawstore.remote.backends import Backend, DirectoryBackend, Moved, RemoteDamage
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.core import index
from clawstore.store.core.ids import file_digest
from clawstore.store.core.index import Segment, decode_segment, encode_segment
from clawstore.store.core.packfile import KIND_OBJECT, PackWriter, scan_pack, sealed_object_ids
from clawstore.store.services import transfer
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from clawstore.store.services.transfer import PackCheckError, verify_pack
from tests.support.forged import swap_two_entries


def _filled(root: Path, objects: int, start: int = 0) -> Store:
    store = Store(root)
    with store.batch():
        for i in range(start, start + objects):
            output = store.put_json({"answer": i})
            key = store.put_json({"input": i})
            store.put_action(key, {"kind": "run", "key": key, "status": "success", "outputs": {"answer": output}})
    return store


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_store_of_many_packs_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push, "PACK_OBJECTS", 7)  # outputs, inputs, records: 26 packs sent by 8 threads
    source = _filled(tmp_path / "a", 60)  # its pack is still being written: objects travel copied
    remote = Remote("team", str(tmp_path / "remote"))
    pushed = push.push(source, remote)
    assert pushed.packs == 180 // 7 + 1 + 1  # and the entries, in a listing of their own
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).packs == pushed.packs
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert len(set(target.iter_objects())) == 180
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert push.push(source, remote).objects == 0  # nothing left to send
    assert pull.pull(target, remote).packs == 0


def test_small_packs_pulled_become_one_pack_here(tmp_path: Path) -> None:
    """A `build --remote` pushes a small pack at every interval: a colleague's pull copies the objects
    of small packs into one pack of its own (large ones move in whole), so pulling a day of interim
    pushes does not leave hundreds of files in the store."""
    source = Store(tmp_path / "a")
    remote = Remote("team", str(tmp_path / "remote"))
    known = push.RemoteKnowledge()
    for start in range(0, 30, 3):  # ten interim pushes of three runs each
        _filled(tmp_path / "a", 3, start)
        push.push_new(source, remote, known) if start else push.push(source, remote, move_refs=False,
                                                                         knowledge=known)
    sent = len(list((tmp_path / "remote" / "packs").glob("*.pack")))
    assert sent == 11  # (the first push sends the entries in a pack of their own)
    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)
    assert (pulled.packs, pulled.objects) == (sent, 90)
    # one pack of the objects (copied as each pack arrived), one of the entries (written by the store as any)
    assert len(list((tmp_path / "b" / "packs").glob("*.pack"))) == 2
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert fsck(target).clean
    assert pull.pull(target, remote).packs == 0


def test_packs_of_a_mebibyte_or_more_move_in_whole_named_by_one_index_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A received pack of ADOPT_BYTES (1 MiB) or more becomes a file of the store as it is (copying its objects cost
    more than the file), and one index segment names the objects of all the packs a pull moves in (not one each)."""
    assert transfer.ADOPT_BYTES == 1 << 20
    source = Store(tmp_path / "a")
    for _ in range(3):
        with source.batch():
            for _ in range(36):
                source.put_bytes(os.urandom(32 << 10))  # (incompressible: 1.1 MiB a pack)
        source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    sent = sorted((tmp_path / "remote" / "packs").glob("*.pack"), key=lambda path: path.stat().st_size)[-3:]
    assert all((1 << 20) <= path.stat().st_size < (4 << 20) for path in sent)  # small packs, for gc

    commits = []
    real_commit = transfer.commit
    monkeypatch.setattr(transfer, "commit", lambda *args: commits.append(args[1]) or real_commit(*args))
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).objects == 108
    assert len(commits) == 1 and len(commits[0].objects) == 108
    for path in sent:  # the very bytes the remote holds
        assert _sha(tmp_path / "b" / "packs" / (path.name[:32] + ".pack")) == _sha(path)
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert fsck(target).clean


def test_a_pull_whose_packs_all_move_in_whole_leaves_no_empty_pack_behind(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries travel in a small pack holding only their document, which a pull never adopts: when every other pack
    moves in whole there is nothing to copy, yet the pull made and moved in an empty pack of copies (on a campaign of
    1,200 entries, fsck after a clean pull said "1 pack(s), 105 B, hold nothing the index names: 1 left by a killed
    writer", s60-qa)."""
    monkeypatch.setattr(transfer, "ADOPT_BYTES", 1024)  # (the pack of objects moves in whole, as one of 1 MiB does)
    source = _filled(tmp_path / "a", 30)
    source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    sizes = sorted(path.stat().st_size for path in (tmp_path / "remote" / "packs").glob("*.pack"))
    assert len(sizes) == 2 and sizes[0] < 1024 <= sizes[1]  # the entries' pack, and the objects'
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).objects == 90
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    # the pack moved in whole and the one the store wrote the entries to: no empty pack of copies beside them (once a
    # later index merge forgets the segment naming it, fsck counts it among the packs a killed writer left)
    assert len(list((tmp_path / "b" / "packs").glob("*.pack"))) == 2
    assert fsck(target).clean


@pytest.mark.parametrize("adopt_bytes", [0, transfer.ADOPT_BYTES], ids=["moved-whole", "copied"])
def test_a_pull_reports_the_bytes_of_the_objects_it_adds_whether_packs_move_whole_or_are_copied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, adopt_bytes: int) -> None:
    """What a pull says it added: the stored bytes of the objects its index segment names, counted for a pack that
    moves in whole (summed as it is taken) as for one whose objects are copied in."""
    monkeypatch.setattr(transfer, "ADOPT_BYTES", adopt_bytes)
    source = _filled(tmp_path / "a", 30)
    # An object twice in one pack, as builds running runs at once each put the same empty sandbox tree (8 copies in a
    # pack of a 1,200-run build): the pull said "3632 object(s)" of a store holding 3625 (s60-qa).
    twice = source.put_json({"entries": [], "tree_version": 1})
    with source.runtime.pack_lock:
        source.runtime.writer().append(KIND_OBJECT, bytes.fromhex(twice[len("blake3:"):]),
                                       [zstandard.ZstdCompressor().compress(b'{"entries":[],"tree_version":1}')])
    source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)
    index_view = target.runtime.index
    index_view.refresh()
    assert pulled.objects == 91 and pulled.bytes == sum(loc[2] for loc in index_view.objects.values()) > 0


@pytest.mark.parametrize("adopt_bytes", [0, 1024], ids=["both-moved-whole", "one-moved-one-copied"])
def test_an_object_two_received_packs_hold_is_counted_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           adopt_bytes: int) -> None:
    """Two stores that push to one remote each put the empty sandbox tree in a pack of its own: a pull receiving both
    packs adds it once and says so (d4b69e8 counts an object once within one pack; across packs, the pull's `present`
    grows as each pack is taken)."""
    monkeypatch.setattr(transfer, "ADOPT_BYTES", adopt_bytes)
    remote = Remote("team", str(tmp_path / "remote"))
    tree = {"entries": [], "tree_version": 1}
    for name, records in (("a", 30), ("b", 1)):
        source = _filled(tmp_path / name, records, start=0 if name == "a" else 1000)
        source.put_json(tree)
        source.runtime.close_writer()
        push.push(source, remote)
    target = Store(tmp_path / "c")
    pulled = pull.pull(target, remote)
    index_view = target.runtime.index
    index_view.refresh()
    assert pulled.objects == len(index_view.objects) == 94, pulled
    assert pulled.bytes == sum(loc[2] for loc in index_view.objects.values())

def test_a_pull_names_its_objects_and_sets_their_entries_in_one_index_segment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries a pull verified are set in the commit that names the objects their records are in (one segment, one
    round of fsyncs), not in a second one after it: both visible at once, or (killed before) neither."""
    source = _filled(tmp_path / "a", 40)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    target = Store(tmp_path / "b")
    segments: list[Any] = []
    runtime = type(target.runtime)
    real_publish = runtime.publish
    monkeypatch.setattr(runtime, "publish", lambda self, seg: segments.append(seg) or real_publish(self, seg))
    assert pull.pull(target, remote).objects == 120
    assert [(len(seg.objects), len(seg.actions)) for seg in segments if seg.objects or seg.actions] == [(120, 40)]
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert fsck(target).clean


def test_push_makes_a_pack_of_committed_objects_without_a_store_lookup_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The objects of a pack push makes are found in the index (one lookup each, no listing of index/ and no batch to
    look through) and their frames sliced out of one mapping per pack; the same objects make the same bytes."""
    source = Store(tmp_path / "a")
    ids = []
    for pack in range(2):
        with source.batch():
            ids += [source.put_json({"pack": pack, "n": i}) for i in range(50)]
        source.runtime.close_writer()
    looked_up = []
    monkeypatch.setattr(type(source), "locate_digest", lambda self, digest: looked_up.append(digest))
    digests = [bytes.fromhex(oid[len("blake3:"):]) for oid in ids]
    made = [source.make_pack(digests, tmp_path / f"work{n}") for n in range(2) if (tmp_path / f"work{n}").mkdir()
            is None]
    assert looked_up == []
    assert _sha(made[0]) == _sha(made[1])
    assert [blob.id for blob in verify_pack(made[0], file_digest(made[0]), "made")] == sorted(digests)


def test_push_finds_a_dense_run_of_objects_in_one_pass_over_the_index_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The objects of a pack push makes (sorted, most of a big index segment's range) are matched against that segment's
    rows read a batch at a time: no read of a row per object, and the very bytes the one-by-one lookups make."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)  # (the batch's segment is a big one, read in place)
    source = _filled(tmp_path / "a", 400)
    digests = sorted(source.object_digests())
    assert source.runtime.index.snapshot().entries.tables  # (its objects are in a table, not the dicts)
    rows_read = []
    real = index.Table.object_at
    monkeypatch.setattr(index.Table, "object_at",
                        lambda self, digest, at: rows_read.append(at) or real(self, digest, at))
    (tmp_path / "dense").mkdir()
    dense = source.make_pack(digests, tmp_path / "dense")
    assert rows_read == []
    monkeypatch.setattr(index, "DENSE_ROWS", 0)  # every run sparse: one lookup (and row read) per object, as before
    (tmp_path / "one").mkdir()
    one_by_one = source.make_pack(digests, tmp_path / "one")
    assert len(rows_read) == len(digests)
    assert _sha(dense) == _sha(one_by_one)
    assert [blob.id for blob in verify_pack(dense, file_digest(dense), "made")] == digests


def test_a_dense_run_whose_index_row_names_a_pack_slot_the_segment_lacks_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dense run's rows name their pack by slot; a slot past the segment's packs is a damaged segment, named as
    find_object names it, never an IndexError or another pack's frame."""
    monkeypatch.setattr(index, "SMALL_ROWS", 100)
    source = _filled(tmp_path / "a", 200)
    digests = sorted(source.object_digests())
    table = source.runtime.index.snapshot().entries.tables[0]
    monkeypatch.setattr(table, "packs", ())
    with pytest.raises(index.BadSegmentError, match="names a pack slot it does not have"):
        source.runtime.index.find_sorted(digests)


def test_a_pack_made_of_ids_in_any_order_or_named_twice_is_the_pack_of_them_sorted_once(tmp_path: Path) -> None:
    """make_pack takes the ids push hands it (sorted, each once) without sorting a set of them, yet ids in another order
    or named twice (and objects still in the open batch, found by the full lookup) make the very same bytes."""
    source = _filled(tmp_path / "a", 60)
    digests = sorted(source.object_digests())
    with source.batch():  # (not committed: not in the index, each found by the full lookup)
        pending = [bytes.fromhex(oid[len("blake3:"):]) for oid in (source.put_json({"late": i}) for i in range(5))]
        made = []
        for n, order in enumerate((sorted(digests + pending), [*reversed(digests), *pending, *digests[:7]])):
            (tmp_path / f"work{n}").mkdir()
            made.append(source.make_pack(order, tmp_path / f"work{n}"))
    assert _sha(made[0]) == _sha(made[1])
    assert [blob.id for blob in verify_pack(made[1], file_digest(made[1]), "made")] == sorted(digests + pending)


def test_listings_arrive_together_and_a_bad_one_among_them_is_named(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(push, "PACK_OBJECTS", 7)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(_filled(tmp_path / "a", 60), remote)
    listings = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    assert len(listings) == 27
    bad = listings[len(listings) // 2]
    good = bad.read_bytes()
    bad.write_bytes(b"not a listing")
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match=f"listing of pack {bad.name[:-4]} is not JSON"):
        pull.pull(target, remote)
    cache = target.root / "remotes" / "team"
    # (nothing half-written; the biggest pack, whose download started once its own listing was checked, kept whole
    # for the pull run again: remote/downloads.py)
    assert {p.name for p in cache.iterdir()} - {"incoming"} == {p.name for p in listings if p != bad}
    assert all(file_digest(kept) == kept.stem for kept in cache.glob("incoming/*"))
    assert list(target.iter_objects()) == []
    bad.write_bytes(good)
    assert pull.pull(target, remote).packs == 27


def test_a_remote_planted_with_junk_listings_fails_before_fetching_them_all(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Whoever can write to the bucket can plant listings by the thousand: the pull stops at the first
    # batch holding one, instead of downloading every listing before reading any.
    monkeypatch.setattr(push, "PACK_OBJECTS", 7)
    monkeypatch.setattr(sync, "LISTING_BATCH", 4)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(_filled(tmp_path / "a", 60), remote)
    listings = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    junk = tmp_path / "remote" / "packs" / ("0" * 64 + ".ids")  # sorts first
    junk.write_bytes(b"[]")
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match=f"listing of pack {'0' * 64} is malformed"):
        pull.pull(target, remote)
    cached = list((target.root / "remotes" / "team").glob("*.ids"))
    assert len(cached) <= 4 < len(listings), cached  # (the first batch's, and the biggest pack's read before them)


def test_sealed_packs_travel_and_arrive_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transfer, "ADOPT_BYTES", 0)  # as big packs do: moved in whole
    source = _filled(tmp_path / "a", 40)
    source.runtime.close_writer()  # sealed, as at the end of every claw process
    [own] = list((tmp_path / "a" / "packs").glob("*.pack"))
    remote = Remote("team", str(tmp_path / "remote"))
    assert push.push(source, remote).packs == 2  # the store's pack, and the entries' listing
    sent = tmp_path / "remote" / "packs" / f"{file_digest(own)}.pack"
    assert _sha(sent) == _sha(own)

    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)
    assert (pulled.packs, pulled.objects) == (2, 120)
    adopted = tmp_path / "b" / "packs" / (sent.name[:32] + ".pack")  # beside the pack its entries went to
    assert _sha(adopted) == _sha(own)
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert all(target.get_bytes(oid) == source.get_bytes(oid) for oid in source.iter_objects())
    # the puller's copy is now its own pack: pushing it back sends nothing
    assert push.push(target, remote).packs == 0


def test_a_pack_mostly_on_the_remote_is_not_sent_again(tmp_path: Path) -> None:
    source = _filled(tmp_path / "a", 40)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)  # copied (the pack was still open)
    _filled(tmp_path / "a", 2, start=40).runtime.close_writer()  # same store: 6 new objects join the pack
    again = push.push(source, remote)
    assert (again.packs, again.objects) == (2, 6)  # the new objects, copied (not the whole pack); entries


def test_new_entries_alone_travel_in_a_listing(tmp_path: Path) -> None:
    source = _filled(tmp_path / "a", 3)
    key = source.put_json({"input": "late"})
    record = {"kind": "run", "key": key, "status": "success", "outputs": {"answer": source.put_json({"a": 1})}}
    record_id = source.put_json(record)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)  # the objects; no entry names them yet
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert target.get_action_record_id(key) is None
    source.put_action(key, record)  # an entry whose record and input the remote has: nothing else is new
    pushed = push.push(source, remote)
    assert (pushed.packs, pushed.objects) == (1, 0)
    pull.pull(target, remote)
    assert target.get_action_record_id(key) == record_id
    # each set of entries got a pack (and so a listing name) of its own, holding only a document that
    # names those entries by digest: the entries themselves travel once, in the listing
    listings = [listing.decode(p.read_bytes(), p.name[:-4]) for p in (tmp_path / "remote" / "packs").glob("*.ids")]
    entries = [doc for doc in listings if doc.actions]
    assert [len(doc.actions) for doc in sorted(entries, key=lambda doc: len(doc.actions))] == [1, 3]
    for doc in entries:
        pack = tmp_path / "remote" / "packs" / f"{doc.pack}.pack"
        [blob] = scan_pack(pack).blobs
        with open(pack, "rb") as fh:
            fh.seek(blob.offset)
            document = json.loads(zstandard.ZstdDecompressor().decompress(fh.read(blob.length)))
        assert document["kind"] == "remote-entries" and set(document) == {"kind", "entries"}
        assert blob.id.hex() == doc.document


def _pack_with(tmp_path: Path, blobs: list[tuple[bytes, bytes]]) -> tuple[Path, str]:
    writer = PackWriter(tmp_path)
    for blob_id, frame in blobs:
        writer.append(KIND_OBJECT, blob_id, [frame])
    writer.seal()
    writer.close()
    return writer.path, file_digest(writer.path)


def test_a_pack_whose_object_does_not_match_its_id_is_refused(tmp_path: Path) -> None:
    import blake3
    import zstandard

    good = b"honest content"
    frame = zstandard.ZstdCompressor().compress(b"swapped content")
    path, name = _pack_with(tmp_path, [(blake3.blake3(good).digest(), frame)])
    with pytest.raises(PackCheckError, match="does not match its id"):
        verify_pack(path, name, "remote pack x")
    with pytest.raises(PackCheckError, match="do not hash to its name"):
        verify_pack(path, "0" * 64, "remote pack x")


def test_one_swapped_object_among_many_is_named_and_the_others_kept_only_as_asked(tmp_path: Path) -> None:
    """A pack's objects are hashed in one batch and the batch compared whole: one object of 300 whose content was
    swapped is still found and named; an honest pack keeps decoded exactly the objects asked for."""
    import blake3

    contents = [json.dumps({"n": i, "pad": "x" * (i % 50)}).encode() for i in range(300)]
    frames = [zstandard.ZstdCompressor().compress(content) for content in contents]
    ids = [blake3.blake3(content).digest() for content in contents]
    swapped = list(frames)
    swapped[177] = zstandard.ZstdCompressor().compress(b"not object 177")
    (tmp_path / "bad").mkdir()
    (tmp_path / "good").mkdir()
    path, name = _pack_with(tmp_path / "bad", list(zip(ids, swapped, strict=True)))
    with pytest.raises(PackCheckError, match=f"blake3:{ids[177].hex()} is corrupt"):
        verify_pack(path, name, "remote pack x")
    path, name = _pack_with(tmp_path / "good", list(zip(ids, frames, strict=True)))
    kept = transfer.Incoming(Store(tmp_path / "store")).kept
    verify_pack(path, name, "remote pack x", {ids[0], ids[150], ids[299], bytes(32)}, kept)
    assert kept.contents == {ids[i].hex(): contents[i] for i in (0, 150, 299)}



@pytest.mark.parametrize("how", ["batched", "one by one", "streamed"])
def test_the_records_a_pack_check_cannot_keep_are_named_in_the_same_walk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The objects asked for that the check does not keep decoded (no room left, decoded one by one after a batch did
    not decode, or streamed for their size) are named with where their frames are, in the walk that checks them: the
    entry checks read each back from the pack; those kept are not named; an object not asked for is neither."""
    import blake3

    from clawstore.store.core import codec

    contents = [json.dumps({"n": i, "pad": "x" * (i % 50)}).encode() for i in range(300)]
    ids = [blake3.blake3(content).digest() for content in contents]
    path, name = _pack_with(tmp_path, [(oid, zstandard.ZstdCompressor().compress(content))
                                       for oid, content in zip(ids, contents, strict=True)])
    if how == "one by one":
        monkeypatch.setattr(codec, "decode_frames", lambda *args: None)
    elif how == "streamed":
        monkeypatch.setattr(codec, "BATCH_MAX", 10)  # every frame declares more: each streams
    incoming = transfer.Incoming(Store(tmp_path / "store"))
    incoming.kept.room = len(contents[0]) + len(contents[150])  # room for the first two asked for, no more
    asked = {ids[0], ids[150], ids[151], ids[299], bytes(32)}
    table = incoming.check(path, name, "remote pack x", asked)
    assert table == scan_pack(path).table and table is not None
    kept = {0, 150} if how == "batched" else set()
    assert incoming.decoded == {ids[i].hex(): contents[i] for i in kept}
    unkept = incoming.unkept({ids[i] for i in (0, 150, 151, 299)})
    assert sorted(unkept) == sorted(ids[i].hex() for i in {0, 150, 151, 299} - kept)
    for hexdigest, source in unkept.items():  # (each names its own frame)
        assert blake3.blake3(zstandard.ZstdDecompressor().decompress(source.read(hexdigest))).hexdigest() == hexdigest
    assert incoming.held(name) == set(ids)

def test_a_received_packs_objects_are_copied_in_runs_in_whatever_order_its_table_lists_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames are read a run of about COPY_BYTES at a time (not one read per object); a table listing them out of
    file order (any pack may) still copies each object's own bytes, each once."""
    import blake3

    contents = [f"object {i} ".encode() * 40 for i in range(300)]
    compressor = zstandard.ZstdCompressor()
    path, name = _pack_with(tmp_path, [(blake3.blake3(c).digest(), compressor.compress(c)) for c in contents])
    blobs = verify_pack(path, name, "remote pack x")
    reads = 0
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        nonlocal reads
        reads += 1
        return real_pread(fd, size, offset)

    monkeypatch.setattr(transfer.os, "pread", pread)
    monkeypatch.setattr(transfer, "COPY_BYTES", 4096)
    shuffled = blobs[::-1][:150] + blobs[:150] + blobs[:10]
    for order, expected_reads in ((blobs, range(2, 30)), (shuffled, range(150, 311))):
        work = tmp_path / f"copies-{expected_reads.start}"
        work.mkdir()
        writer = PackWriter(work)
        reads = 0
        copied = transfer.copy_frames(writer, path, order)
        assert reads in expected_reads  # (300 frames of about 80 bytes, 4 KiB a read, in file order)
        writer.seal()
        writer.close()
        assert len(copied) == 300  # (the ten listed twice: copied once)
        name = file_digest(writer.path)
        assert {blob.id for blob in verify_pack(writer.path, name, "copies")} == {blob.id for blob in blobs}


def test_each_copied_frame_is_named_where_it_landed_after_what_the_pack_held_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """copy_frames writes a run's heads and rows a column at a time and makes its Blobs from where the payloads land:
    each returned Blob is the row the sealed pack's table holds for it and names that object's own frame, in a pack
    that already held blobs (a second run, a second pack copied into it), frames of different lengths."""
    import blake3

    contents = [f"object {i} ".encode() * (1 + i % 17) for i in range(200)]
    compressor = zstandard.ZstdCompressor()
    path, _ = _pack_with(tmp_path, [(blake3.blake3(c).digest(), compressor.compress(c)) for c in contents])
    blobs = [blob for blob in scan_pack(path).blobs if blob.kind == KIND_OBJECT]
    monkeypatch.setattr(transfer, "COPY_BYTES", 2048)  # (several runs)
    work = tmp_path / "copies"
    work.mkdir()
    writer = PackWriter(work)
    writer.append(KIND_OBJECT, b"\x01" * 32, [b"not a frame of these"])  # (the copies start after it)
    copied = transfer.copy_frames(writer, path, blobs[:120]) + transfer.copy_frames(writer, path, blobs[120:])
    writer.seal()
    writer.close()
    table = [blob for blob in scan_pack(writer.path).blobs if blob.kind == KIND_OBJECT][1:]
    assert copied == table and all(type(blob) is transfer.Blob for blob in copied)
    data = writer.path.read_bytes()
    by_id = {blake3.blake3(c).digest(): c for c in contents}
    for blob in copied:
        frame = data[blob.offset:blob.offset + blob.length]
        assert zstandard.ZstdDecompressor().decompress(frame) == by_id[blob.id]


def test_a_frame_declaring_a_huge_size_is_streamed_not_allocated(tmp_path: Path) -> None:
    import blake3
    import zstandard

    content = b"small"
    frame = bytearray(zstandard.ZstdCompressor(write_content_size=True).compress(content))
    # rewrite the frame header to declare 2**40 bytes: a batch decode would allocate that much
    params = zstandard.get_frame_parameters(bytes(frame))
    assert params.content_size == len(content)
    lying = b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + (1 << 40).to_bytes(8, "little") + bytes(frame[6:])
    path, name = _pack_with(tmp_path, [(blake3.blake3(content).digest(), lying)])
    with pytest.raises(PackCheckError):
        verify_pack(path, name, "remote pack x")


def _old_bundle(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A remote holding one bundle, as an older claw pushed them: (the remote, the entries it carries)."""
    from clawstore.store.core.ids import PREFIX
    from clawstore.store.services.archive import write_archive

    source = _filled(tmp_path / "a", 5)
    actions = {key: record for key, record in source.iter_actions() if record is not None}
    ids = sorted(oid[len(PREFIX):] for oid in source.iter_objects())
    packs = tmp_path / "remote" / "packs"
    packs.mkdir(parents=True)
    bundle = write_archive(source, packs / "new.claw", {"refs": {}, "actions": actions, "kind": "remote-bundle"},
                           (PREFIX + h for h in ids))
    name = bundle.digest[len(PREFIX):]
    (packs / "new.claw").rename(packs / f"{name}.claw")
    (packs / f"{name}.ids").write_text(json.dumps({"objects": ids, "actions": actions}))
    return tmp_path / "remote", actions


def _listed_smaller(monkeypatch: pytest.MonkeyPatch, suffix: str, size: int) -> None:
    """The remote's listing says `size` bytes for its files named *`suffix`*: they grew after it was made."""
    opened = pull.open_backend

    def listed_smaller(*args: object, **kwargs: object) -> Backend:
        backend = opened(*args, **kwargs)  # type: ignore[arg-type]
        listed = backend.list
        backend.list = lambda prefix: {k: size if k.endswith(suffix) else v  # type: ignore[method-assign]
                                       for k, v in listed(prefix).items()}
        return backend

    monkeypatch.setattr(pull, "open_backend", listed_smaller)


def test_bundles_pushed_by_an_older_claw_are_still_pulled(tmp_path: Path) -> None:
    remote, actions = _old_bundle(tmp_path)
    target = Store(tmp_path / "b")
    pulled = pull.pull(target, Remote("old", str(remote)))
    assert (pulled.packs, pulled.objects) == (1, 15)
    assert dict(target.iter_actions()) == actions
    assert pull.pull(target, Remote("old", str(remote))).packs == 0  # remembered as fetched


def test_a_bundle_that_grew_after_it_was_listed_is_not_downloaded_whole(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Someone writing to the share between the pull's listing and its download: no more than listed
    # is kept (the bundle could have grown by gigabytes).
    remote, _ = _old_bundle(tmp_path)
    _listed_smaller(monkeypatch, ".claw", 100)
    with pytest.raises(RemoteDamage, match="holds more than the 100 bytes listed"):
        pull.pull(Store(tmp_path / "b"), Remote("old", str(remote)))


def test_entries_seen_before_their_records_are_taken_by_a_later_pull(tmp_path: Path) -> None:
    source = _filled(tmp_path / "a", 3)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    listings = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    objects_listing = next(p for p in listings if listing.decode(p.read_bytes(), p.name[:-4]).document is None)
    hidden = objects_listing.read_bytes()
    objects_listing.unlink()  # as if a pull ran while the push had published only the entries
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert dict(target.iter_actions()) == {}
    objects_listing.write_bytes(hidden)
    pull.pull(target, remote)
    assert dict(target.iter_actions()) == dict(source.iter_actions())


def test_a_pull_in_rounds_sets_the_entries_each_round_brings(tmp_path: Path) -> None:
    """`build --remote`'s pull fetches in rounds: the entries the first round verified are set with its packs, and
    those the second one verifies (the same listing, records arrived since) are set with the second's."""
    source = _filled(tmp_path / "a", 10)
    source.runtime.close_writer()
    _filled(tmp_path / "a", 10, 10)
    source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    rounds = [{source.put_json({"input": i}) for i in range(start, start + 10)} for start in (0, 10)]
    target = Store(tmp_path / "b")
    seen: list[int] = []

    def unbuilt() -> set[str]:
        seen.append(len(dict(target.iter_actions())))
        return rounds.pop(0) if rounds else set()

    pull.pull_for_plan(target, remote, "refs/shared/none", unbuilt)
    assert seen[:2] == [0, 10]  # (the first round's entries set before the second is asked for)
    assert dict(target.iter_actions()) == dict(source.iter_actions())


def test_a_pack_bigger_than_its_signed_listing_says_is_not_downloaded(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    source = _filled(tmp_path / "a", 3)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    pack = max((tmp_path / "remote" / "packs").glob("*.pack"), key=lambda p: p.stat().st_size)
    with open(pack, "ab") as fh:
        fh.write(b"\0" * 10_000)  # someone with write access to the bucket grows it
    downloads: list[str] = []
    real = DirectoryBackend.download

    def spy(self: object, name: str, target: Path, size: int | None = None, moved: Moved = None,
            parts: int = 1) -> None:
        downloads.append(name)
        real(self, name, target, size, moved)  # type: ignore[arg-type]

    monkeypatch.setattr(DirectoryBackend, "download", spy)
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match="its listing says"):
        pull.pull(target, remote)
    assert not [name for name in downloads if name.endswith(".pack")]
    assert list(target.iter_objects()) == []


def test_a_listing_too_big_to_be_one_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(_filled(tmp_path / "a", 3), remote)
    monkeypatch.setattr(sync, "LISTING_MAX", 100)
    with pytest.raises(UsageError, match="more than any listing"):
        pull.pull(Store(tmp_path / "b"), remote)


def test_a_later_push_reads_no_pack_it_settled_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, remote = _pushed(tmp_path, 20)
    read: list[Path] = []
    real = transfer.sealed_object_ids
    monkeypatch.setattr(transfer, "sealed_object_ids", lambda path: read.append(path) or real(path))
    assert push.push(source, remote).packs == 0
    assert read == []  # (a periodic push of a long build reads no table of a pack it sent)
    # the remote lost that pack's listing: its objects are sent again (copied), whatever was remembered
    for ids_file in (tmp_path / "remote" / "packs").glob("*.ids"):
        ids_file.unlink()
    again = push.push(source, remote)
    assert again.objects == 60
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert set(target.iter_objects()) == set(source.iter_objects())


def test_the_largest_packs_leave_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The longest upload starts first, whatever the packs' names: the push ends with the last upload."""
    source = Store(tmp_path / "a")
    for count in (5, 40, 1, 12):  # one sealed pack each, of these many objects
        with source.batch():
            for i in range(count):
                source.put_json({"pack": count, "n": i, "filler": "x" * 500})
        source.runtime.close_writer()
    read: list[Path] = []
    real = transfer.sealed_object_ids
    monkeypatch.setattr(transfer, "sealed_object_ids", lambda path: read.append(path) or real(path))
    assert push.push(source, Remote("team", str(tmp_path / "remote"))).packs == 4
    sizes = [path.stat().st_size for path in read]
    assert len(sizes) == 4 and sizes == sorted(sizes, reverse=True)


def _pushed_in_packs(tmp_path: Path, counts: tuple[int, ...]) -> tuple[Store, Remote]:
    """A store with a sealed pack of each count of objects, pushed whole to a directory remote."""
    source = Store(tmp_path / "a")
    for count in counts:
        with source.batch():
            for i in range(count):
                source.put_json({"pack": count, "n": i, "filler": "x" * 500})
        source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    return source, remote


def test_big_packs_arrive_one_after_another_the_largest_first(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """So that each is checked while the next arrives, instead of all of them arriving at the end."""
    source, remote = _pushed_in_packs(tmp_path, (5, 40, 1, 12))
    spans: list[tuple[float, float, int]] = []  # (start, end, size) of each pack's download
    real = DirectoryBackend.download

    def timed(self: DirectoryBackend, name: str, target: Path, size: int | None = None, moved: Moved = None,
            parts: int = 1) -> None:
        start = time.monotonic()
        time.sleep(0.05)  # (long enough for downloads running at once to overlap)
        real(self, name, target, size, moved)
        if name.endswith(".pack"):  # (not the listings)
            spans.append((start, time.monotonic(), target.stat().st_size))

    monkeypatch.setattr(DirectoryBackend, "download", timed)
    monkeypatch.setattr(pull, "SERIAL_BYTES", 0)  # every pack counts as big
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).packs == 4
    spans.sort()
    assert all(end <= next_start for (_, end, _), (next_start, _, _) in zip(spans, spans[1:], strict=False))
    sizes = [size for _, _, size in spans]
    assert sizes == sorted(sizes, reverse=True)
    assert set(target.iter_objects()) == set(source.iter_objects())


def test_each_pack_is_verified_while_the_next_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Verification overlaps the transfer: the first pack to arrive is checked (every object hashed) while a later
    one is still downloading, not after the last has arrived. Small packs too: at most pull.STREAMS download at once,
    so they do not all arrive together at the end."""
    source, remote = _pushed_in_packs(tmp_path, (30, 20, 10, 5))
    downloads = _slow_downloads(monkeypatch, 0.2)  # (a slow link: each pack takes this long to arrive)
    checks: list[tuple[float, float]] = []
    real_check = transfer.Incoming.check

    def check(self: transfer.Incoming, *args: Any, **kwargs: Any) -> set[bytes]:
        start = time.monotonic()
        held = real_check(self, *args, **kwargs)
        checks.append((start, time.monotonic()))
        return held

    monkeypatch.setattr(transfer.Incoming, "check", check)
    target = Store(tmp_path / "b")
    assert pull.STREAMS == 2 and pull.pull(target, remote).packs == 4
    assert len(downloads) == len(checks) == 4
    first_checked, last_arrived = min(end for _, end in checks), max(end for _, end in downloads)
    assert first_checked < last_arrived - 0.1  # (the first check ended well before the last pack arrived)
    assert set(target.iter_objects()) == set(source.iter_objects())


def _slow_downloads(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[tuple[float, float]]:
    """Every pack takes `seconds` to arrive from a directory remote (a slow link); the (start, end) of each."""
    downloads: list[tuple[float, float]] = []
    real = DirectoryBackend.download

    def download(self: DirectoryBackend, name: str, target: Path, size: int | None = None, moved: Moved = None,
            parts: int = 1) -> None:
        start = time.monotonic()
        time.sleep(seconds)
        real(self, name, target, size, moved)
        if name.endswith(".pack"):
            downloads.append((start, time.monotonic()))

    monkeypatch.setattr(DirectoryBackend, "download", download)
    return downloads


def _timed_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float, int]]:
    """The (start, end, objects copied) of each small pack's copy into the pull's own pack."""
    copies: list[tuple[float, float, int]] = []
    real = transfer.copy_frames

    def copy(*args: Any) -> list[transfer.Blob]:
        start = time.monotonic()
        done = real(*args)
        copies.append((start, time.monotonic(), len(done)))
        return done

    monkeypatch.setattr(transfer, "copy_frames", copy)
    return copies


def test_each_small_pack_is_copied_in_while_the_next_downloads(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The work after the last pack shrinks: a small pack's objects are copied into the store as soon as it is
    checked, while later packs are still on the way, not all after the last one arrived (named together at the end:
    nothing of them is visible before then)."""
    source, remote = _pushed_in_packs(tmp_path, (30, 20, 10, 5))
    downloads, copies = _slow_downloads(monkeypatch, 0.2), _timed_copies(monkeypatch)
    seen_during: list[int] = []
    real_check = transfer.Incoming.check
    target = Store(tmp_path / "b")

    def check(self: transfer.Incoming, *args: Any, **kwargs: Any) -> set[bytes]:
        seen_during.append(len(list(Store(tmp_path / "b", create=False).iter_objects())))  # as another process sees it
        return real_check(self, *args, **kwargs)

    monkeypatch.setattr(transfer.Incoming, "check", check)
    assert pull.pull(target, remote).objects == 65
    assert len(downloads) == 4 and len(copies) == 4
    first_copied, last_arrived = min(end for _, end, _ in copies), max(end for _, end in downloads)
    assert first_copied < last_arrived - 0.1
    assert seen_during == [0, 0, 0, 0]  # copied, but named only once every pack and entry verified
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert fsck(target).clean


def test_a_damaged_pack_in_the_middle_stops_the_pull_and_nothing_of_it_lands(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs checked (and copied) before the damaged one arrived are not named either: the pull ends with the one
    line naming the pack, the store as it was; once the remote is mended the pull resumes from what it kept."""
    from tests.config.workspace_builder import claw

    source, remote = _pushed_in_packs(tmp_path, (30, 20, 10, 5))
    packs = sorted((tmp_path / "remote" / "packs").glob("*.pack"), key=lambda path: -path.stat().st_size)
    damaged = packs[1]  # the second to arrive, largest first
    good = damaged.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0xFF
    damaged.write_bytes(bytes(flipped))

    refused = claw("pull", str(tmp_path / "remote"), "--store", str(tmp_path / "cli"), cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [f"claw: error: remote pack {damaged.stem}: its bytes do not hash to "
                                                   "its name (damaged in transit or on the remote)"]
    assert list(Store(tmp_path / "cli", create=False).iter_objects()) == []

    monkeypatch.setattr(pull, "SERIAL_BYTES", 0)  # one at a time, largest first: the first is checked and copied
    _slow_downloads(monkeypatch, 0.05)
    copies = _timed_copies(monkeypatch)
    target = Store(tmp_path / "b")
    with pytest.raises(PackCheckError, match=f"remote pack {damaged.stem}: its bytes do not hash") as refusal:
        pull.pull(target, remote)
    assert "\n" not in str(refusal.value)
    assert [count for _, _, count in copies] == [30]  # the first pack was in, copied, when the second was refused
    assert list(target.iter_objects()) == [] and dict(target.iter_actions()) == {}
    assert list(Store(tmp_path / "b", create=False).iter_objects()) == []
    assert fsck(target).clean

    damaged.write_bytes(good)
    again = pull.pull(target, remote)
    assert again.resumed == 1  # the first pack, kept whole, was not downloaded again
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert fsck(target).clean


def test_entries_are_vetted_as_their_records_arrive_and_a_swapped_one_is_still_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a record says of the entries naming it (its key, its input) is asked right after its pack's check, while
    the next packs download, not after the last one; an entry whose record is another key's is refused all the same,
    with its one line, and nothing of the pull lands."""
    source = Store(tmp_path / "a")
    for start, count in ((0, 30), (30, 20), (50, 10)):  # (three sealed packs, records in each)
        _filled(tmp_path / "a", count, start)
        source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    vetted: list[tuple[float, str]] = []
    real = pull.record_checker()
    monkeypatch.setattr(pull, "record_checker", lambda: lambda key, content: vetted.append((time.monotonic(), key))
                        or real(key, content))
    monkeypatch.setattr(pull, "SERIAL_BYTES", 0)  # one at a time
    downloads = _slow_downloads(monkeypatch, 0.1)
    target = Store(tmp_path / "b")
    assert pull.pull(target, remote).packs >= 3
    last_arrived = max(end for _, end in downloads)
    assert len({key for _, key in vetted}) == 60
    assert sum(when < last_arrived for when, _ in vetted) >= 30  # (those of the packs before the last)
    assert dict(target.iter_actions()) == dict(source.iter_actions())

    swapped = swap_two_entries(tmp_path / "remote")
    assert swapped
    vetted.clear()
    forged = Store(tmp_path / "c")
    with pytest.raises(UsageError, match="its record is for another key") as refusal:
        pull.pull(forged, remote)
    assert "\n" not in str(refusal.value) and str(refusal.value).split("entry ")[1][:23] in {k[:23] for k in swapped}
    assert {key for _, key in vetted} >= set(swapped)  # (refused from what was vetted on the way)
    assert list(forged.iter_objects()) == [] and dict(forged.iter_actions()) == {}
    assert fsck(forged).clean


def test_a_listing_whose_entries_all_arrived_sound_is_taken_whole_and_any_other_is_walked_entry_by_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The entries of an arriving listing whose records were all vetted sound as they arrived, with their input
    documents arriving too, are taken at once (no entry asked again); one whose input document comes with no pack is
    walked and left for a later pull, and a swapped one is walked and refused, nothing of the pull landing."""
    from clawstore.store.services.archive_import import ArrivingPacks

    source, remote = _pushed(tmp_path, 20)
    walked: list[str] = []
    real = ArrivingPacks.entry_problem
    monkeypatch.setattr(ArrivingPacks, "entry_problem",
                        lambda self, key, record: walked.append(key) or real(self, key, record))
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert walked == [] and dict(target.iter_actions()) == dict(source.iter_actions())

    orphan = "blake3:" + "ab" * 32  # (its input document is in no store: a record sound in itself)
    source.put_action(orphan, {"kind": "run", "key": orphan, "status": "success", "outputs": {}})
    source.runtime.close_writer()
    push.push(source, remote)
    later = Store(tmp_path / "c")
    pull.pull(later, remote)
    assert orphan not in dict(later.iter_actions())  # (the walk: neither it nor its record here)
    assert dict(later.iter_actions()) == {k: v for k, v in source.iter_actions() if k != orphan}

    swapped = swap_two_entries(tmp_path / "remote")
    walked.clear()
    forged = Store(tmp_path / "d")
    with pytest.raises(UsageError, match="its record is for another key"):
        pull.pull(forged, remote)
    assert set(walked) & set(swapped)
    assert list(forged.iter_objects()) == [] and dict(forged.iter_actions()) == {}


@pytest.mark.parametrize("case", ["all new", "some here already", "the smallest copied"])
def test_the_index_rows_a_pull_makes_as_each_pack_is_checked_name_each_object_where_its_dict_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """The segment rows of a pack moved in whole are made right after its check (while the next ones download) and
    merged at the commit; those of a pack whose objects the store partly has, or copied ones, are made then: either
    way the segment names every object where the commit's dict does, and fsck finds the store clean."""
    source, remote = _pushed_in_packs(tmp_path, (30, 20, 10, 5))
    sizes = sorted(path.stat().st_size for path in (tmp_path / "remote" / "packs").glob("*.pack"))
    monkeypatch.setattr(transfer, "ADOPT_BYTES", sizes[1] if case == "the smallest copied" else 1)
    target = Store(tmp_path / "b")
    if case == "some here already":
        with target.batch():
            for i in range(5):
                target.put_json({"pack": 20, "n": i, "filler": "x" * 500})
    commits: list[Any] = []
    real_commit = transfer.commit
    monkeypatch.setattr(transfer, "commit", lambda *args: commits.append(args[1]) or real_commit(*args))
    made: list[Any] = []
    real_merge = transfer.index.merged_runs
    monkeypatch.setattr(transfer.index, "merged_runs", lambda *args: made.append(args) or real_merge(*args))
    pull.pull(target, remote)
    [pending] = commits
    assert pending.object_rows is not None and len(made) == 1
    rows = pending.object_rows[1]
    ids = [rows[at:at + 32] for at in range(0, len(rows), 52)]
    assert ids == sorted(set(ids)) and len(ids) == len(pending.objects)  # (in id order, each once)
    assert decode_segment("x", encode_segment(Segment("x", objects=pending.objects,
                                                      object_rows=pending.object_rows))).objects == pending.objects
    assert set(target.iter_objects()) == set(source.iter_objects())
    for oid in source.iter_objects():
        assert target.get_bytes(oid) == source.get_bytes(oid)
    assert fsck(target).clean


def _checked_in_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, twice: int | None = None
                      ) -> tuple[list[bytes], list[tuple[bytes, bytes]], str, Store, transfer.Incoming, list[Any]]:
    """A pack of `count` small objects (the one at `twice` listed once more) checked by the Incoming of a new store, to
    be moved in whole (its rows made as it is checked): contents, (id, frame) each, its name, the store, the Incoming,
    and the commits it makes from here on."""
    import blake3

    contents = [f"object {i}".encode() for i in range(count)]
    blobs = [(blake3.blake3(content).digest(), zstandard.ZstdCompressor().compress(content)) for content in contents]
    path, name = _pack_with(tmp_path, blobs if twice is None else [*blobs, blobs[twice]])
    monkeypatch.setattr(transfer, "ADOPT_BYTES", 1)
    store = Store(tmp_path / "store")
    commits: list[Any] = []
    real_commit = transfer.commit
    monkeypatch.setattr(transfer, "commit", lambda *args: commits.append(args[1]) or real_commit(*args))
    incoming = transfer.Incoming(store)
    incoming.check(path, name, "remote pack x")
    return contents, blobs, name, store, incoming, commits


def test_a_pack_naming_an_object_twice_is_named_by_the_commits_dict_not_by_rows_made_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack's table may list one object twice (both frames verify): the rows made as it was checked hold it twice,
    which no segment may; `take` keeps its first frame alone (and counts it once), so the segment's rows are made from
    those, not the rows made ahead."""
    contents, blobs, name, store, incoming, commits = _checked_in_whole(tmp_path, monkeypatch, 4, twice=2)
    assert incoming.take(name, set())[0] == 4  # (counted once, as the index names it: it said 5 before session 60)
    incoming.adopt()
    [pending] = commits
    assert len(pending.objects) == 4 and pending.object_rows is not None and len(pending.object_rows[0]) == 1
    store.refresh()
    assert [store.get_bytes("blake3:" + oid.hex()) for oid, _ in blobs] == contents
    assert fsck(store).clean


@pytest.mark.parametrize("present, left_out", [((), ()), ((0, 1), ()), ((), (3,)), ((2,), (3,))])
def test_a_pack_moved_in_whole_names_only_the_objects_the_store_lacks_and_not_those_left_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, present: tuple[int, ...], left_out: tuple[int, ...]) -> None:
    """A pack moved in whole has the index name only its objects this store lacks and the caller does not leave out,
    and counts those alone; when it names all of them, where they are was made as it was checked."""
    contents, blobs, name, store, incoming, commits = _checked_in_whole(tmp_path, monkeypatch, 5)
    named = [i for i in range(5) if i not in present and i not in left_out]
    taken = incoming.take(name, {blobs[i][0] for i in present}, {blobs[i][0] for i in left_out})
    assert taken[0] == len(named)
    incoming.adopt()
    [pending] = commits
    assert set(pending.objects) == {blobs[i][0] for i in named}
    assert {loc[0] for loc in pending.objects.values()} == {name[:32]}
    store.refresh()
    assert [store.get_bytes("blake3:" + blobs[i][0].hex()) for i in named] == [contents[i] for i in named]
    assert fsck(store).clean


def test_an_entry_another_process_sets_while_packs_download_is_not_hidden_by_the_pulled_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's own entries are looked up after the last pack, all at once (find_records): an entry another process
    sets while the packs download (a result, which a pulled record must not hide) is seen, and it stays."""
    source = _filled(tmp_path / "a", 30)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    quiet = Store(tmp_path / "quiet")
    pull.pull(quiet, remote)
    assert dict(quiet.iter_actions()) == dict(source.iter_actions())

    key = sorted(dict(source.iter_actions()))[0]
    answer: list[str] = []
    real_check = transfer.Incoming.check

    def check_while_a_build_sets_one(self: transfer.Incoming, *args: Any, **kwargs: Any) -> bytes:
        if not answer:
            other = Store(tmp_path / "busy")  # (another process's view of the store: a segment of its own)
            answer.append(other.put_json({"answer": "ours"}))
            other.put_action(key, {"kind": "run", "key": key, "status": "success", "cacheable": True,
                                   "outputs": {"answer": answer[0]}})
            other.close()
        return real_check(self, *args, **kwargs)

    monkeypatch.setattr(transfer.Incoming, "check", check_while_a_build_sets_one)
    busy = Store(tmp_path / "busy")
    busy.refresh()  # (its view taken before the other process's entry)
    pull.pull(busy, remote)
    assert answer
    assert busy.get_json(busy.get_action_record_id(key))["outputs"] == {"answer": answer[0]}  # not hidden by the pull's
    others = {k: v for k, v in busy.iter_actions() if k != key}
    assert others == {k: v for k, v in source.iter_actions() if k != key}
    assert fsck(busy).clean


def test_a_push_makes_the_next_pack_while_the_previous_one_uploads(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Push reads ahead: on a slow link the packs after the first are made (their frames read from the store and
    written) while the first is still on its way, not each after the previous upload ended."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 10)
    source = _filled(tmp_path / "a", 20)  # (its pack still being written: the objects go in packs push makes)
    uploads: list[tuple[float, float]] = []
    made: list[tuple[float, float]] = []
    real_upload, real_make = DirectoryBackend.upload, Store.make_pack

    def upload(self: DirectoryBackend, path: Path, name: str, moved: Moved = None) -> None:
        start = time.monotonic()
        time.sleep(0.3)  # (a slow link)
        real_upload(self, path, name, moved)
        uploads.append((start, time.monotonic()))

    def make_pack(self: Store, *args: Any) -> Path:
        start = time.monotonic()
        path = real_make(self, *args)
        made.append((start, time.monotonic()))
        return path

    monkeypatch.setattr(DirectoryBackend, "upload", upload)
    monkeypatch.setattr(Store, "make_pack", make_pack)
    assert push.push(source, Remote("team", str(tmp_path / "remote"))).packs == 7  # 60 objects, and the entries
    first_sent = min(end for _, end in uploads)
    assert len(made) == 7 and sum(1 for _, end in made if end < first_sent) >= 3
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(tmp_path / "remote")))
    assert set(target.iter_objects()) == set(source.iter_objects())


def test_a_remote_name_pointed_elsewhere_gets_the_packs_whole_again(tmp_path: Path) -> None:
    """What a push remembers as settled is about one remote: the same name at another URL (or a
    remote emptied meanwhile) gets the store's sealed packs as they are, not frame by frame."""
    source = _filled(tmp_path / "a", 20)
    source.runtime.close_writer()
    [own] = list((tmp_path / "a" / "packs").glob("*.pack"))
    push.push(source, Remote("team", str(tmp_path / "first")))
    push.push(source, Remote("team", str(tmp_path / "second")))
    assert _sha(tmp_path / "second" / "packs" / f"{file_digest(own)}.pack") == _sha(own)
    for path in (tmp_path / "second" / "packs").iterdir():  # emptied, same URL
        path.unlink()
    push.push(source, Remote("team", str(tmp_path / "second")))
    assert _sha(tmp_path / "second" / "packs" / f"{file_digest(own)}.pack") == _sha(own)


def test_a_listing_once_published_is_never_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two users pushing the same pack at the same instant (same bytes, each signing a listing of its
    own): the first listing stays, so what a puller already read (and trusts) does not change."""
    from clawstore.trust import keys

    source = _filled(tmp_path / "a", 5)
    source.runtime.close_writer()
    [own] = list((tmp_path / "a" / "packs").glob("*.pack"))
    remote = tmp_path / "remote"
    push.push(source, Remote("team", str(remote)))
    published = {p.name: p.read_bytes() for p in (remote / "packs").glob("*.ids")}
    first_signer = keys.own_public()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "another-user"))  # another key, same pack
    assert keys.own_public() != first_signer
    work = tmp_path / "work"
    work.mkdir()
    os.link(own, work / "same.pack")
    push._upload(DirectoryBackend(remote), push._Outgoing(work / "same.pack", sorted(set(sealed_object_ids(own)))),
                 {}, work)  # (the remote's sizes, as listed before the first push published the pack)
    assert {p.name: p.read_bytes() for p in (remote / "packs").glob("*.ids")} == published


def test_a_pull_killed_before_naming_its_first_pack_leaves_fsck_clean(tmp_path: Path) -> None:
    """SIGKILL at the worst instant of a first pull into an empty store: the pack renamed into packs/,
    its index segment not written yet."""
    import signal
    import subprocess
    import sys

    source = _filled(tmp_path / "a", 5)
    source.runtime.close_writer()
    remote = tmp_path / "remote"
    push.push(source, Remote("team", str(remote)))
    script = f"""
import os, signal
from pathlib import Path
from typing import Any
from clawstore.remote import pull
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.services import transfer
transfer.commit = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
transfer.ADOPT_BYTES = 0  # moved in whole, as a big pack is
pull.pull(Store(Path({str(tmp_path / "b")!r})), Remote("team", {str(remote)!r}))
"""
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    target = Store(tmp_path / "b")
    assert list((tmp_path / "b" / "packs").glob("*.pack"))  # the pack is there, named by nobody
    assert fsck(target).clean, fsck(target).problems
    pull.pull(target, Remote("team", str(remote)))  # run again: finished
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert fsck(target).clean


def push_killed_once(source: Store, remote: Path, published: str, settings: str, slow: float) -> Any:
    """A push of `source` to the directory `remote` in a process of its own, which SIGKILLs itself once it has
    published a listing whose first line (`line`, as JSON) makes the expression `published` true; packs over 1,000
    bytes take `slow` seconds more to upload (the others on a slow link); `settings`: a line run first (`push`)."""
    import subprocess
    import sys

    script = f"""
import json, os, signal, time
from pathlib import Path
from clawstore.remote import push
from clawstore.remote.backends import DirectoryBackend
from clawstore.remote.config import Remote
from clawstore.store import Store
create, upload = DirectoryBackend.create, DirectoryBackend.upload
def create_then_die(self, source, name):
    create(self, source, name)
    line = json.loads(source.read_bytes().split(b"\\n")[0])
    if {published}:
        os.kill(os.getpid(), signal.SIGKILL)
def slow_upload(self, source, name, moved=None):
    if source.stat().st_size > 1000:
        time.sleep({slow})
    upload(self, source, name, moved)
DirectoryBackend.create, DirectoryBackend.upload = create_then_die, slow_upload
{settings}
push.push(Store(Path({str(source.root)!r}), create=False), Remote("team", {str(remote)!r}))
"""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_a_push_killed_once_its_entries_are_published_leaves_a_remote_a_pull_takes_cleanly(tmp_path: Path) -> None:
    """The entries' listing goes first of the packs push makes (its bytes on the link while the next pack is made).
    SIGKILL right after it is published, before any pack of the records it names: the remote holds the entries and
    no head; a pull takes nothing it cannot verify (the entries wait for their records) and its store stays clean;
    the push run again finishes, and a pull then takes everything."""
    import signal

    source = _filled(tmp_path / "a", 30)  # (its pack still being written: every object goes in packs push makes)
    record = next(iter(source.entry_digests().values()))
    source.set_ref("campaigns/c", "blake3:" + record.hex())
    remote = tmp_path / "remote"
    killed = push_killed_once(source, remote, '"document" in line', "push.PACK_OBJECTS = 10", slow=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    listings = [listing.decode(path.read_bytes(), path.stem) for path in (remote / "packs").glob("*.ids")]
    assert [len(doc.actions) for doc in listings] == [30]  # the entries alone: none of their records' packs yet
    assert not (remote / "refs").exists() or not any(p.is_file() for p in (remote / "refs").rglob("*"))
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(remote)))
    assert target.entry_digests() == {} and target.get_ref("campaigns/c") is None
    assert fsck(target).clean, fsck(target).problems
    push.push(source, Remote("team", str(remote)))  # run again: finished
    pull.pull(target, Remote("team", str(remote)))
    assert set(target.iter_objects()) >= set(source.iter_objects())
    assert target.entry_digests() == source.entry_digests()
    assert target.get_ref("campaigns/c") == "blake3:" + record.hex()
    assert fsck(target).clean


def test_an_entry_committed_while_a_push_reads_the_store_travels_with_its_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build commits a result (its record, then its entry) between a push's two reads of what the store has: the push
    reads the entries first, then the objects, so every entry it sends has its record sent too. (It read the objects
    first: an entry committed in between went without its record, which a pull cannot verify.)"""
    source = _filled(tmp_path / "a", 5)
    committed: list[str] = []

    def then_a_commit(read: Any) -> Any:
        def reading(self: Store) -> Any:
            found = read(self)
            if not committed:  # (after the first of the two reads)
                with self.batch():
                    output, key = self.put_json({"answer": "late"}), self.put_json({"input": "late"})
                    committed.append(self.put_action(key, {"kind": "run", "key": key, "status": "success",
                                                           "outputs": {"answer": output}}) or key)
            return found
        return reading

    for name in ("entry_digests", "object_digests"):
        monkeypatch.setattr(Store, name, then_a_commit(getattr(Store, name)))
    push.push(source, Remote("team", str(tmp_path / "remote")))
    assert committed
    listed = {record for path in (tmp_path / "remote" / "packs").glob("*.ids")
              for record in listing.decode(path.read_bytes(), path.stem).actions.values()}
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(tmp_path / "remote")))
    assert len(listed) >= 5 and listed <= set(target.iter_objects())  # every entry sent with its record


def test_a_listing_read_after_its_cached_copy_vanished_is_downloaded_no_bigger_than_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another pull on this store dropped the cached copy (it found it malformed) between the batch
    # fetch and the read: the read downloads the listing again, and no more than the remote listed.
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(_filled(tmp_path / "a", 3), remote)
    _listed_smaller(monkeypatch, ".ids", 10)
    monkeypatch.setattr(sync, "_fetch_listings", lambda *args: None)  # the cached copies are gone
    with pytest.raises(RemoteDamage, match="holds more than the 10 bytes listed"):
        pull.pull(Store(tmp_path / "b"), remote)


def _pushed(tmp_path: Path, objects: int) -> tuple[Store, Remote]:
    """A store of `objects` results in one sealed pack, pushed to a directory remote."""
    source = _filled(tmp_path / "a", objects)
    source.runtime.close_writer()
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    return source, remote


def _interrupted_pull(target: Store, remote: Remote, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """A pull stopped once its packs have arrived (as a kill would, after the downloads); the packs it
    kept for a pull run again."""
    def stop(*args: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(pull._Pull, "_check_entries", stop)
        with pytest.raises(KeyboardInterrupt):
            pull.pull(target, remote)
    assert list(target.iter_objects()) == []
    return sorted(target.root.glob("remotes/team/incoming/*.pack"))


def test_a_pull_run_again_takes_only_kept_packs_that_are_whole_and_unchanged(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    source, remote = _pushed(tmp_path, 30)
    target = Store(tmp_path / "b")
    kept = _interrupted_pull(target, remote, monkeypatch)
    assert len(kept) == 2  # the store's pack and the entries' listing's
    assert pull.pull(target, remote).resumed == 2
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert list(target.root.glob("remotes/team/incoming/*")) == []

    again = Store(tmp_path / "c")
    damaged, linked = _interrupted_pull(again, remote, monkeypatch)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 1
    damaged.write_bytes(bytes(data))  # same size, other bytes (a crash's torn write)
    elsewhere = tmp_path / "elsewhere.pack"
    linked.rename(elsewhere)
    linked.symlink_to(elsewhere)  # its bytes are right, but packs/ must never hold a link out of the store
    report = pull.pull(again, remote)
    assert report.resumed == 0 and report.packs == 2
    assert set(again.iter_objects()) == set(source.iter_objects())
    assert not [p for p in (again.root / "packs").iterdir() if p.is_symlink()]
    assert fsck(again).clean


def test_gc_removes_the_packs_a_pull_kept_once_they_outlived_its_grace_period(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _, remote = _pushed(tmp_path, 10)
    target = Store(tmp_path / "b")
    old, young = _interrupted_pull(target, remote, monkeypatch)
    an_hour_ago = time.time() - 3700
    os.utime(old, (an_hour_ago, an_hour_ago))
    dry = collect(target, dry_run=True)
    assert dry.temp_files == 1 and dry.temp_bytes == old.stat().st_size and old.exists()
    report = collect(target)
    assert report.temp_files == 1 and not old.exists() and young.exists()
    assert pull.pull(target, remote).resumed == 1


def test_two_pulls_of_one_remote_into_one_store_at_once_both_finish(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes pulling the same packs share the remote's kept downloads (remote/downloads.py):
    each links, adopts and forgets them while the other may be doing the same."""
    import subprocess
    import sys

    source = _filled(tmp_path / "a", 400)
    remote = tmp_path / "remote"
    monkeypatch.setattr(push, "PACK_OBJECTS", 100)  # a dozen packs, all arriving at once
    push.push(source, Remote("team", str(remote)))
    assert len(list((remote / "packs").glob("*.pack"))) >= 12
    for round in range(2):
        store = tmp_path / f"b{round}"
        Store(store)
        script = f"""
from pathlib import Path
from typing import Any
from clawstore.remote import pull
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.services import transfer
transfer.ADOPT_BYTES = 0  # each moved in whole, as a big pack is
pull.pull(Store(Path({str(store)!r})), Remote("team", {str(remote)!r}))
"""
        procs = [subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        target = Store(store)
        assert set(target.iter_objects()) == set(source.iter_objects())
        assert fsck(target).clean, fsck(target).problems
        assert list(target.root.glob("remotes/team/incoming/*")) == []


def test_gc_counts_only_the_bytes_removing_a_dead_pulls_scratch_directory_frees(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed pull's scratch directory holds links to the packs it kept (and, once a pull run again
    adopted them, to packs/): removing it frees only what no other link keeps."""
    import subprocess
    import sys

    _, remote = _pushed(tmp_path, 10)
    target = Store(tmp_path / "b")
    kept = _interrupted_pull(target, remote, monkeypatch)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    scratch = target.tmp_dir / f"{gone.pid}-1-0123456789abcdef.pull"  # named as the dead pull's was
    scratch.mkdir()
    for pack in kept:
        os.link(pack, scratch / pack.name)
    (scratch / "half.pack").write_bytes(b"x" * 5000)  # a download cut short
    dry = collect(target, dry_run=True)
    assert dry.temp_files == 1 and dry.temp_bytes == 5000
    assert collect(target).temp_bytes == 5000 and not scratch.exists() and all(p.exists() for p in kept)


def test_the_entry_checks_find_arriving_ids_whole_and_the_stores_own(tmp_path: Path) -> None:
    """A pull's contents name arriving objects by whole id (as listings do): such an id is at hand, so is one the store
    holds; an id neither names, the bare hex of an arriving one, or a malformed one is not."""
    from clawstore.store.core.ids import PREFIX
    from clawstore.store.face import arriving_contents

    store = Store(tmp_path / "store")
    own = store.put_json({"own": 1})
    arriving, absent = PREFIX + "ab" * 32, PREFIX + "cd" * 32
    contents = arriving_contents(store, {}, {arriving})
    assert contents.has(arriving) and contents.has(own)
    assert not any(map(contents.has, (absent, arriving[len(PREFIX):], PREFIX + "zz", "")))
    assert contents.in_archive(arriving) and not contents.in_archive(own)  # type: ignore[attr-defined]


def test_a_pull_right_after_ones_own_push_fetches_nothing(tmp_path: Path) -> None:
    # The entries' own pack of a push was fetched back by the pusher's next pull ("1 pack(s), 0 object(s)"): its
    # entries were all this store's already.
    source = _filled(tmp_path / "a", 5)
    remote = Remote("team", str(tmp_path / "remote"))
    assert push.push(source, remote).packs == 2  # the objects, and the entries in a listing of their own
    again = pull.pull(source, remote)
    assert (again.packs, again.objects) == (0, 0)
    other = Store(tmp_path / "b")  # another store still gets every entry from that listing
    assert pull.pull(other, remote).packs == 2
    assert dict(other.iter_actions()) == dict(source.iter_actions())
