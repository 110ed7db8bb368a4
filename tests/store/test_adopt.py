"""A writer killed between two group commits: what it had finished is in its pack, and the next process
adopts it (verified as an import is), so nothing it reported is lost or done again."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.adopt import dead_writers
from clawstore.store.core.codec import encode
from clawstore.store.core.ids import PREFIX, oid_of
from clawstore.store.core.packfile import KIND_ACTION, KIND_OBJECT, PackWriter, encode_action, is_sealed, pack_path
from clawstore.store.services.fsck import fsck
from clawstore.values.canonical import canonical_json
from tests.store.helpers import script
from tests.support.reaped import reaped


def _kill_group_writer(root: Path, seed: int, after_s: float) -> list[str]:
    proc = script("proc_writer.py", root, seed, "group")
    with reaped(proc):  # (it writes until killed)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(after_s)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    return out.decode().splitlines()


def test_a_killed_group_writer_loses_nothing_it_reported(tmp_path: Path) -> None:
    root = tmp_path / "store"
    Store(root)
    rnd = random.Random(11)
    for round_number in range(4):
        lines = _kill_group_writer(root, round_number, rnd.uniform(0.3, 0.8))
        objects = [line.split()[1] for line in lines if line.startswith("obj ") and len(line) == 75]
        actions = [line.split()[1:] for line in lines if line.startswith("action ") and len(line.split()) == 3]
        assert actions, "the writer finished no batch before the kill"
        store = Store(root)
        assert dead_writers(store.runtime.packs_dir), "the killed writer's pack has no trailer"
        report = store.adopt_orphans()
        assert report.refused == [] and report.entries >= len(actions)
        assert not dead_writers(store.runtime.packs_dir)  # sealed in place: never walked again
        assert all(is_sealed(path) for path in (root / "packs").iterdir())
        fresh = Store(root)  # (what another process now sees)
        assert fresh.missing(objects) == []
        assert all(fresh.get_action_record_id(key) == record for key, record in actions)
        assert fresh.adopt_orphans().entries == 0
    assert fsck(Store(root)).clean


def _dead_pack(store: Store, blobs: list[tuple[int, bytes, bytes]]) -> Path:
    """A pack of `blobs` (kind, id, payload) whose writer is gone without sealing it."""
    writer = PackWriter(store.runtime.packs_dir)
    writer.append_many([(kind, blob_id, [payload]) for kind, blob_id, payload in blobs])
    writer.close()
    return writer.path


def _object(data: bytes) -> tuple[int, bytes, bytes]:
    oid = oid_of(data)
    return KIND_OBJECT, bytes.fromhex(oid[len(PREFIX):]), b"".join(bytes(part) for part in encode(data, 3))


def test_adoption_refuses_what_an_import_would_refuse(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.batch():
        mine = store.put_json({"question": "mine"})
        other = store.put_json({"question": "another"})
    good = canonical_json({"key": mine, "kind": "run", "outputs": {}, "status": "success"})
    moved = canonical_json({"key": other, "kind": "run", "outputs": {}, "status": "success"})
    missing_output = canonical_json({"key": mine, "kind": "run", "outputs": {"answer": PREFIX + "ab" * 32}})
    damaged = list(_object(b"an object whose bytes were flipped"))
    damaged[2] = damaged[2][:-1] + bytes([damaged[2][-1] ^ 1])
    now = time.time_ns()
    blobs = [_object(good), _object(moved), _object(missing_output), tuple(damaged)]
    entries = [(mine, good, now), (other, good, now + 1), (mine, missing_output, now - 5)]
    path = _dead_pack(store, [*blobs, *[
        (KIND_ACTION, bytes.fromhex(key[len(PREFIX):]), encode_action(bytes.fromhex(oid_of(rec)[len(PREFIX):]), t))
        for key, rec, t in entries]])
    report = Store(store.root).adopt_orphans()
    assert report.objects == 3  # the three intact records; the damaged object is refused
    assert any("corrupt" in why or "does not match" in why or "damaged" in why for why in report.refused), report
    assert any("another key" in why for why in report.refused), report.refused
    assert Store(store.root).get_action_record_id(mine) == oid_of(good)  # the newest entry that verifies
    assert Store(store.root).get_action_record_id(other) is None  # a record of another key: refused
    assert is_sealed(path) and os.stat(path).st_mode & 0o777 == 0o444


def test_an_entry_naming_an_output_that_is_nowhere_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.batch():
        key = store.put_json({"question": "q"})
    record = canonical_json({"key": key, "kind": "run", "outputs": {"answer": PREFIX + "cd" * 32}})
    _dead_pack(store, [_object(record), (KIND_ACTION, bytes.fromhex(key[len(PREFIX):]),
                                         encode_action(bytes.fromhex(oid_of(record)[len(PREFIX):]), time.time_ns()))])
    report = Store(store.root).adopt_orphans()
    assert report.entries == 0 and any("output" in why for why in report.refused), report.refused
    assert Store(store.root).get_action(key) is None


def test_a_live_writer_is_left_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    writer = PackWriter(store.runtime.packs_dir)
    kind, blob_id, payload = _object(b"still being written")
    writer.append_many([(kind, blob_id, [payload])])
    try:
        assert dead_writers(store.runtime.packs_dir) == []
        assert Store(store.root).adopt_orphans().packs == 0
        assert not is_sealed(pack_path(store.runtime.packs_dir, writer.pack_id))
    finally:
        writer.close()
