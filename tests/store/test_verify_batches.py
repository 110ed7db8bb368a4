"""A region's objects are decoded `edges.DECODED` bytes of content at a time (session 62): a damaged object at each
place relative to the batches (first or last of one, one larger than a batch, one too large to batch, the last of
the last batch, a header no frame's that sends the region's sizes one by one) is named by fsck exactly as when the
region was one batch, and every other object's children are the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.store import Store, edges
from clawstore.store.core import codec
from clawstore.store.core.packfile import scan_pack
from clawstore.store.services.fsck import fsck
from tests.support.storefiles import blob_span, flip_in_frame, pack_files

BATCH = 256 << 10  # DECODED in these tests: four objects of 64 KiB a batch
SMALL = 64 << 10
SIZES = [SMALL] * 12 + [2 * BATCH] + [SMALL] * 8 + [2 << 20] + [SMALL] * 6  # (12: over a batch; 21: over BATCH_MAX)


def _store(root: Path) -> tuple[Store, list[str]]:
    """One pack, one region: each object names the one before it (so children are compared too)."""
    store = Store(root)
    oids: list[str] = []
    with store.batch():
        for i, size in enumerate(SIZES):
            head = b'{"n": %d, "before": "%s", "pad": "' % (i, (oids[-1] if oids else "").encode())
            oids.append(store.put_bytes(head + b"x" * (size - len(head) - 2) + b'"}'))
    store.runtime.close_writer()
    return store, oids


def _checked(store: Store) -> list[tuple[str, str | None, list[bytes] | None]]:
    [path] = pack_files(store)
    with open(path, "rb") as fh:
        return [(blob.id.hex(), why, children) for blob, why, children, _ in
                edges.verify_blobs(fh, path.stem, scan_pack(path).blobs)]


@pytest.mark.parametrize("header", [False, True])
def test_damage_at_each_place_relative_to_the_batches_is_named_as_by_one_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, header: bool) -> None:
    store, oids = _store(tmp_path / "store")
    # batches of 0-3, 4-7, 8-11, 12, 13-16, 17-21 (21 left out of it), 22-25, 26-27: the first of the first, the last
    # and first of two, one over a batch, one too large to batch, the last of the last
    damaged = [0, 7, 8, 12, 21, 27]
    for at in damaged:
        flip_in_frame(store, oids[at], -2)
    if header:  # (a frame's magic broken in a later batch: every size of the region then asked one by one)
        flip_in_frame(store, oids[17], 0)
        damaged.append(17)
    monkeypatch.setattr(edges, "DECODED", 1 << 40, raising=False)  # one batch: the region decoded whole
    whole, whole_checked = fsck(Store(store.root, create=False)).corrupt, _checked(store)
    monkeypatch.setattr(edges, "DECODED", BATCH, raising=False)
    batched, batched_checked = fsck(Store(store.root, create=False)).corrupt, _checked(store)
    assert sorted(batched) == sorted(oids[at] for at in damaged)
    assert batched == whole
    assert batched_checked == whole_checked
    assert [why is not None for _, why, _ in batched_checked] == [i in damaged for i in range(len(SIZES))]


def test_an_undamaged_region_cut_in_batches_verifies_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = _store(tmp_path / "store")
    monkeypatch.setattr(edges, "DECODED", 1 << 40, raising=False)
    whole = _checked(store)
    monkeypatch.setattr(edges, "DECODED", BATCH, raising=False)
    calls: list[int] = []
    decode_frames = codec.decode_frames

    def counted(buffer: bytes, spans: list[tuple[int, int]], held: int) -> object:
        spans = list(spans)
        calls.append(len(spans))
        return decode_frames(buffer, spans, held)

    monkeypatch.setattr(codec, "decode_frames", counted)
    assert _checked(store) == whole
    assert calls == [4, 4, 4, 1, 4, 4, 4, 2]  # (before DECODED: one batch of 27)
    assert all(why is None for _, why, _ in whole)
    assert fsck(Store(store.root, create=False)).problems == []


def _claim(store: Store, oid: str, size: int) -> bool:
    """Rewrite the content size the object's frame header declares (a 4- or 8-byte field only); False if it has none
    that wide."""
    path, offset, _ = blob_span(store, oid)
    with open(path, "r+b") as fh:
        header = os.pread(fh.fileno(), codec.MAX_HEADER, offset)
        descriptor = header[4]
        width = {2: 4, 3: 8}.get(descriptor >> 6)
        if width is None:
            return False
        at = 4 + 1 + (0 if descriptor & 0x20 else 1) + (0, 1, 2, 4)[descriptor & 3]
        os.pwrite(fh.fileno(), size.to_bytes(width, "little"), offset + at)
    return True


def test_a_region_whose_frames_claim_a_megabyte_each_is_decoded_a_bounded_batch_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile pack: 120 frames of ~100 bytes each declaring codec.BATCH_MAX (1 MiB) of content, one region. Before
    DECODED they were asked of zstd in one batch of 120 MiB; now each batch declares at most DECODED, and every
    object is named damaged."""
    store = Store(tmp_path / "store")
    with store.batch():
        oids = [store.put_bytes(b"%05d" % i + bytes(80 << 10)) for i in range(120)]
    store.runtime.close_writer()
    assert all(_claim(store, oid, codec.BATCH_MAX) for oid in oids)
    declared: list[int] = []
    decode_frames = codec.decode_frames

    def counted(buffer: bytes, spans: list[tuple[int, int]], held: int) -> object:
        spans = list(spans)
        sizes = codec.declared_sizes(buffer, [at for at, _ in spans])
        declared.append(sum(sizes) if sizes is not None else -1)
        return decode_frames(buffer, spans, held)

    monkeypatch.setattr(codec, "decode_frames", counted)
    [path] = pack_files(store)
    with open(path, "rb") as fh:
        checked = list(edges.verify_blobs(fh, path.stem, scan_pack(path).blobs))
    assert [why is not None for _, why, _, _ in checked] == [True] * 120
    assert sum(declared) == 120 * codec.BATCH_MAX and max(declared) <= edges.DECODED  # (before: [125829120])
    assert sorted(fsck(Store(store.root, create=False)).corrupt) == sorted(oids)
