"""Push puts the link to work early: the first pack it makes is small and each next one twice the one before, each made
pack is named by the thread that made it (its upload thread only sends), and a push killed after that first pack
leaves a remote a pull takes cleanly."""

from __future__ import annotations

import copy
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from clawstore.remote import listing, pull, push
from clawstore.remote.backends import DirectoryBackend
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.core.packfile import sealed_object_ids
from clawstore.store.services.fsck import fsck
from tests.remote.test_packs import _filled, push_killed_once


def _counts(remote: Path) -> dict[str, int]:
    """{pack: objects its listing counts} of the packs a push made (the entries' pack, with none, left out)."""
    docs = (listing.decode(path.read_bytes(), path.stem) for path in (remote / "packs").glob("*.ids"))
    return {doc.pack: doc.count for doc in docs if not doc.actions}


def test_the_packs_push_makes_start_small_and_double_cut_the_same_each_time(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pack is small, each next one twice the one before up to a full pack (several on the link early, none
    waiting for a full pack to be made); the same ids make the same cuts, in id order."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 20)
    monkeypatch.setattr(push, "FIRST_PACK_OBJECTS", 4)
    source = _filled(tmp_path / "a", 20)  # 60 objects (its pack still being written: push makes packs of them)
    push.push(source, Remote("one", str(tmp_path / "one")))
    push.push(source, Remote("two", str(tmp_path / "two")))
    made = _counts(tmp_path / "one")
    assert sorted(made.values()) == [4, 8, 12, 16, 20]  # 4, 8, 16, 20 and the last 12
    assert made == _counts(tmp_path / "two")  # the same cuts, the same bytes: a push run again skips them
    ordered = sorted(source.object_digests())
    by_count = {count: pack for pack, count in made.items()}
    start = 0
    for count in (4, 8, 16, 20, 12):  # each the next ids, in order
        assert set(sealed_object_ids(tmp_path / "one" / "packs" / f"{by_count[count]}.pack")) == \
            set(ordered[start:start + count])
        start += count
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("one", str(tmp_path / "one")))
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert target.entry_digests() == source.entry_digests()
    assert fsck(target).clean


def test_an_interim_push_cuts_its_packs_as_push_does_the_entries_document_in_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """push_new cuts what was committed since with push's own `_chunks`: a small first pack (the link starts early),
    each next twice the one before up to full ones, the same ids the same cuts; the entries' document rides in the last
    pack, whose listing carries the entries."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 10)
    monkeypatch.setattr(push, "FIRST_PACK_OBJECTS", 4)
    source = _filled(tmp_path / "a", 2)
    known = push.RemoteKnowledge()
    push.push(source, Remote("one", str(tmp_path / "one")), move_refs=False, knowledge=known)
    shutil.copytree(tmp_path / "one", tmp_path / "two")  # (a second remote holding the same)
    before = _names(tmp_path / "one")
    with source.batch():  # 30 objects committed since
        for i in range(10):
            key = source.put_json({"input": 100 + i})
            source.put_action(key, {"kind": "run", "key": key, "status": "success",
                                    "outputs": {"answer": source.put_json({"answer": 100 + i})}})
    made: list[list[int]] = []
    for name in ("one", "two"):
        report = push.push_new(source, Remote(name, str(tmp_path / name)), copy.deepcopy(known))
        packs = _names(tmp_path / name) - before
        made.append(sorted(len(sealed_object_ids(tmp_path / name / "packs" / pack)) for pack in packs))
        assert report.packs == len(packs)
    assert made[0] == [4, 8, 9, 10]  # 4, 8, 10 and the last 8 with the entries' document
    assert made[1] == made[0]
    assert _names(tmp_path / "one") == _names(tmp_path / "two")
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("one", str(tmp_path / "one")))
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert target.entry_digests() == source.entry_digests()
    assert fsck(target).clean


def _names(remote: Path) -> set[str]:
    return {path.name for path in (remote / "packs").glob("*.pack")}


def test_a_pack_push_makes_is_named_by_the_thread_that_made_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Its BLAKE3 name, table and listing are made in the pushing thread, right after the pack: the upload thread
    starts sending at once (naming it there waited on the interpreter lock while the next pack was made)."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 10)
    source = _filled(tmp_path / "a", 20)
    named_in: list[str] = []
    real_digest = push.file_digest

    def file_digest(path: Path) -> Any:
        named_in.append(threading.current_thread().name)
        return real_digest(path)

    monkeypatch.setattr(push, "file_digest", file_digest)
    report = push.push(source, Remote("team", str(tmp_path / "remote")))
    assert report.packs == 7 and len(named_in) == 7  # 60 objects in packs of 10, and the entries' pack
    assert set(named_in) == {threading.current_thread().name}
    assert not list((tmp_path / "remote" / "packs").glob("*.tmp-*"))


def test_a_whole_store_is_read_while_the_remote_is_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's entries and objects are read in a thread of their own while the remote's listing is on its way (a
    round trip or more): the listing waits here until the entries are read, which only happens beside it. Entries
    still before objects (test_an_entry_committed_while_a_push_reads_the_store_travels_with_its_record)."""
    source = _filled(tmp_path / "a", 5)
    entries_read, seen = threading.Event(), []
    real_entries, real_list = Store.entry_digests, DirectoryBackend.list

    def entry_digests(self: Store) -> Any:
        found = real_entries(self)
        entries_read.set()
        return found

    def listed(self: DirectoryBackend, prefix: str) -> dict[str, int]:
        seen.append(entries_read.wait(timeout=5))  # (read one after the other: never set while the listing waits)
        return real_list(self, prefix)

    monkeypatch.setattr(Store, "entry_digests", entry_digests)
    monkeypatch.setattr(DirectoryBackend, "list", listed)
    push.push(source, Remote("team", str(tmp_path / "remote")))
    assert seen and all(seen)
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(tmp_path / "remote")))
    assert target.entry_digests() == source.entry_digests() and fsck(target).clean


def test_a_push_killed_after_its_first_small_pack_leaves_a_remote_a_pull_takes(tmp_path: Path) -> None:
    """SIGKILL once the first pack push made is published, the others still on a slow link: no ref on the remote, a
    pull takes what is there and nothing it cannot verify (fsck clean), and the push run again finishes."""
    source = _filled(tmp_path / "a", 30)
    record = next(iter(source.entry_digests().values()))
    source.set_ref("campaigns/c", "blake3:" + record.hex())
    remote = tmp_path / "remote"
    # (the first pack push makes, of 4 objects, published; the two of 43 on a slow link)
    killed = push_killed_once(source, remote, 'line["objects"] == 4',
                              "push.PACK_OBJECTS, push.FIRST_PACK_OBJECTS = 43, 4", slow=1)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    published = [listing.decode(path.read_bytes(), path.stem) for path in (remote / "packs").glob("*.ids")]
    assert 4 in [doc.count for doc in published] and len(published) <= 2  # it, and perhaps the entries' listing
    assert not (remote / "refs").exists() or not any(p.is_file() for p in (remote / "refs").rglob("*"))
    target = Store(tmp_path / "b")
    pull.pull(target, Remote("team", str(remote)))
    assert 4 <= sum(1 for _ in target.iter_objects()) < 90 and target.get_ref("campaigns/c") is None
    assert fsck(target).clean, fsck(target).problems
    push.push(source, Remote("team", str(remote)))  # run again: finished
    pull.pull(target, Remote("team", str(remote)))
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert target.entry_digests() == source.entry_digests()
    assert target.get_ref("campaigns/c") == "blake3:" + record.hex()
    assert fsck(target).clean


def test_each_listing_is_created_only_once_its_pack_is_there_whatever_the_cuts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule any order of the packs keeps: a listing (which promises its pack is there) is created only once its
    pack's upload has returned, for every pack push makes, the entries' one among them."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 20)
    monkeypatch.setattr(push, "FIRST_PACK_OBJECTS", 4)
    source = _filled(tmp_path / "a", 20)
    remote = Remote("team", str(tmp_path / "remote"))
    there: set[str] = set()
    listed: list[bool] = []
    real_upload, real_create = DirectoryBackend.upload, DirectoryBackend.create

    def upload(self: DirectoryBackend, path: Path, name: str, moved: Any = None) -> None:
        pack = Path(name).stem
        real_upload(self, path, name, moved)
        there.add(pack)

    def create(self: DirectoryBackend, path: Path, name: str) -> bool:
        if name.endswith(".ids"):
            listed.append(Path(name).stem in there)
        return real_create(self, path, name)

    monkeypatch.setattr(DirectoryBackend, "upload", upload)
    monkeypatch.setattr(DirectoryBackend, "create", create)
    report = push.push(source, remote)
    assert report.packs == 6 and len(listed) == 6 and all(listed)  # 4, 8, 16, 20, 12 and the entries' pack
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert set(target.iter_objects()) == set(source.iter_objects()) and fsck(target).clean
