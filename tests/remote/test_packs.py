"""Push and pull of a store bigger than one bundle: the bundles are made in parallel and all arrive."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawstore.remote import sync
from clawstore.remote.config import Remote
from clawstore.store import Store


def _filled(root: Path, objects: int) -> Store:
    store = Store(root)
    with store.batch():
        for i in range(objects):
            output = store.put_json({"answer": i})
            key = store.put_json({"input": i})
            store.put_action(key, {"kind": "run", "key": key, "status": "success", "outputs": {"answer": output}})
    return store


def test_a_store_of_many_bundles_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync, "BUNDLE_OBJECTS", 7)  # outputs, inputs, records: 26 bundles sent by 8 threads
    source = _filled(tmp_path / "a", 60)
    remote = Remote("team", str(tmp_path / "remote"))
    pushed = sync.push(source, remote)
    assert pushed.bundles == 180 // 7 + 1
    target = Store(tmp_path / "b")
    assert sync.pull(target, remote).bundles == pushed.bundles
    assert len(set(target.iter_objects())) == 180
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert sync.push(source, remote).objects == 0  # nothing left to send
