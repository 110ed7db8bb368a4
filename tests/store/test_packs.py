"""Format 2 itself: group commit, index segments and their merging, packs rebuilt into an index,
damaged packs moved aside, gc killed at random instants, writers and collectors at once."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import blake3
import pytest

from clawstore.store import Store
from clawstore.store.core.index import COMPACT_AT, IndexView, list_segments
from clawstore.store.core.packfile import (
    KIND_ACTION,
    KIND_OBJECT,
    NotAPackError,
    PackWriter,
    encode_action,
    scan_pack,
    sealed_object_ids,
    sealed_table,
    table_of,
)
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.store.helpers import REPO, claw, env, json_like, script
from tests.support.fresh import measured_in_fresh_process
from tests.support.reaped import Reap
from tests.support.storefiles import age_packs, flip_in_frame, pack_files, visible_elsewhere


def test_group_commit_makes_many_batches_durable_with_one_barrier(store: Store) -> None:
    seen_at_callback: list[bool] = []
    with store.group_commit(window_s=60, max_batches=1000):
        ids = []
        for i in range(200):
            with store.batch():
                ids.append(store.put_bytes(b"node output %d" % i))
        assert all(store.has(oid) for oid in ids)  # this process sees its results at once
        assert not visible_elsewhere(store, ids[0])  # others only once the group is durable
        store.when_durable(lambda: seen_at_callback.append(visible_elsewhere(store, ids[-1])))
        assert seen_at_callback == []
        store.flush()
        assert seen_at_callback == [True]
    assert all(visible_elsewhere(store, oid) for oid in ids[::20])
    assert len(list_segments(store.root / "index")) == 1  # 200 batches, one index segment


def test_group_commit_window_publishes_without_a_flush(store: Store) -> None:
    with store.group_commit(window_s=0.1, max_batches=1000):
        with store.batch():
            oid = store.put_bytes(b"committed by the timer")
        deadline = time.monotonic() + 5
        while not visible_elsewhere(store, oid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert visible_elsewhere(store, oid)


def test_group_commit_across_threads_and_a_ref_forces_the_commit(store: Store) -> None:
    ids: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        for i in range(50):
            with store.batch():
                oid = store.put_bytes(b"thread %d item %d" % (n, i))
            with lock:
                ids.append(oid)

    with store.group_commit(window_s=60, max_batches=10_000):
        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        head = store.put_json({"nodes": sorted(ids)})
        store.set_ref("pins/head", head)  # a ref never points at something not yet durable
        assert visible_elsewhere(store, head) and all(visible_elsewhere(store, o) for o in ids)


def test_index_segments_are_merged_and_other_readers_adopt_the_merge(store: Store) -> None:
    other = IndexView(store.root / "index", store.root / "tmp", store.root / "locks")
    ids = []
    for i in range(COMPACT_AT - 1):
        ids.append(store.put_bytes(b"one commit each %d" % i))  # one segment per put outside a batch
    other.refresh()
    assert len(other.loaded) == COMPACT_AT - 1
    for i in range(COMPACT_AT):
        ids.append(store.put_bytes(b"more %d" % i))
    assert len(list_segments(store.root / "index")) < COMPACT_AT
    reloads = []
    real_reload = other._reload
    other._reload = lambda names: reloads.append(names) or real_reload(names)  # type: ignore[method-assign]
    other.refresh()
    assert all(other.find_object(bytes.fromhex(oid[7:])) for oid in ids)
    assert not reloads  # read the merges in without reloading everything
    assert set(other.loaded) == set(list_segments(store.root / "index"))


def test_a_lost_index_is_rebuilt_from_the_packs(store: Store) -> None:
    with store.batch():
        outputs = [store.put_bytes(json_like(2000, seed=i)) for i in range(20)]
        key = store.put_json({"node": 1})
        record = store.put_action(key, {"kind": "run", "key": key, "outputs": {"o": outputs}})
    big = store.put_bytes(os.urandom(9 << 20))  # a pack of its own
    for path in (store.root / "index").iterdir():
        path.unlink()
    report = fsck(store)
    assert not report.clean and "the index is empty" in report.problems[0]
    repaired = fsck(store, repair=True)
    assert repaired.clean and any("rebuilt the index" in line for line in repaired.repaired)
    fresh = Store(store.root)
    assert fresh.get_action_record_id(key) == record
    assert all(fresh.get_bytes(o) == json_like(2000, seed=i) for i, o in enumerate(outputs))
    assert fresh.has(big) and fsck(fresh).clean


def test_a_damaged_pack_goes_to_quarantine_and_its_good_blobs_stay(store: Store) -> None:
    with store.batch():
        good = [store.put_bytes(json_like(5000, seed=i)) for i in range(30)]
        bad = store.put_bytes(json_like(5000, seed=99))
    flip_in_frame(store, bad, 100)
    report = fsck(store)
    assert [*report.corrupt] == [bad] and len(report.bad_packs) == 1
    repaired = fsck(store, repair=True)
    assert repaired.clean
    assert not store.has(bad)
    assert all(store.get_bytes(o) == json_like(5000, seed=i) for i, o in enumerate(good))
    assert any(name.endswith(".pack." + name.split(".")[-1]) for name in os.listdir(store.root / "quarantine"))
    assert fsck(store).clean


def test_a_killed_writer_leaves_a_pack_whose_committed_blobs_are_readable(tmp_path: Path, reap: Reap) -> None:
    root = tmp_path / "store"
    Store(root)
    proc = reap(script("proc_writer.py", root, 5))  # (it writes until killed)
    assert proc.stdout.readline() == b"ready\n"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    reported = [line.split()[1] for line in out.decode().splitlines() if line.startswith("obj ") and len(line) == 75]
    unsealed = [scan_pack(path) for path in pack_files(Store(root)) if not scan_pack(path).sealed]
    assert unsealed, "the writer was killed before it sealed its pack"
    store = Store(root)
    assert all(store.get_bytes(oid) is not None for oid in reported)
    assert fsck(store).clean


def _writer_before_its_header(root: Path, reap: Reap) -> subprocess.Popen[bytes]:
    proc = reap(script("proc_new_pack.py", root, stdin=subprocess.PIPE))  # (held: it waits to be killed)
    assert proc.stdout is not None and proc.stdout.readline() == b"opened\n"
    return proc


def test_a_writer_killed_before_its_pack_header_leaves_a_clean_store(tmp_path: Path, reap: Reap) -> None:
    root = tmp_path / "store"
    store = Store(root)
    with store.batch():
        kept = store.put_bytes(b"committed before")
    store.set_ref("pins/kept", store.put_json({"nodes": [kept]}))
    proc = _writer_before_its_header(root, reap)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert [path.stat().st_size for path in pack_files(store)].count(0) == 1  # what the kill left
    report = fsck(store)
    assert report.clean, report.problems
    assert report.torn_packs == 1
    assert fsck(store, repair=True).clean and not os.listdir(root / "quarantine")
    collect(store, grace_s=0)
    assert [path.stat().st_size for path in pack_files(store)].count(0) == 0  # gc deletes it
    assert store.get_bytes(kept) == b"committed before" and fsck(store).clean


def test_fsck_finds_nothing_wrong_with_a_pack_whose_writer_has_not_written_its_header(tmp_path: Path,
                                                                                      reap: Reap) -> None:
    root = tmp_path / "store"
    store = Store(root)
    proc = _writer_before_its_header(root, reap)
    try:
        report = fsck(store)
        assert report.clean, report.problems
        repaired = fsck(store, repair=True)
        assert repaired.clean and repaired.repaired == []  # nothing to mend: no index rebuilt, nothing moved
        assert not os.listdir(root / "quarantine")
    finally:
        out, err = proc.communicate(b"go on\n", timeout=30)
    assert proc.returncode == 0, err
    oid = out.decode().split()[-1]
    assert Store(root).get_bytes(oid) == b"written after the wait"
    assert fsck(Store(root)).clean


def _put_round(root: Path, n: int) -> None:
    """In another process: 200 objects a new head names, 200 nobody names (so gc has work)."""
    code = (
        "import sys\nfrom clawstore.store import Store\n"
        "s = Store(sys.argv[1]); n = int(sys.argv[2])\n"
        "with s.batch():\n"
        "    live = [s.put_bytes(b'live %d %d ' % (n, i) * 50) for i in range(200)]\n"
        "    [s.put_bytes(b'garbage %d %d ' % (n, i) * 50) for i in range(200)]\n"
        "    head = s.put_json({'round': n, 'nodes': live})\n"
        "s.set_ref('pins/round%d' % n, head)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(root), str(n)], check=True, env=env(), cwd=REPO)


def gc_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "clawstore.cli",
            "gc", "--grace", "0", "--store", str(root)]


def test_gc_killed_at_random_instants_leaves_a_clean_store(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root)
    rnd = random.Random(5)
    kills = 0
    for n in range(6):
        _put_round(root, n)
        if n:
            store.delete_ref(f"pins/round{n - 1}")  # the previous round's live objects become garbage
        age_packs(store, 7200)
        # How long this gc takes to the end on this machine (on a copy), so the kill lands inside it.
        copy = tmp_path / f"copy{n}"
        shutil.copytree(root, copy)
        began = time.monotonic()
        subprocess.run(gc_command(copy), env=env(), cwd=REPO, capture_output=True, check=True)
        whole = time.monotonic() - began
        gc = subprocess.Popen(gc_command(root), env=env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(0.15, 0.75) * whole)  # inside it, even when this run is a little faster
        gc.send_signal(signal.SIGKILL)
        gc.communicate(timeout=60)
        kills += gc.returncode == -signal.SIGKILL
        report = fsck(store)
        assert report.clean, report.problems
    assert kills >= 2
    head = store.get_ref("pins/round5")
    assert head is not None
    for oid in store.get_json(head)["nodes"]:
        store.get_bytes(oid)
    final = collect(store, grace_s=0)
    assert len(list(store.iter_objects())) == 201, (final.live_leases, final.kept_young, final.kept_for_builds,
                                                    final.packs_deleted, final.packs_rewritten, len(final.objects))
    assert fsck(store).clean


def test_writers_and_collectors_at_once(tmp_path: Path, reap: Reap) -> None:
    """Three writers (holding leases, like builds) and gcs in a loop, all on one store, then SIGKILL."""
    root = tmp_path / "store"
    Store(root)
    writers = [reap(script("proc_writer.py", root, 40 + n, "lease")) for n in range(3)]  # (they write until killed)
    for proc in writers:
        assert proc.stdout.readline() == b"ready\n"
    # At least three gcs, however slow a gc process is (one took 4 s at load 17): not a time budget alone.
    deadline = time.monotonic() + 3
    gcs = 0
    while gcs < 3 or time.monotonic() < deadline:
        result = claw("gc", "--grace", "0", "--store", root)
        assert result.returncode in (0, 3), result.stderr  # 3: another gc holds the lock
        gcs += 1
    reported_objects: set[str] = set()
    reported_actions: dict[str, str] = {}
    for proc in writers:
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        for line in out.decode().splitlines():
            parts = line.split()
            if parts and parts[0] == "obj" and len(parts) == 2 and len(parts[1]) == 71:
                reported_objects.add(parts[1])
            elif parts and parts[0] == "action" and len(parts) == 3 and len(parts[2]) == 71:
                reported_actions[parts[1]] = parts[2]
    assert reported_objects
    store = Store(root)
    report = fsck(store)
    assert report.clean, report.problems
    missing = [k for k, r in reported_actions.items() if store.get_action_record_id(k) != r]
    assert not missing, (len(missing), len(reported_actions), missing[:3])
    for key, record in reported_actions.items():  # kept while the writers leases lived
        assert store.get_action_record_id(key) == record
        for oid in store.get_json(record)["outputs"]["files"]:
            store.get_bytes(oid)


@pytest.mark.parametrize("parts", [3, 2000])
def test_short_writes_are_resumed_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parts: int) -> None:
    """A pwritev may write less than asked (signals, quotas): the rest follows, in order, at the right place."""
    real = os.pwritev
    monkeypatch.setattr(os, "pwritev", lambda fd, views, offset: real(fd, [bytes(b"".join(views)[:7])], offset))
    writer = PackWriter(tmp_path)
    payloads = [bytes([i % 251]) * (i % 13 + 1) for i in range(parts)]
    writer.append_many([(KIND_OBJECT, i.to_bytes(32, "big"), [p]) for i, p in enumerate(payloads)])
    writer.seal()
    writer.close()
    data = writer.path.read_bytes()
    blobs = scan_pack(writer.path).blobs
    assert [data[b.offset:b.offset + b.length] for b in blobs] == payloads


def test_a_packs_table_names_its_objects_the_same_to_listings_and_to_edges(tmp_path: Path) -> None:
    """One reader of a pack's table: a push's or listing's object ids (objects only, in table order) are the
    edges' rows of kind object; an unsealed pack is an error to the first and None to the second."""
    writer = PackWriter(tmp_path)
    blobs = [(KIND_ACTION if i % 3 == 1 else KIND_OBJECT, bytes([i]) * 32, [b"payload %d" % i]) for i in range(10)]
    writer.append_many(blobs)
    assert table_of(writer.path) is None
    with pytest.raises(NotAPackError, match="not a sealed clawstore pack"):
        sealed_object_ids(writer.path)
    writer.seal()
    writer.close()
    objects = [blob_id for kind, blob_id, _ in blobs if kind == KIND_OBJECT]
    assert sealed_object_ids(writer.path) == objects == [b.id for b in scan_pack(writer.path).blobs if b.kind == 1]
    rows = table_of(writer.path)
    assert rows is not None and rows.ids == b"".join(blob_id for _, blob_id, _ in blobs)
    assert list(rows.offsets) == [b.offset for b in scan_pack(writer.path).blobs]
    assert len(sealed_table(writer.path)) == 10 * 49


def test_segments_a_killed_gc_left_behind_do_not_come_back(tmp_path: Path) -> None:
    """gc writes its index, then removes the segments it replaces; killed in between, those stay on
    disk, replaced (readers skip them). The next gc must remove them too, or they come back into view
    naming objects in packs it deletes."""
    from clawstore.store.core.runtime import drop_runtime

    root = tmp_path / "store"
    store = Store(root)
    with store.batch():
        kept = [store.put_json({"kept": i}) for i in range(5)]
        for i in range(5):
            store.put_json({"garbage": i})
    store.set_ref("pins/keep", store.put_json({"nodes": kept}))
    store.runtime.close_writer()
    age_packs(store, 7200)
    saved = {path: path.read_bytes() for path in [*(root / "index").iterdir(), *(root / "packs").iterdir()]}
    collect(store, grace_s=0)  # a new segment replaces those, then they and the old pack go
    for path, data in saved.items():  # ... which a SIGKILL right after the new segment would have left
        if not path.exists():
            path.write_bytes(data)
    assert fsck(store).clean
    store.delete_ref("pins/keep")
    age_packs(store, 7200)
    collect(store, grace_s=0)
    drop_runtime(root)
    fresh = Store(root)
    assert list(fresh.iter_objects()) == []
    assert fsck(fresh).clean


def test_gc_merges_many_small_packs_into_one(tmp_path: Path) -> None:
    """A store that pulled a `build --remote` campaign holds one small pack per interim push (hundreds
    over a day). Each is a file and at least a block of disk; gc copies the live blobs of small packs
    into one, so the count stays bounded whatever the remote held."""
    store = Store(tmp_path / "store")
    records, keys = [], []
    for i in range(12):  # twelve writers one after the other: twelve small packs
        with store.batch():
            answer = store.put_json({"answer": i})
            key = store.put_json({"input": i})
            records.append(store.put_action(key, {"kind": "run", "key": key, "input": key, "cacheable": True,
                                                  "outputs": {"answer": answer}}))
            keys.append(key)
        store.runtime.close_writer()
    store.set_ref("pins/keep", store.put_json({"records": records}))  # (in the writer's pack: a thirteenth)
    store.runtime.close_writer()
    assert len(pack_files(store)) == 13
    ids = list(store.iter_objects())
    age_packs(store, 7200)
    shown = claw("gc", "--store", tmp_path / "store", "--grace", "0", "--dry-run")
    assert shown.returncode == 0 and b"packs: 13 to rewrite into one, 0 to delete" in shown.stdout, shown
    report = collect(store, grace_s=0)
    assert report.packs_rewritten == 13 and report.objects == []
    assert len(pack_files(store)) == 1
    fresh = Store(tmp_path / "store")
    assert all(fresh.get_json(oid) is not None for oid in ids)
    assert all(fresh.get_json(fresh.get_action_record_id(key))["key"] == key for key in keys)  # type: ignore[arg-type]
    assert fsck(fresh).clean
    age_packs(store, 7200)
    assert collect(store, grace_s=0).packs_rewritten == 0  # one small pack alone stays as it is


def seal_peak_alone(root: str, blobs: str) -> list[int]:
    """(tracemalloc's peak while a pack of `blobs` blobs, each naming another pack's object, is sealed; the edges files
    its seal made). Called in a new interpreter (measured_in_fresh_process): at 25,000 blobs the bound has 2.7 MB to
    spare, and in a test worker another test's threads allocating meanwhile would be counted (docs/testing.md)."""
    where = Path(root)
    (where / "packs").mkdir()
    (where / "tmp").mkdir()
    writer = PackWriter(where / "packs", edges_root=where)
    rng = random.Random(7)
    assert writer.edge_log is not None
    for _ in range(int(blobs)):
        digest = rng.randbytes(32)
        writer.append(KIND_OBJECT, digest, [b"x"])
        writer.edge_log.add(digest, writer.size - 1, [rng.randbytes(32)])
    tracemalloc.start()
    try:
        writer.seal(durable=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        writer.close()
    return [peak, len(list((where / "edges").iterdir())) if (where / "edges").is_dir() else 0]


def test_sealing_a_pack_does_not_copy_its_table_while_its_edges_file_is_made(tmp_path: Path) -> None:
    # The seal held a bytes copy of the pack's table (49 bytes a blob) beside the edges file's dicts: a build's
    # highest memory is at a pack's seal (tracemalloc of a 2,000 x 5 build). 25,000 blobs, each naming another pack's
    # object: 562 bytes a blob at the seal's peak with the copy (c328dcf0^; 494 at 50,000), 361 now (361 at 50,000).
    peak, edges_files = measured_in_fresh_process(seal_peak_alone, tmp_path, 25_000)
    assert edges_files  # (the edges file was made)
    assert peak < 25_000 * 470, f"{peak / 25_000:.0f} bytes a blob"


@pytest.mark.parametrize("lie", ["an unknown kind", "a blob past the table", "a length past the table",
                                 "the first row's kind", "the trailer's kind", "none"])
def test_a_table_naming_a_blob_of_no_known_kind_or_outside_the_pack_is_refused(tmp_path: Path, lie: str) -> None:
    """A sealed pack whose table (its checksum made to match) names a blob of a kind no writer makes, or one reaching
    past where the table starts, is not a pack: every row is checked, the last one included."""
    writer = PackWriter(tmp_path)
    writer.append_many([(KIND_ACTION if i % 3 == 1 else KIND_OBJECT, bytes([i]) * 32, [b"payload %d" % i])
                        for i in range(10)])
    writer.seal()
    writer.close()
    data = bytearray(writer.path.read_bytes())
    table = sealed_table(writer.path)
    start = len(data) - 48 - len(table)  # (footer: count, the table's BLAKE3, END_MAGIC)
    last = start + 49 * 9
    if lie == "an unknown kind":
        data[last] = 3
    elif lie == "the trailer's kind":
        data[last] = 0xFF
    elif lie == "a blob past the table":
        data[last + 33:last + 41] = (start - 4).to_bytes(8, "little")  # (its payload of 9 bytes runs into the table)
    elif lie == "a length past the table":  # (its offset inside the pack, its length not)
        data[last + 41:last + 49] = (2 ** 63).to_bytes(8, "little")
    elif lie == "the first row's kind":
        data[start] = 0
    data[-40:-8] = blake3.blake3(bytes(data[start:start + len(table)])).digest()
    writer.path.write_bytes(bytes(data))
    if lie == "none":
        assert len(scan_pack(writer.path).blobs) == 10
        return
    with pytest.raises(NotAPackError, match="trailer names a blob outside the pack"):
        scan_pack(writer.path)


def test_entries_appended_a_column_at_a_time_are_the_blobs_append_many_writes(tmp_path: Path) -> None:
    """`append_actions` (a commit's entries, made by columns) writes the same bytes, table and payload offsets as one
    `append_many` of their blobs, after other blobs and with removed entries (no record) among them."""
    entries = [(bytes([i % 251]) * 32, None if i % 7 == 3 else bytes([255 - i % 200]) * 32, 1_700_000_000 + i * 999)
               for i in range(300)]
    made = []
    for name, columns in (("many", False), ("columns", True)):
        (tmp_path / name).mkdir()
        writer = PackWriter(tmp_path / name)
        writer.append(KIND_OBJECT, bytes(range(32)), [b"a frame"])
        if columns:
            offsets = writer.append_actions(entries)
        else:
            offsets = [blob.offset for blob in writer.append_many(
                [(KIND_ACTION, key, [encode_action(record, time_ns)]) for key, record, time_ns in entries])]
        assert writer.append_actions([]) == []
        writer.seal()
        writer.close()
        made.append((writer.path.read_bytes(), offsets))
    assert made[0] == made[1]
    blobs = scan_pack(writer.path).blobs
    assert [(blob.kind, blob.id, blob.offset) for blob in blobs[1:]] == [
        (KIND_ACTION, key, offset) for (key, _, _), offset in zip(entries, made[1][1], strict=True)]


def test_objects_appended_a_column_at_a_time_are_the_bytes_one_blob_at_a_time_makes(tmp_path: Path) -> None:
    """PackWriter.append_objects (a push making its packs) writes what append_many writes, byte for byte: heads,
    payloads, the table (and so the sealed pack), whatever came before them in the pack."""
    rng = random.Random(5)
    blobs = [(rng.randbytes(32), rng.randbytes(rng.choice([0, 1, 40, 300]))) for _ in range(500)]
    made = []
    for way in ("one at a time", "columns"):
        (tmp_path / way).mkdir()
        writer = PackWriter(tmp_path / way)
        writer.append_many([(KIND_OBJECT, b"\x07" * 32, [b"first"])])  # (offsets follow what is there)
        for start in range(0, len(blobs), 200):
            run = blobs[start:start + 200]
            if way == "columns":
                writer.append_objects([blob_id for blob_id, _ in run], [memoryview(frame) for _, frame in run])
            else:
                writer.append_many([(KIND_OBJECT, blob_id, [frame]) for blob_id, frame in run])
        writer.append_objects([], [])
        writer.seal(durable=False)
        writer.close()
        made.append(writer.path.read_bytes())
    assert made[0] == made[1]
    assert [blob.id for blob in scan_pack(next((tmp_path / "columns").iterdir())).blobs][1:] == [i for i, _ in blobs]
