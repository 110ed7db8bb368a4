"""A pack a writer touches while gc is between its plan and its publish (a dedup hit: the writer's put of content
the store holds refreshes the pack's mtime and trusts it) keeps all it holds: `recheck_ages` looks at the packs'
ages once more, and takes the touched pack's doomed objects back into the kept ones (the index keeps naming them)
and out of the doomed ones (the report does not count them deleted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.core.ids import oid_of
from clawstore.store.core.packfile import iter_pack_ids
from clawstore.store.services import gc
from clawstore.store.services.fsck import fsck
from clawstore.store.services.gc import collect
from tests.gc.helpers import store_with_garbage


def test_a_pack_touched_after_the_plan_keeps_its_objects_indexed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    store = store_with_garbage(root)  # three packs, each 100 live and 100 garbage objects, two hours old
    hit = b"garbage 1 7 " * 50
    before = set(iter_pack_ids(root / "packs"))
    original = gc._plan

    def plan_then_hit(*args: Any, held: bool = True, **kwargs: Any) -> Any:
        made = original(*args, held=held, **kwargs)
        if held:  # the held plan is made: a writer's put of garbage content is a dedup hit on its old pack
            Store(root).put_bytes(hit)
        return made

    monkeypatch.setattr(gc, "_plan", plan_then_hit)
    report = collect(store)
    assert report.objects_deleted == 200 == len(report.objects)  # (the touched pack's 100 garbage ones kept)
    assert len(before & set(iter_pack_ids(root / "packs"))) == 1  # (that pack neither rewritten nor deleted)
    reopened = Store(root, create=False)
    kept = [b"garbage 1 %d " % i * 50 for i in range(100)]
    assert all(reopened.has(oid_of(data)) and reopened.get_bytes(oid_of(data)) == data for data in kept)
    assert fsck(reopened).clean
