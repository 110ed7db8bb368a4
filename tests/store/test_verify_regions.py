"""fsck verifies a pack a region at a time (store/edges.py `verify_blobs`): the action entries a build writes between
its objects do not cut a region, so a pack of interleaved records and entries is decoded in one zstd batch; what each
object names and each damaged object are reported as when every blob was read alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store, edges
from clawstore.store.actions import put_action
from clawstore.store.core import codec
from clawstore.store.core.edgefile import children_in
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.packfile import KIND_ACTION, KIND_OBJECT, scan_pack
from clawstore.store.services.fsck import fsck
from tests.support.storefiles import flip_in_frame, pack_files


def _interleaved(root: Path) -> tuple[Store, list[str]]:
    """One pack of 40 runs, each a key document, an artifact, a record naming it and the record's action entry, in
    that order (a batch each, as a build commits its runs)."""
    store = Store(root)
    oids = []
    for i in range(40):
        with store.batch():
            key = store.put_json({"node": i, "pad": "k" * 100})
            artifact = store.put_bytes(f"artifact {i} ".encode() * 30)
            put_action(store, key, {"kind": "run", "key": key, "input": key, "outputs": {"artifact": artifact}})
            oids += [key, artifact]
    store.runtime.close_writer()
    return store, oids


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The frames each call of zstd's batch decoder was given."""
    calls: list[int] = []
    decode_frames = codec.decode_frames

    def counted(buffer: bytes, spans: object, held: int) -> object:
        spans = list(spans)  # type: ignore[call-overload]
        calls.append(len(spans))
        return decode_frames(buffer, spans, held)

    monkeypatch.setattr(codec, "decode_frames", counted)
    return calls


def test_entries_between_objects_do_not_cut_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _interleaved(tmp_path / "store")
    [path] = pack_files(store)
    blobs = scan_pack(path).blobs
    kinds = [blob.kind for blob in blobs]
    assert kinds.count(KIND_ACTION) == 40 and kinds[:4] == [KIND_OBJECT] * 3 + [KIND_ACTION]  # (interleaved)
    calls = _decodes(monkeypatch)
    with open(path, "rb") as fh:
        checked = list(edges.verify_blobs(fh, path.stem, blobs, facts=True))
    assert calls == [120]  # every object of the pack in one batch (the base decoded 3 a call, 40 calls)
    assert [blob for blob, *_ in checked] == blobs  # in file order
    for blob, why, children, fact in checked:
        assert why is None
        if blob.kind == KIND_OBJECT:
            assert children == children_in(store.get_bytes(PREFIX + blob.id.hex()))
        else:
            assert children is None and fact is None
    assert sum(fact is not None for *_, fact in checked) == 40  # each record's key and outputs


def test_a_damaged_object_between_entries_is_named_alone(tmp_path: Path) -> None:
    store, oids = _interleaved(tmp_path / "store")
    victim = oids[21]  # (an artifact, between a key document and a record; entries on either side)
    flip_in_frame(store, victim, -2)
    report = fsck(store, beside=False)
    assert list(report.corrupt) == [victim]
    assert "does not match its id" in report.corrupt[victim] or "undecodable" in report.corrupt[victim]


def test_an_id_across_two_objects_is_named_by_neither(tmp_path: Path) -> None:
    """Two objects side by side in a pack, the first (JSON) ending in an id's first half, the next beginning with its
    second: what each names is what it names alone, so a pass that searched the region's decoded content at once
    would credit the first with an id it does not hold; each of the ids the first holds whole is still named."""
    store = Store(tmp_path / "store")
    split = "blake3:" + "ab" * 32
    with store.batch():
        whole = store.put_bytes(b"named whole")
        first = store.put_bytes(b'{"whole": "' + whole.encode() + b'", "cut": "' + split[:40].encode())
        second = store.put_bytes(split[40:].encode() + b'"} and the rest of an artifact')
        after = store.put_json({"names": whole})
    store.runtime.close_writer()
    [path] = pack_files(store)
    blobs = scan_pack(path).blobs
    assert [PREFIX + blob.id.hex() for blob in blobs] == [whole, first, second, after]  # (side by side, one region)
    region = b"".join(store.get_bytes(oid) for oid in (first, second))
    assert edges.ID_RE.findall(region)[-1] == split[7:].encode()  # (the id a region-wide search would find)
    by_id = {PREFIX + blob.id.hex(): children for blob, _, children, _ in edges.verify_blobs(open(path, "rb"),
                                                                                                path.stem, blobs)}
    named = [bytes.fromhex(whole[7:])]
    assert by_id == {whole: [], first: named, second: [], after: named}
    log = edges.EdgeLog()
    with open(path, "rb") as fh:
        assert list(edges.verify_noting(fh, path.stem, blobs, log, facts=True)) == [(4, [])]
    assert bytes(log.edges) == named[0] * 2 and list(log.starts) == [0, 0, 1, 1, 2]
    fsck(store, beside=False)
    found = edges.load(store.root, store.runtime.packs_dir, path.stem)
    assert found is not None and found.verified
    assert [found.children(blob.id, blob.offset) for blob in blobs] == [[], named, [], named]


def test_a_region_of_well_compressed_objects_is_decoded_a_bounded_batch_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A campaign head's parts compress ~10x: a region of them decoded in one zstd batch was one buffer of ~30-50 MB
    (the first fsck's peak at 10,000 x 5, docs/scale/gc-and-fsck.md, Session 62). Each batch is at most DECODED
    bytes of content; every object is still checked, and a damaged one named, as before."""
    monkeypatch.setattr(edges, "DECODED", 256 << 10, raising=False)  # (before DECODED: one batch, failed below)
    store = Store(tmp_path / "store")
    with store.batch():  # 40 objects of ~64 KiB that compress to ~1 KiB each: one region
        oids = [store.put_bytes(b'{"node": %d, "names": "%s"}' % (i, b"x" * (64 << 10))) for i in range(40)]
    store.runtime.close_writer()
    [path] = pack_files(store)
    blobs = scan_pack(path).blobs
    held: list[int] = []
    decode_frames = codec.decode_frames

    def counted(buffer: bytes, spans: object, held_bytes: int) -> object:
        decoded = decode_frames(buffer, list(spans), held_bytes)  # type: ignore[call-overload]
        held.append(sum(len(content) for content in decoded) if decoded is not None else 0)
        return decoded

    monkeypatch.setattr(codec, "decode_frames", counted)
    with open(path, "rb") as fh:
        checked = list(edges.verify_blobs(fh, path.stem, blobs))
    assert sum(held) == sum(len(store.get_bytes(oid)) for oid in oids)  # (every object decoded in a batch)
    assert len(held) > 1 and max(held) <= 256 << 10  # (one batch of 2.6 MB before)
    assert [why for _, why, *_ in checked] == [None] * 40
    flip_in_frame(store, oids[25], -2)
    report = fsck(store, beside=False)
    assert list(report.corrupt) == [oids[25]]
