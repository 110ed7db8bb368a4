"""A nested batch that raises takes what it put and entered out of the batch it joined (builder/together.py runs
several nodes in one batch: a failed node must leave no entry, callback or object behind for the others' commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core import objects


def _record(store: Store, name: str) -> tuple[str, str]:
    """A node's writes: its input document (its key), an output, a record naming both and the entry."""
    key = store.put_json({"node": name})
    output = store.put_json({"output": name})
    record = {"kind": "checks", "key": key, "outputs": {"out": output, "input_document": key},
              "status": "success", "cacheable": True}
    return key, store.put_action(key, record)


def _nested_then_raise(store: Store, name: str, called: list[str]) -> tuple[str, str]:
    with pytest.raises(RuntimeError), store.batch():
        key, record = _record(store, name)
        store.when_durable(lambda: called.append(name))
        raise RuntimeError("the node failed after its entry")
    return key, record


@pytest.mark.parametrize("queue", [256, 2], ids=["queued", "written-meanwhile"])
def test_a_nested_batch_that_raises_leaves_the_outer_one_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    queue: int) -> None:
    monkeypatch.setattr(objects, "QUEUE_MAX_OBJECTS", queue)  # 2: the queue is written in the middle of a node
    called: list[str] = []
    with Store(tmp_path / "s") as store, store.batch():
        kept_key, kept_record = _record(store, "before")
        store.when_durable(lambda: called.append("before"))
        failed_key, failed_record = _nested_then_raise(store, "failed", called)
        assert store.get_action_record_id(failed_key) is None  # out of the batch at once: not adopted by the next
        after_key, after_record = _record(store, "after")
    assert called == ["before"]
    with Store(tmp_path / "s") as again:
        assert again.get_action_record_id(kept_key) == kept_record
        assert again.get_action_record_id(after_key) == after_record
        assert again.get_action_record_id(failed_key) is None
        assert not again.has(failed_record) and not again.has(failed_key)
        assert again.get_json(after_record)["key"] == after_key and again.get_json(kept_key) == {"node": "before"}


def test_an_object_the_failed_node_shared_with_one_before_it_stays(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as store, store.batch():
        shared = store.put_json({"output": "failed"})  # what the failed node's output will be, put before it
        with pytest.raises(RuntimeError), store.batch():
            _record(store, "failed")
            raise RuntimeError("failed")
    with Store(tmp_path / "s") as again:
        assert again.get_json(shared) == {"output": "failed"}


def test_the_outer_batch_that_raises_keeps_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "s") as store:
        with pytest.raises(RuntimeError), store.batch():
            key, record = _record(store, "kept")
            with store.batch():
                _record(store, "inner")
            raise RuntimeError("the whole batch failed")
        assert store.get_action_record_id(key) is None and not store.has(record)
