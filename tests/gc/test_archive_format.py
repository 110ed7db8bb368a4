"""The archive format at the store level: both verification paths (whole frames, streamed frames),
staging, and what `tar` and a second import see."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import zstandard

from clawstore.store import Store, oid_of
from clawstore.store.core.codec import content_size
from clawstore.store.core.packfile import is_sealed
from clawstore.store.services.archive import ArchiveError, read_manifest, verify_archive, write_archive
from clawstore.store.services.archive_import import import_archive, import_into
from clawstore.store.services.archive_verify import WHOLE_MAX
from tests.support.storefiles import frame_bytes


def _objects(store: Store) -> dict[str, str]:
    words = b" ".join(b"word%d" % (i % 977) for i in range(400_000))  # ~3.7 MB, compressible
    ids = {
        "small": store.put_bytes(b"a small object"),
        "streamed": store.put_stream(io.BytesIO(words * 3)),  # > 8 MiB of unknown size: no size in its header
        "random": store.put_bytes(os.urandom(3 << 20)),  # incompressible: stored as raw blocks
        "sized": store.put_bytes(words[: 2 << 20]),
    }
    ids["head"] = store.put_json({"nodes": sorted(ids.values())})
    return ids


def test_both_verification_paths_and_a_faithful_import(tmp_path: Path) -> None:
    store = Store(tmp_path / "origin")
    ids = _objects(store)
    frame = frame_bytes(store, ids["streamed"])
    assert content_size(frame[:18]) is None  # this one streams through the incremental check
    assert content_size(frame_bytes(store, ids["sized"])[:18]) is not None  # decoded whole
    archive = tmp_path / "a.claw"
    summary = write_archive(store, archive, {"head": ids["head"], "refs": {"pins/test": ids["head"]}},
                            ids.values())
    assert verify_archive(archive).digest == summary.digest
    listing = subprocess.run(["tar", "tvf", str(archive)], capture_output=True, text=True, check=True).stdout
    assert listing.count("objects/") == 5 and "clawarchive.seal" in listing

    target = Store(tmp_path / "target")
    report = import_archive(target, archive)
    assert report.new_objects == 5 and report.refs_set == ["pins/test"]
    for oid in ids.values():
        assert target.get_bytes(oid) == store.get_bytes(oid)
        assert frame_bytes(target, oid) == frame_bytes(store, oid)  # frames as they were
    assert os.listdir(target.tmp_dir) == []
    again = import_archive(target, archive)
    assert again.new_objects == 0 and again.present_objects == 5 and again.refs_unchanged == ["pins/test"]


@pytest.mark.parametrize("which", ["streamed", "random", "sized"])
def test_a_damaged_frame_is_named_and_nothing_is_staged(tmp_path: Path, which: str) -> None:
    store = Store(tmp_path / "origin")
    ids = _objects(store)
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {"head": ids["head"]}, ids.values())
    data = bytearray(archive.read_bytes())
    with tarfile.open(archive) as tar:
        member = tar.getmember("objects/" + ids[which][7:])
    at = member.offset_data + member.size // 2
    data[at] ^= 0x40
    archive.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match=ids[which].split(":")[1][:16]):
        verify_archive(archive)
    target = Store(tmp_path / "target")
    with pytest.raises(ArchiveError):
        import_archive(target, archive)
    assert list(target.iter_objects()) == [] and os.listdir(target.tmp_dir) == []
    assert target.list_refs() == {}


def test_a_whole_frame_with_data_after_it_is_refused(tmp_path: Path) -> None:
    """A forged archive (seal recomputed) whose member is a valid frame plus a second one."""
    store = Store(tmp_path / "origin")
    data = b"content" * 1000
    oid = oid_of(data)
    store.put_frame(bytes.fromhex(oid[7:]), zstandard.ZstdCompressor().compress(data)
                    + zstandard.ZstdCompressor().compress(b""))
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {}, [oid])
    assert read_manifest(archive).objects[0][0] == oid[7:]
    with pytest.raises(ArchiveError, match="data after the frame"):
        verify_archive(archive)
    assert WHOLE_MAX >= 1 << 20


def test_an_export_during_which_gc_rewrites_a_pack_still_copies_every_frame(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.store.services.gc import collect
    from clawstore.trust import signature

    store = Store(tmp_path / "origin")
    with store.batch():
        kept = [store.put_bytes(b"kept %d" % i) for i in range(50)]
        for i in range(200):
            store.put_bytes(b"garbage %d" % i)  # most of the pack: gc rewrites it without these
    store.set_ref("pins/kept", store.put_json({"objects": kept}))
    packs_before = set(os.listdir(store.root / "packs"))
    sign = signature.signature_over

    def sign_then_gc(message: bytes) -> dict:  # between locating the frames and copying them
        collect(store, grace_s=0, max_unused=0.0)
        return sign(message)

    monkeypatch.setattr(signature, "signature_over", sign_then_gc)
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {"refs": {}, "actions": {}}, kept)
    assert not packs_before & set(os.listdir(store.root / "packs")), "gc moved the frames to a new pack"
    other = Store(tmp_path / "other")
    import_archive(other, archive)
    assert [other.get_bytes(oid) for oid in kept] == [b"kept %d" % i for i in range(50)]


def _files_open_under(root: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # (the listing's own descriptor, closed by now)
            continue
        if target.startswith(str(root)):
            found.append(target)
    return found


def test_an_import_into_a_new_store_closes_its_staging_store_whether_it_succeeds_or_not(tmp_path: Path) -> None:
    """The new store is built in a staging directory then renamed into place: the store there is closed first (its
    pack sealed, its files let go), and a refused archive leaves no file open on the directory removed."""
    with Store(tmp_path / "origin") as store:
        ids = _objects(store)
        archive = tmp_path / "a.claw"
        write_archive(store, archive, {"head": ids["head"]}, ids.values())
    imported, report = import_into(tmp_path / "new", archive)
    assert report.new_objects == 5
    packs = list((tmp_path / "new" / "packs").glob("*.pack"))
    assert packs and all(is_sealed(pack) for pack in packs)
    imported.close()
    assert _files_open_under(tmp_path) == []

    def refuse(manifest: object, contents: object) -> None:  # (after every frame was staged: its pack is open)
        raise ArchiveError("refused by its content check")

    with pytest.raises(ArchiveError, match="content check"):
        import_into(tmp_path / "refused", archive, check=refuse)
    assert _files_open_under(tmp_path) == []  # (the exception, still held here, holds no open store)
    assert sorted(os.listdir(tmp_path)) == ["a.claw", "new", "origin"]


def test_two_imports_into_the_same_new_store_both_end_in_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Both found no store and built one beside; the second's rename met the first's store: "new: Directory not
    # empty", exit 3 (4 imports at once into an absent --store: 1 failed in each of 3 tries). It imports into it.
    from clawstore.store.services import archive_import

    with Store(tmp_path / "origin") as store:
        ids = _objects(store)
        archive = tmp_path / "a.claw"
        write_archive(store, archive, {"head": ids["head"], "refs": {"pins/test": ids["head"]}}, ids.values())
    target = tmp_path / "new"
    real = archive_import.import_archive
    others: list[int] = []

    def another_lands_first(*args: object, **kwargs: object) -> archive_import.ImportReport:
        report = real(*args, **kwargs)  # (the staged import done: its rename comes next)
        if not others:
            others.append(-1)  # (the other's own import is not interrupted)
            other, other_report = import_into(target, archive)  # another import of it, finishing first
            others[0] = other_report.new_objects
            other.close()
        return report

    monkeypatch.setattr(archive_import, "import_archive", another_lands_first)
    imported, report = import_into(target, archive)
    with imported:
        assert others == [5] and report.new_objects == 0  # (all there already: brought by the other)
        assert imported.get_ref("pins/test") == ids["head"]
        assert all(imported.has(oid) for oid in ids.values())
    assert sorted(os.listdir(tmp_path)) == ["a.claw", "new", "origin"]  # (no staging store left beside)

def test_an_empty_folder_removed_by_another_import_meanwhile_is_no_error(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # Two imports into an empty --store folder: both see it empty, the other removes it (to rename its store there)
    # before this one does: this one's rmdir said "No such file or directory", exit 2, though nothing was wrong.
    from clawstore.store.services import archive_import

    with Store(tmp_path / "origin") as store:
        ids = _objects(store)
        archive = tmp_path / "a.claw"
        write_archive(store, archive, {"head": ids["head"], "refs": {"pins/test": ids["head"]}}, ids.values())
    target = tmp_path / "new"
    target.mkdir()
    real = archive_import.import_archive

    def the_other_takes_the_folder(*args: object, **kwargs: object) -> archive_import.ImportReport:
        report = real(*args, **kwargs)  # (this one's staged import done: it finds the folder there, empty)
        real_is_dir = Path.is_dir

        def is_dir_then_gone(path: Path) -> bool:
            found = real_is_dir(path)
            if path == target and found:
                path.rmdir()  # (the other import removes it now, between this one's look and its rmdir)
                monkeypatch.setattr(Path, "is_dir", real_is_dir)
            return found

        monkeypatch.setattr(Path, "is_dir", is_dir_then_gone)
        return report

    monkeypatch.setattr(archive_import, "import_archive", the_other_takes_the_folder)
    imported, _ = import_into(target, archive)
    with imported:
        assert imported.get_ref("pins/test") == ids["head"]
    assert sorted(os.listdir(tmp_path)) == ["a.claw", "new", "origin"]


def test_a_file_that_is_no_archive_is_said_to_be_none_and_a_cut_archive_truncated(tmp_path: Path) -> None:
    # A text file was "truncated (a member header ends early at byte 25)": as if a claw archive had been cut.
    store = Store(tmp_path / "store")
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {}, [store.put_bytes(b"one object")])
    cases = {"notes.txt": (b"some notes, not an archive\n", "it does not begin with its clawarchive.json member"),
             "page.html": (b"<html>" + b"x" * 600, "it does not begin with its clawarchive.json member"),
             "empty": (b"", "the file is empty"),
             "cut.claw": (archive.read_bytes()[:300], "truncated (a member header ends early at byte 300)")}
    for name, (data, why) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        for read in (read_manifest, verify_archive):
            with pytest.raises(ArchiveError) as caught:
                read(path)
            said = str(caught.value)
            assert said == f"archive {path}: " + ("" if name == "cut.claw" else "not a clawstore archive (") + why + \
                ("" if name == "cut.claw" else ")"), (name, said)
