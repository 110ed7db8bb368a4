"""A ref set while gc is between its plan and its publish (`claw pin` of an old result, a head moved back) keeps
what it names: gc marks the refs once more at the last moment and takes the objects they reach out of the doomed
ones — and the packs holding them out of those it deletes, or the index would name an object whose pack is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from clawstore.store import Store
from clawstore.store.services import gc
from clawstore.store.services.gc import collect
from tests.support.storefiles import age_packs


def test_an_object_a_ref_names_after_the_plan_survives_its_pack_s_deletion(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    with store.batch():
        live = [store.put_bytes(b"live %d " % i * 40) for i in range(50)]
        pin = store.put_json({"nodes": live})
    store.runtime.close_writer()
    store.set_ref("pins/live", pin)
    with store.batch():  # a pack of garbage alone: the plan deletes it whole
        garbage = [store.put_bytes(b"garbage %d " % i * 40) for i in range(50)]
    store.runtime.close_writer()
    age_packs(store, 7200)
    late = garbage[7]
    original = gc._plan

    def plan_then_pin(*args: Any, held: bool = True, **kwargs: Any) -> Any:
        made = original(*args, held=held, **kwargs)
        if held:  # the held plan is made: a user pins one of its doomed objects now
            Store(store.root).set_ref("pins/late", late)
        return made

    monkeypatch.setattr(gc, "_plan", plan_then_pin)
    report = collect(store, grace_s=0)
    assert len(report.objects) == len(garbage) - 1 and report.packs_deleted == 0, report
    fresh = Store(store.root)
    assert fresh.get_ref("pins/late") == late and fresh.get_bytes(late) == b"garbage 7 " * 40
    assert all(fresh.get_bytes(oid) for oid in live)
    assert not any(fresh.has(oid) for oid in garbage if oid != late)
