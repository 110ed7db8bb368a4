"""An object a put in a batch found in the store already is noted in the batch: `put_action`'s check of the outputs the
node just put asks the index for none of them (a look-up, often a pread of a big segment, an output)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.errors import MissingObjectError
from clawstore.store import Store
from clawstore.store.core.batch import PRESENT_NOTED_MAX
from clawstore.store.core.index import IndexView


def _looked_up(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    asked: list[bytes] = []
    real = IndexView.find_object

    def counting(self: IndexView, digest: bytes, look_again: bool = True) -> object:
        asked.append(digest)
        return real(self, digest, look_again)

    monkeypatch.setattr(IndexView, "find_object", counting)
    return asked


def test_outputs_put_again_in_a_batch_are_checked_without_the_index(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    shared = [store.put_json({"system prompt": i}) for i in range(3)]  # durable and indexed before the node
    store.close()
    store = Store(tmp_path / "store")  # (a process that found them in the index, not in its own pending writes)
    asked = _looked_up(monkeypatch)
    with store.batch():
        again = [store.put_json({"system prompt": i}) for i in range(3)]
        assert again == shared and len(asked) == 3, "each put looks it up once"
        key = store.put_json({"the node's": "input"})
        store.put_action(key, {"key": key, "input": key, "status": "success", "cacheable": True,
                               "outputs": {"prompt": shared}})
        digests = {bytes.fromhex(oid.split(":")[1]) for oid in shared}
        assert sum(d in digests for d in asked) == 3, "the record's check of its outputs asked the index nothing"
    assert store.get_action_record_id(key) is not None
    store.close()


def test_an_output_never_put_is_still_looked_up_and_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.batch():
        key = store.put_json({"the node's": "input"})
        with pytest.raises(MissingObjectError):
            store.put_action(key, {"key": key, "input": key, "status": "success", "cacheable": True,
                                   "outputs": {"gone": "blake3:" + "0" * 64}})
    store.close()


def test_a_batch_notes_at_most_its_bound(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.batch():  # (one commit for them all)
        ids = [store.put_bytes(b"object %d" % i) for i in range(PRESENT_NOTED_MAX + 10)]
    with store.batch():
        for i in range(len(ids)):
            store.put_bytes(b"object %d" % i)
        current = store.runtime.batch()
        assert current is not None and len(current.present) == PRESENT_NOTED_MAX
    store.close()
