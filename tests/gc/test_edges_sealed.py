"""The edges file a writer writes when it seals a pack (so gc needs no fsck first), the one gc writes for a pack that
has none, and the record facts fsck adds: never trusted once damaged, absent after a writer killed between its seal and
its file, right while writers seal packs and gc runs; a later fsck reads no record and finds what it found before."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.errors import CorruptObjectError
from clawstore.store import Store, edges, reach
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.objects import ObjectStore
from clawstore.store.core.packfile import is_sealed, iter_pack_ids, pack_path
from clawstore.store.reach import Reach
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.gc.helpers import store_once
from tests.gc.test_edges_cache import _files, _flip_middle, _foreign, _truncate
from tests.gc.test_reach_many import _graph, _reference_walk
from tests.store.helpers import env
from tests.support.reaped import Reap
from tests.support.storefiles import age_packs, flip_in_frame


def _no_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Objects the walk reads (reach.named_by) instead of taking what they name from an edges file."""
    read: list[str] = []
    plain = reach.named_by

    def counted(store: ObjectStore, hexdigest: str) -> set[str] | None:
        read.append(hexdigest)
        return plain(store, hexdigest)

    monkeypatch.setattr(reach, "named_by", counted)
    return read


Sealed = tuple[Path, str]  # (a store's root, the root object of its graph)


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    """A 1,200-object graph over 3 packs and the root's, each sealed pack with the file its writer wrote (no fsck ran):
    made once in the run (~0.7 s of CPU), each test given a copy (_sealed_store)."""
    return store_once(tmp_path_factory, "edges-sealed", lambda store: _graph(store, 1200, seed=7))


def _sealed_store(sealed: Sealed, tmp_path: Path) -> tuple[Store, str]:
    """A copy of the `sealed` store (its files' mtimes kept)."""
    return Store(Path(shutil.copytree(sealed[0], tmp_path / "store")), create=False), sealed[1]


def _walk(store: Store, root: str) -> Reach:
    walk = Reach(store, cached=True)
    walk.mark([root])
    return walk


def test_each_sealed_pack_has_its_writers_file_and_gc_reads_no_object_it_covers(
        sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, root = _sealed_store(sealed, tmp_path)
    packs = list(iter_pack_ids(store.runtime.packs_dir))
    assert len(_files(store)) == len(packs) >= 3  # (no fsck ran)
    assert not any(edges.load(store.root, store.runtime.packs_dir, pack).verified for pack in packs)  # type: ignore
    reached, missing = _reference_walk(store, [root])
    read = _no_reads(monkeypatch)
    walk = _walk(store, root)
    assert walk.marked == reached and set(walk.missing) == missing
    assert set(read) == missing  # (what is not in the store is looked for, and found missing)


def test_gc_writes_the_file_of_a_pack_sealed_without_one_and_reads_nothing_the_next_time(
        sealed: Sealed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, root = _sealed_store(sealed, tmp_path)
    written = {path.name: _covered(store, path) for path in _files(store)}
    for path in _files(store):
        path.unlink()
    reached, missing = _reference_walk(store, [root])
    read = _no_reads(monkeypatch)
    assert _walk(store, root).marked == reached  # each pack read whole once, its file written
    assert set(read) == missing | _big(store, reached)
    rebuilt = {path.name: _covered(store, path) for path in _files(store)}
    assert rebuilt.keys() == written.keys()
    for name, covered in rebuilt.items():  # what the writer noted, but for objects stored over 1 MiB (streamed)
        assert covered == {oid: named for oid, named in written[name].items()
                           if store.locate(PREFIX + oid.hex())[2] <= 1 << 20}
    read.clear()
    assert _walk(store, root).marked == reached and set(read) == missing | _big(store, reached)


def _covered(store: Store, path: Path) -> dict[bytes, list[bytes]]:
    """What an edges file says each object it covers names."""
    found = edges.load(store.root, store.runtime.packs_dir, path.name.removesuffix(edges.SUFFIX))
    assert found is not None
    return {digest: found.children(digest, offset) for digest, offset in found.covered()}  # type: ignore[misc]


def _big(store: Store, reached: set[str]) -> set[str]:
    """Objects stored over 1 MiB: a pack's file gc writes does not cover them (they are streamed when walked)."""
    return {digest for digest in reached if store.locate(PREFIX + digest)[2] > 1 << 20}


@pytest.mark.parametrize("damage", [_flip_middle, _truncate, _foreign, lambda p: p.write_bytes(b"")])
def test_a_writers_file_damaged_after_the_seal_is_never_trusted(
        sealed: Sealed, tmp_path: Path, damage: Callable[[Path], None]) -> None:
    store, root = _sealed_store(sealed, tmp_path)
    victim = _files(store)[0]
    damage(victim)
    assert edges.load(store.root, store.runtime.packs_dir, victim.name.removesuffix(edges.SUFFIX)) is None
    assert _walk(store, root).marked == _reference_walk(store, [root])[0]
    assert _covered(store, victim)  # gc read the pack and wrote it anew


def test_an_object_damaged_after_the_seal_stops_gc_and_fsck_names_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    leaves = [store.put_bytes(f"leaf {i}".encode()) for i in range(200)]
    victim = store.put_json({"names": leaves, "pad": "z" * 3000})
    store.set_ref("pins/v", store.put_json({"v": victim}))
    store.runtime.close_writer()
    assert _files(store)  # the writer's, no fsck yet
    flip_in_frame(store, victim, 30)
    age_packs(store, 7200)
    with pytest.raises(CorruptObjectError, match=victim):
        collect(store, grace_s=0)
    assert all(store.has(leaf) for leaf in leaves)
    assert list(fsck(store).corrupt) == [victim]  # the writer's file does not spare fsck a pack's blobs


def _sealer(root: Path, name: str, *mode: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(Path(__file__).parent / "proc_sealer.py"), str(root), name, *mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())


def test_a_writer_killed_between_its_seal_and_its_edges_file_leaves_a_pack_gc_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reap: Reap) -> None:
    root = tmp_path / "store"
    Store(root)
    proc = reap(_sealer(root, "chain", "hold"))  # (held: it waits to be killed)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("sealed "), proc.stderr.read() if proc.stderr else line  # type: ignore[union-attr]
    pack = line.split()[1]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    store = Store(root)
    packs_dir = store.runtime.packs_dir
    assert is_sealed(pack_path(packs_dir, pack)) and not edges.edges_path(root, pack).exists()
    assert len(_files(store)) == 1  # the first pack's, written before the kill
    head = store.get_ref("pins/chain")  # (set after each object: the last before the kill)
    assert head is not None
    reached, missing = _reference_walk(store, [head])
    read = _no_reads(monkeypatch)
    assert _walk(store, head).marked == reached and not missing and not read  # (the pack read whole, once)
    assert edges.load(root, packs_dir, pack) is not None  # gc read it whole and wrote its file
    report = fsck(store)
    assert report.clean and report.torn_packs <= 1  # (the pack it was writing when killed: unsealed, a torn tail)


def test_gc_while_writers_seal_packs_keeps_every_pinned_chain_whole(tmp_path: Path) -> None:
    """Three processes seal a pack every 64 KiB and pin their chains while gc (no grace) runs over and over."""
    root = tmp_path / "store"
    Store(root)
    writers = [_sealer(root, f"w{n}") for n in range(3)]
    store = Store(root)
    failures: list[BaseException] = []
    stop = threading.Event()

    def gc_loop() -> None:
        while not stop.is_set():
            try:
                collect(store, grace_s=0)
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                failures.append(exc)
                return

    thread = threading.Thread(target=gc_loop)
    thread.start()
    try:
        assert [writer.wait(timeout=120) for writer in writers] == [0, 0, 0], [w.stderr.read() for w in writers]
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not failures, failures
    collect(store, grace_s=0)
    for n in range(3):
        head = store.get_ref(f"pins/w{n}")
        assert head is not None
        reached, missing = _reference_walk(store, [head])
        assert len(reached) == 151 and not missing
    assert fsck(store).clean
    assert len(_files(store)) == len(list(iter_pack_ids(store.runtime.packs_dir)))


def test_a_later_fsck_reads_no_record_and_names_the_same_bad_entries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    keys, records = [], []
    for i in range(30):
        key = store.put_json({"node": i})
        records.append(store.put_action(key, {"kind": "run", "key": key, "input": key,
                                              "outputs": {"artifact": store.put_bytes(f"a{i}".encode())}}))
        keys.append(key)
    # An entry pointing at another key's record: its facts are the record's, the entry's key is checked each time.
    from clawstore.store.actions import key_digest, set_entries

    set_entries(store, {key_digest(keys[0]): (bytes.fromhex(records[1][len(PREFIX):]), time.time_ns())})
    store.set_ref("pins/h", store.put_json({"nodes": [{"kind": "run", "record": r} for r in records]}))
    store.runtime.close_writer()
    first = fsck(store)
    assert list(first.bad_actions) == [keys[0]] and "another key" in first.bad_actions[keys[0]]
    assert all(edges.load(store.root, store.runtime.packs_dir, p).verified  # type: ignore[union-attr]
               for p in iter_pack_ids(store.runtime.packs_dir))
    asked: list[str] = []
    plain = ObjectStore.get_many_bytes

    def counted(self: ObjectStore, oids: list[str], *args: object) -> dict[str, bytes]:
        wanted = list(oids)
        asked.extend(oid for oid in wanted if oid in records)
        return plain(self, wanted, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ObjectStore, "get_many_bytes", counted)
    again = fsck(store)
    assert again.bad_actions == first.bad_actions and again.clean == first.clean
    assert asked == []  # every record's check came from its pack's facts
    victim = _files(store)[0]
    _flip_middle(victim)  # a damaged facts file: the pack is verified again, its facts taken anew, same verdicts
    assert fsck(store).bad_actions == first.bad_actions
    assert edges.load(store.root, store.runtime.packs_dir, victim.name.removesuffix(edges.SUFFIX)).verified  # type: ignore


def test_the_writer_notes_nothing_it_did_not_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Frames stored as they came (a pull, an import) are not in the writer's file: gc reads them."""
    store = Store(tmp_path / "store")
    other = Store(tmp_path / "other")
    child = other.put_bytes(b"a child")
    parent = other.put_json({"child": child})
    for oid in (child, parent):
        assert store.put_frame(bytes.fromhex(oid[len(PREFIX):]), other.read_frame(oid))
    mine = store.put_json({"mine": parent})
    store.runtime.close_writer()
    pack = next(iter_pack_ids(store.runtime.packs_dir))
    found = edges.load(store.root, store.runtime.packs_dir, pack)
    assert found is not None and len(found.covered()) == 1
    read = _no_reads(monkeypatch)
    walk = _walk(store, mine)
    assert walk.marked == {oid[len(PREFIX):] for oid in (child, parent, mine)}
    assert sorted(read) == sorted(oid[len(PREFIX):] for oid in (child, parent))


def test_fsck_verifies_a_pack_whose_writers_file_vouches_for_its_bytes(tmp_path: Path) -> None:
    """A byte turned before the writer hashed its pack (a bad disk, a bad cable): the writer's file matches the pack,
    so gc trusts what it names, but fsck never takes a writer's file for a verification."""
    from clawstore.store.core.packfile import scan_pack

    store = Store(tmp_path / "store")
    victim = store.put_json({"pad": os.urandom(1500).hex()})
    store.set_ref("pins/v", victim)
    store.runtime.close_writer()
    flip_in_frame(store, victim, 30)
    pack = next(iter_pack_ids(store.runtime.packs_dir))
    path = pack_path(store.runtime.packs_dir, pack)
    log = edges.EdgeLog()
    log.add(bytes.fromhex(victim[len(PREFIX):]), store.locate(victim)[1], [])
    assert edges.save(store.root, store.runtime.tmp_dir, scan_pack(path), pack, edges.pack_digest(path), log, False)
    assert edges.load(store.root, store.runtime.packs_dir, pack) is not None
    assert list(fsck(store).corrupt) == [victim]
