"""Action cache, refs (compare-and-set) and batches."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from clawstore.errors import MissingObjectError, StoreError, UsageError
from clawstore.store import ANY, RefConflict, Store, oid_of
from clawstore.store.core.index import list_segments, segment_path
from clawstore.store.documents import read_record
from tests.support.storefiles import visible_elsewhere


def _record(key: str, outputs: dict) -> dict:
    return {"record_version": 1, "kind": "run", "key": key, "address": {}, "status": "success", "cacheable": True,
            "outputs": outputs, "metrics": {"cost_usd": 0.25}, "summary": {}, "error": None,
            "started_at": "2026-01-01T00:00:00.000000Z", "finished_at": "2026-01-01T00:00:00.000000Z",
            "build_id": "b1"}


def test_action_cache_round_trip(store: Store) -> None:
    key = store.put_json({"node": "run", "model": "m", "case": "c"})
    assert store.get_action(key) is None and store.get_action_record_id(key) is None
    artifact = store.put_json({"answer": 42})
    files = [store.put_bytes(b"a"), store.put_bytes(b"b")]
    record_id = store.put_action(key, _record(key, {"artifact": artifact, "files": files, "none": None}))
    assert store.get_action_record_id(key) == record_id
    assert store.get_action(key) == read_record(_record(key, {"artifact": artifact, "files": files, "none": None}), "")
    assert list(store.iter_actions()) == [(key, record_id)]
    # a retried failure replaces the entry atomically
    newer = store.put_action(key, _record(key, {"artifact": store.put_json({"answer": 43})}))
    assert store.get_action_record_id(key) == newer != record_id


@pytest.mark.parametrize("kind", ["run", "judge"])
def test_a_failure_never_replaces_a_reusable_record(store: Store, kind: str) -> None:
    key = store.put_json({"node": kind, "model": "m"})
    failed = {**_record(key, {}), "kind": kind, "status": "provider_error", "cacheable": False}
    first_failure = store.put_action(key, failed)
    assert store.get_action_record_id(key) == first_failure  # a failure over a failure: the newest
    good = store.put_action(key, {**_record(key, {}), "kind": kind})
    assert store.get_action_record_id(key) == good
    with store.batch():  # also inside a batch, as builds write
        later = store.put_action(key, {**failed, "metrics": {"cost_usd": 0.5}})
    assert store.get_action_record_id(key) == good and store.has(later)  # the failure is stored, not pointed at
    newer = store.put_action(key, {**_record(key, {}), "kind": kind, "metrics": {"cost_usd": 0.75}})
    assert store.get_action_record_id(key) == newer != good  # a result still replaces a result


def test_action_refuses_outputs_that_are_not_stored(store: Store) -> None:
    key = store.put_json({"node": 1})
    with pytest.raises(MissingObjectError, match="not in the store"):
        store.put_action(key, _record(key, {"artifact": oid_of(b"never written")}))
    assert store.get_action(key) is None
    with pytest.raises(ValueError, match="not an object id"):
        store.put_action(key, _record(key, {"artifact": "nonsense"}))
    with pytest.raises(ValueError, match="does not match"):
        store.put_action(key, _record(oid_of(b"other"), {}))


def test_damaged_index_segment_is_a_store_error(store: Store) -> None:
    key = store.put_json({"node": 2})
    store.put_action(key, _record(key, {}))
    for name in list_segments(store.root / "index"):
        path = segment_path(store.root / "index", name)
        raw = bytearray(path.read_bytes())
        raw[-40] ^= 0xFF
        path.write_bytes(bytes(raw))
    with pytest.raises(StoreError, match="damaged"):
        store.runtime.index.reload()  # what a process opening the store now would read


def test_batch_defers_visibility_until_commit(store: Store) -> None:
    seen_from_other_thread: list[bool] = []
    with store.batch():
        oid = store.put_bytes(b"pending object")
        key = store.put_json({"node": 3})
        record_id = store.put_action(key, _record(key, {"out": oid}))
        assert store.has(oid) and store.get_bytes(oid) == b"pending object"  # read your own writes
        assert store.get_action_record_id(key) == record_id
        assert not visible_elsewhere(store, oid)  # not visible before the commit
        thread = threading.Thread(target=lambda: seen_from_other_thread.append(store.has(oid)))
        thread.start()
        thread.join()
    assert seen_from_other_thread == [False]
    assert visible_elsewhere(store, oid)
    assert store.get_action(key) == read_record(_record(key, {"out": oid}), "")
    assert os.listdir(store.tmp_dir) == []


def test_batch_is_discarded_on_error(store: Store) -> None:
    with pytest.raises(RuntimeError), store.batch():
        oid = store.put_bytes(b"never published")
        key = store.put_json({"node": 4})
        store.put_action(key, _record(key, {"out": oid}))
        raise RuntimeError("build step failed")
    assert not store.has(oid)
    assert store.get_action(key) is None
    assert os.listdir(store.tmp_dir) == []


def test_large_batch_is_one_pack_and_one_index_segment(store: Store) -> None:
    with store.batch():
        ids = [store.put_bytes(f"object number {i}".encode()) for i in range(5000)]
        assert not any(visible_elsewhere(store, o) for o in ids[:10])
    assert all(visible_elsewhere(store, o) for o in ids[:10])
    assert set(store.iter_objects()) == set(ids)
    assert len(os.listdir(store.root / "packs")) == 1 and len(os.listdir(store.root / "index")) == 1


def test_nested_batches_join(store: Store) -> None:
    with store.batch():
        with store.batch():
            oid = store.put_bytes(b"inner")
        assert not visible_elsewhere(store, oid)
    assert visible_elsewhere(store, oid)


def test_refs_compare_and_set(store: Store) -> None:
    first, second = store.put_json({"v": 1}), store.put_json({"v": 2})
    assert store.get_ref("campaigns/suite__run__none") is None
    store.set_ref("campaigns/suite__run__none", first, expected=None)
    with pytest.raises(RefConflict) as conflict:
        store.set_ref("campaigns/suite__run__none", second, expected=None)
    assert conflict.value.actual == first
    with pytest.raises(RefConflict):
        store.set_ref("campaigns/suite__run__none", second, expected=second)
    store.set_ref("campaigns/suite__run__none", second, expected=first)
    store.set_ref("pins/keep-me", first)
    store.set_ref("pins/also", second, expected=ANY)
    assert store.list_refs() == {"campaigns/suite__run__none": second, "pins/also": second, "pins/keep-me": first}
    assert store.list_refs("pins/") == {"pins/also": second, "pins/keep-me": first}
    with pytest.raises(RefConflict):
        store.delete_ref("pins/keep-me", expected=second)
    assert store.delete_ref("pins/keep-me", expected=first)
    assert not store.delete_ref("pins/keep-me")
    assert store.get_ref("pins/keep-me") is None


def test_ref_target_must_exist_and_names_are_checked(store: Store) -> None:
    with pytest.raises(MissingObjectError):
        store.set_ref("pins/x", oid_of(b"not stored"))
    target = store.put_bytes(b"t")
    for bad in ("", "/abs", "a//b", "../up", "pins/.hidden", "a b", "pins/"):
        with pytest.raises(UsageError, match="bad ref name"):
            store.set_ref(bad, target)
    with pytest.raises(UsageError) as refused:  # the segment named, the rule said once
        store.set_ref("pins/../x", target)
    assert "has a segment '..' that is not 1..200 of letters" in str(refused.value)
    assert str(refused.value).count("1..200 of letters") == 1


def test_set_ref_inside_batch_publishes_the_target_first(store: Store) -> None:
    with store.batch():
        target = store.put_bytes(b"built in this batch")
        store.set_ref("pins/fresh", target)
        assert visible_elsewhere(store, target)
    assert store.get_ref("pins/fresh") == target


def test_ref_cas_across_threads(store: Store) -> None:
    """Threads racing on one ref with CAS retries lose no increment."""
    store.set_ref("counter", store.put_json({"n": 0}))

    def bump(times: int) -> None:
        for _ in range(times):
            while True:
                current = store.get_ref("counter")
                assert current is not None
                nxt = store.put_json({"n": store.get_json(current)["n"] + 1})
                try:
                    store.set_ref("counter", nxt, expected=current)
                    break
                except RefConflict:
                    continue

    threads = [threading.Thread(target=bump, args=(15,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = store.get_ref("counter")
    assert final is not None and store.get_json(final) == {"n": 60}


def test_store_layout(tmp_path: Path) -> None:
    store = Store(tmp_path / "fresh")
    for name in ("packs", "index", "tmp", "refs", "leases", "locks", "quarantine", "builds", "manifest"):
        assert (store.root / name).is_dir()
    assert not (store.root / "objects").exists() and not (store.root / "ac").exists()
    assert (store.root / "CLAWSTORE").read_text() == '{"format": 2}\n'
