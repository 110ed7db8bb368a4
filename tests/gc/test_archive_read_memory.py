"""`claw archive verify` and `import` hold, per object, a few dozen bytes in arrays (its digest and size; for an import
where its frame was staged), not the manifest parsed into Python lists, dicts and strs, encoded again, nor a dict or
set entry per object (store/services/archive.py _parse_canonical, archive_listing.py, archive_verify.py PackStage;
docs/gc-and-archives.md, Scale: memory of export and import)."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

from clawstore.store import Store
from clawstore.store.services.archive import verify_archive, write_archive
from clawstore.store.services.archive_import import import_into
from tests.support.fresh import measured_in_fresh_process


def _archive(root: Path, count: int) -> Path:
    """`count` small objects: half input documents, four in five of them with an entry pointing at a record (as a
    campaign's), the others filler."""
    store = Store(root / "origin")
    ids: list[str] = []
    actions: dict[str, str] = {}
    with store.batch():
        for n in range(count // 2):
            key = store.put_bytes(b'{"input document":%d}' % n)
            ids.append(key)
            if n % 5:
                actions[key] = store.put_bytes(b'{"input":"%s","key":"%s","n":%d}' % (key.encode(), key.encode(), n))
                ids.append(actions[key])
            else:
                ids.append(store.put_bytes(b"filler %d" % n))
    out = root / "a.claw"
    write_archive(store, out, {"refs": {"pins/p": ids[0]}, "actions": actions, "head": ids[0],
                               "campaign": {"id": "c"}, "build_id": "b"}, ids)
    store.close()
    shutil.rmtree(root / "origin")
    return out


def read_peak_alone(root: str, count: str, what: str) -> list[int]:
    """Python's peak memory while an archive of `count` objects is verified, or imported into a new store; and the
    objects it counted (and, importing, the new ones), checked by the test."""
    archive = _archive(Path(root), int(count))
    import clawstore.trust.signature  # noqa: F401 - (modules loaded before: their import is no archive's)
    from clawstore.store.services import archive_import

    archive_import.PUBLISH_EACH = 8192  # (several commits here, as at a campaign's scale; each segment read in place)

    tracemalloc.start()
    try:
        if what == "verify":
            summary = verify_archive(archive)
            new = summary.objects
        else:
            store, report = import_into(Path(root) / "into", archive)
            store.close()
            summary, new = report.summary, report.new_objects
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return [peak, summary.objects, new]


def _per_object(tmp_path: Path, what: str) -> float:
    small = measured_in_fresh_process(read_peak_alone, tmp_path / "small", 4000, what)
    large = measured_in_fresh_process(read_peak_alone, tmp_path / "large", 24000, what)
    assert small[1:] == [4000, 4000] and large[1:] == [24000, 24000], (small, large)
    return (large[0] - small[0]) / (24000 - 4000)


def test_verify_grows_by_a_few_dozen_bytes_an_object(tmp_path: Path) -> None:
    per_object = _per_object(tmp_path, "verify")
    # The manifest parsed ([hex, size] lists, the entries' dict of strs) and encoded again to check its form grew
    # it by about 1 KB an object (main: 994); now ~290: the manifest's bytes while they are read (~130 bytes an
    # object: inherent, the listing is checked before any object), and the listing's and entries' digests, packed.
    assert per_object < 450, per_object


def test_an_import_grows_by_a_few_dozen_bytes_an_object(tmp_path: Path) -> None:
    per_object = _per_object(tmp_path, "import")
    # Besides the manifest, a staging dict entry, a Blob and a set entry per object, and one commit naming every
    # object, grew it by about 1.2 KB an object (main: 1,202); now ~400: verify's, the records kept decoded for the
    # entry checks (at most 64 MiB: archive_verify.KEEP_BUDGET), its place in two arrays, commits of PUBLISH_EACH.
    assert per_object < 600, per_object


def test_an_import_named_in_several_commits_is_whole_and_sound(tmp_path: Path, monkeypatch: object) -> None:
    """Objects and entries named PUBLISH_EACH a commit: every object readable where it was staged, every entry
    written, fsck clean; importing again changes nothing."""
    from clawstore.store.actions import get_action_record_id
    from clawstore.store.services import archive_import
    from clawstore.store.services.fsck import fsck

    monkeypatch.setattr(archive_import, "PUBLISH_EACH", 7)  # type: ignore[attr-defined]
    archive = _archive(tmp_path, 60)
    store, report = import_into(tmp_path / "into", archive)
    with store:
        assert report.new_objects == 60 and report.actions_written == 24
        listing = verify_archive(archive).manifest
        for hexdigest, _ in listing.objects:
            assert store.has("blake3:" + hexdigest)
        for key, record in listing.actions.items():
            assert get_action_record_id(store, key) == record
            assert store.get_json(record)["key"] == key
        checked = fsck(store)  # (these records name no outputs: fsck says so of each, and only that)
        assert checked.objects == 60 and checked.actions == 24 and not (
            checked.corrupt or checked.bad_packs or checked.bad_index or checked.unindexed_packs), checked
        assert {why.split(" has ")[-1] for why in checked.bad_actions.values()} == {"no outputs"}, checked
        again = archive_import.import_archive(store, archive)
        assert again.new_objects == 0 and again.present_objects == 60 and again.actions_written == 0
