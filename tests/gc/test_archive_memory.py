"""An export holds, per object, its digest and where it is (a few dozen bytes in arrays), not the manifest as Python
objects nor its JSON whole: the manifest is written in pieces to a temporary file and signed from there
(store/services/archive.py write_archive; docs/gc-and-archives.md, Scale: memory of export and import)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.services.archive import verify_archive, write_archive
from tests.support.fresh import measured_in_fresh_process


def export_peak_alone(root: str, count: str) -> list[int | str]:
    """Python's peak memory while `count` small objects (and an action-cache entry for every fourth) are exported,
    the store and its index loaded before; and the archive's digest, checked by the test."""
    store = Store(Path(root) / "store")
    with store.batch():
        ids = [store.put_bytes(b"object %d" % n) for n in range(int(count))]
    actions = {PREFIX + bytes(32 - 4).hex() + f"{n:08x}": ids[n] for n in range(0, len(ids), 4)}
    store.locate(ids[0])  # (the store's index, loaded whole by every command, is not the export's)
    out = Path(root) / "a.claw"
    tracemalloc.start()
    try:
        summary = write_archive(store, out, {"refs": {"pins/p": ids[0]}, "actions": actions}, ids)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()
    assert verify_archive(out).digest == summary.digest and summary.objects == len(ids)
    return [peak, summary.digest]


def test_an_export_holds_a_few_bytes_per_object_not_its_manifest(tmp_path: Path) -> None:
    small = measured_in_fresh_process(export_peak_alone, tmp_path / "small", 4000)
    large = measured_in_fresh_process(export_peak_alone, tmp_path / "large", 24000)
    per_object = (large[0] - small[0]) / (24000 - 4000)
    # Holding the listing, each object's place and the manifest's JSON twice (to sign it, to write it), as before,
    # it grew by about 1 KB per object; now by its digest and place in arrays and the ids' passing bytes.
    assert per_object < 200, (small, large, per_object)


def test_the_manifest_written_in_pieces_is_the_whole_documents_canonical_json(tmp_path: Path) -> None:
    """The same bytes as signing and encoding the whole document at once (what exports wrote before): an archive of
    the same campaign keeps its digest. Enough objects and entries for several pieces of each."""
    from clawstore.store.services import archive
    from clawstore.store.services.archive_tar import BLOCK, parse_header
    from clawstore.trust import signature
    from clawstore.values.canonical import canonical_json

    store = Store(tmp_path / "store")
    with store.batch():
        ids = [store.put_bytes(b"object %d" % n) for n in range(3 * archive._LISTED + 5)]
    actions = {PREFIX + f"{n:064x}": ids[n] for n in range(0, len(ids), 2)}
    fields = {"refs": {"pins/p": ids[1]}, "actions": actions, "head": ids[1], "build_id": "b1",
              "campaign": {"id": "c", "weight": 1e-7}, "configs": {"tree": ids[2], "files": []}}
    out = tmp_path / "a.claw"
    write_archive(store, out, fields, reversed(ids))
    listing = sorted([oid[len(PREFIX):], store.locate(oid)[2]] for oid in ids)
    expected = canonical_json(signature.sign({**fields, "format": archive.FORMAT, "version": archive.VERSION,
                                              "objects": listing}))
    data = out.read_bytes()
    name, size = parse_header(data[:BLOCK])
    assert name == archive.MANIFEST and data[BLOCK:BLOCK + size] == expected


def _mapped_kb() -> int:
    """This process's resident file-backed pages (mapped files), in KB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    raise AssertionError("no RssFile in /proc/self/status")


def test_the_pages_of_packs_read_are_let_go_as_the_copy_goes(tmp_path: Path, monkeypatch: object) -> None:
    """Copying frames out of mapped packs (export, push) keeps few of their pages mapped, not all it read."""
    import os

    import pytest

    from clawstore.store.core.packmaps import PackMaps

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(PackMaps, "RELEASE_EVERY", 1 << 20, raising=False)
    store = Store(tmp_path / "store")
    with store.batch():
        ids = [store.put_bytes(os.urandom(256 << 10)) for _ in range(128)]  # 32 MiB that zstd cannot shrink
    locs = [store.locate(oid) for oid in ids]
    maps = PackMaps(store)
    try:
        before = _mapped_kb()
        for loc in locs:
            view = maps.read(loc, loc[2], 0)
            assert len(bytes(view)) == loc[2]  # (its pages touched, as a copy does)
            view.release()
        grown = _mapped_kb() - before
    finally:
        maps.close()
        store.close()
    assert grown < 8 << 10, grown  # KB: all 32 MiB stayed mapped before


def test_small_frames_read_all_over_the_packs_let_their_pages_go_too(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An export copies frames in id order: small ones, all over a pack, each read mapping the 64 KiB around it
    (fault-around). Counting only the bytes read, those stayed mapped between releases (at 10,000 × 5: 280 MB of pages
    for 64 MiB of frames)."""
    import os
    import random

    from clawstore.store.core.packmaps import PackMaps

    monkeypatch.setattr(PackMaps, "RELEASE_EVERY", 4 << 20, raising=False)
    store = Store(tmp_path / "store")
    with store.batch():
        ids = [store.put_bytes(os.urandom(1000)) for _ in range(30000)]  # ~30 MB, ~7,500 pages
    locs = [store.locate(oid) for oid in ids]
    random.Random(7).shuffle(locs)
    maps = PackMaps(store)
    try:
        before = _mapped_kb()
        most = 0
        for number, loc in enumerate(locs):
            view = maps.read(loc, loc[2], 0)
            assert len(bytes(view)) == loc[2]
            view.release()
            if number % 64 == 0:
                most = max(most, _mapped_kb() - before)
        grown = max(most, _mapped_kb() - before)
    finally:
        maps.close()
        store.close()
    assert grown < 10 << 10, grown  # KB: counting bytes only, ~4,000 reads (28 MB of pages) between releases


@pytest.mark.parametrize("cached", [False, True])
def test_marked_digests_are_the_marked_ids_packed(tmp_path: Path, cached: bool) -> None:
    from clawstore.store.reach import Reach

    store = Store(tmp_path / "store")
    with store.batch():
        kept = [store.put_bytes(b"kept %d" % n) for n in range(40)]
        for n in range(30):
            store.put_bytes(b"not reached %d" % n)
    root = store.put_json({"objects": kept, "nested": store.put_json({"more": kept[:3]})})
    reach = Reach(store, cached=cached)
    reach.mark([root])
    packed = reach.marked_digests()
    digests = sorted(packed[at:at + 32] for at in range(0, len(packed), 32))
    assert len(packed) % 32 == 0 and digests == sorted(bytes.fromhex(h) for h in reach.marked)
    assert len(digests) == 42
    store.close()
