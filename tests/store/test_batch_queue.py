"""A batch's small objects are written together: one system call for a node's objects, the same pack bytes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.errors import StoreError
from clawstore.store import Store
from clawstore.store.core import edgefile, objects, packfile
from tests.support.descriptors import open_descriptors


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[int]]:
    """The bytes each pwritev into this test's packs wrote after its header. (Only this test's: a store an earlier
    test of the worker let go, dropped by the cyclic collector or closed by its thread meanwhile, seals its pack
    through the same os.pwritev: CI under load once counted such a trailer.)"""
    seen: list[int] = []
    real = os.pwritev
    mine = f"{tmp_path}{os.sep}"

    def counting(fd: int, parts: list[bytes], offset: int) -> int:
        if offset and os.readlink(f"/proc/self/fd/{fd}").startswith(mine):  # (not a new pack's header)
            seen.append(sum(map(len, parts)))
        return real(fd, parts, offset)

    monkeypatch.setattr(packfile.os, "pwritev", counting)
    yield seen


def _node(store: Store, i: int) -> list[str]:
    """What a run node writes: its artifact, its input document, a record naming both, the cache entry."""
    with store.batch():
        artifact = store.put_json({"status": "success", "text": "answer " * i, "i": i})
        document = store.put_json({"case": f"c{i}", "model": "m"})
        key = document
        record = {"kind": "run", "key": key, "outputs": {"artifact": artifact, "input_document": document},
                  "status": "success", "cacheable": True}
        return [artifact, document, store.put_action(key, record)]


def _files(root: Path, part: str) -> list[bytes]:
    """The files' bytes, each pack's id (its name, in its header) blanked."""
    return [path.read_bytes().replace(bytes.fromhex(path.stem), b"-" * 16) for path in sorted((root / part).iterdir())]


def _nodes(store: Store, grouped: bool) -> list[list[str]]:
    with store.group_commit() if grouped else contextlib.nullcontext():
        return [_node(store, i) for i in range(3)]


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "group-commit"])
def test_a_nodes_objects_and_entry_make_one_write_and_the_same_pack_bytes(
        tmp_path: Path, writes: list[int], monkeypatch: pytest.MonkeyPatch, grouped: bool) -> None:
    monkeypatch.setattr("clawstore.store.actions.time.time_ns", lambda: 1)  # the entries' times, equal
    noted: list[tuple[bytes, int, list[bytes]]] = []
    add = edgefile.EdgeLog.add
    me = threading.get_ident()  # (the objects this thread puts: not another thread's store meanwhile)
    monkeypatch.setattr(edgefile.EdgeLog, "add", lambda log, *args: (
        threading.get_ident() == me and noted.append(args), add(log, *args))[1])
    queued = Store(tmp_path / "queued")
    ids = _nodes(queued, grouped)
    assert len(writes) == 3  # per node: one write of its three objects and its cache entry
    together = writes[:]
    queued.close()
    monkeypatch.setattr(objects, "QUEUE_MAX_OBJECTS", 1)  # each object written as it is put (before the queue)
    writes.clear()
    alone = Store(tmp_path / "alone")
    assert _nodes(alone, grouped) == ids
    assert len(writes) == 12 and sum(writes) == sum(together)
    alone.close()
    assert _files(tmp_path / "queued", "packs") == _files(tmp_path / "alone", "packs")
    assert noted[:len(noted) // 2] == noted[len(noted) // 2:]  # what each pack's edges file says its objects name
    again = Store(tmp_path / "queued")
    assert again.get_action_record_id(ids[1][0]) is None and again.get_action_record_id(ids[1][1]) == ids[1][2]
    assert again.get_json(ids[2][0])["i"] == 2


def test_a_queued_object_is_present_without_a_write_and_read_back_inside_its_batch(store: Store,
                                                                                    writes: list[int]) -> None:
    with store.batch():
        oid = store.put_bytes(b"queued")
        assert store.has(oid) and store.put_bytes(b"queued") == oid  # dedup against the queue
        assert writes == []
        assert store.get_bytes(oid) == b"queued"  # where it is asked: written now
        assert len(writes) == 1
        other = store.put_bytes(b"next")
    assert len(writes) == 2
    assert store.get_bytes(other) == b"next"


def test_a_failed_batch_writes_none_of_its_queued_objects(store: Store, writes: list[int]) -> None:
    with pytest.raises(RuntimeError), store.batch():
        oid = store.put_bytes(b"never")
        raise RuntimeError("the node failed")
    assert writes == [] and not store.has(oid)


def test_the_queue_is_bounded(store: Store, writes: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(objects, "QUEUE_MAX_OBJECTS", 4)
    monkeypatch.setattr(objects, "QUEUE_MAX_BYTES", 100)
    with store.batch():
        ids = [store.put_bytes(b"%d" % i) for i in range(10)]
        assert len(writes) == 2  # written at four objects each time
        store.put_bytes(os.urandom(200))  # over the bytes' bound with the two queued: written at once
        assert len(writes) == 3
    assert len(writes) == 3
    assert [store.get_bytes(oid) for oid in ids] == [b"%d" % i for i in range(10)]


def test_a_big_object_is_written_as_it_is_put_after_the_queued_ones(store: Store, writes: list[int]) -> None:
    big = os.urandom(objects.QUEUED_OBJECT_MAX + 1)  # (random: its frame is as big)
    with store.batch():
        small = store.put_bytes(b"small")
        assert writes == []
        store.put_bytes(big)
        assert len(writes) == 2 and writes[1] > objects.QUEUED_OBJECT_MAX  # the queued one first, then the big one
        many = store.put_json({"names": [f"blake3:{n:064x}" for n in range(objects.QUEUED_CHILDREN_MAX + 1)]})
        assert len(writes) == 3  # naming many objects (a head's part): not held either
    assert len(writes) == 3 and store.get_bytes(small) == b"small" and store.get_bytes(store.put_bytes(big)) == big
    assert len(store.get_json(many)["names"]) == objects.QUEUED_CHILDREN_MAX + 1


def test_a_write_failing_at_the_batch_end_is_a_store_error_and_nothing_is_indexed(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, parts: list[bytes], offset: int) -> int:
        raise OSError(28, "No space left on device")

    with store.batch():
        pass  # the pack exists before the disk fills
    monkeypatch.setattr(packfile.os, "pwritev", full)
    with pytest.raises(StoreError, match="No space left on device"), store.batch():
        oid = store.put_bytes(b"paid for")
    monkeypatch.undo()
    assert not store.has(oid)
    assert store.put_bytes(b"paid for") == oid and store.get_bytes(oid) == b"paid for"


def test_a_pack_whose_header_cannot_be_written_keeps_no_descriptor_and_no_lock(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk full as a new pack starts: the pack's descriptor is closed, so its flock no longer says a writer lives
    (a sweep may take the empty pack) and a process retrying does not run out of descriptors one failure at a time."""
    def full(fd: int, parts: list[bytes], offset: int) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(packfile.os, "pwritev", full)
    for _ in range(3):
        with pytest.raises(StoreError, match="No space left on device"), store.batch():
            store.put_bytes(b"paid for")
    packs = sorted(store.root.glob("packs/*.pack"))
    held = set(open_descriptors().values())
    assert packs and not [path for path in packs if str(path) in held]
    for path in packs:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (raises BlockingIOError while a writer holds it)
        finally:
            os.close(fd)


def test_one_entrys_blob_is_the_columns_bytes() -> None:
    """A node's one action entry is packed by struct; the columns make the same bytes for the first of two."""
    rng = random.Random(45)
    for _ in range(200):
        entries = [(rng.randbytes(32), rng.choice([None, rng.randbytes(32)]), rng.randrange(-1 << 63, 1 << 63))
                   for _ in range(2)]
        start = rng.randrange(1 << 40)
        blob, rows, offsets = packfile._action_blobs(entries[:1], start)
        both, both_rows, both_offsets = packfile._action_blobs(entries, start)
        step = packfile.BLOB_HEAD_SIZE + packfile.ACTION_SIZE
        assert (blob, rows, list(offsets)) == (both[:step], both_rows[:packfile.TABLE_ROW_SIZE], list(both_offsets)[:1])
