"""Commands run in one process that goes on (here, in-process) close the store they opened: none of its files stays
open after a build, a status, a report or a gc."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest

from clawstore.store.core import runtime
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def store_files_open(store: str) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(store):
            found.append(target)
    return found


def test_in_process_commands_leave_no_store_file_open(ws: Workspace, claw: Claw, env: dict[str, str]) -> None:
    store = env["CLAW_STORE"]
    for args in (("build",), ("build", "--force"), ("status",), ("report",), ("explain",)):
        code, out, err = claw(args[0], "--suite", "main", "--run-profile", "rp", *args[1:])
        assert code == 0, err
        assert store_files_open(store) == [], args
    for args in (("gc", "--dry-run"), ("fsck",), ("refs",)):
        code, out, err = claw(*args)
        assert code == 0, err
        assert store_files_open(store) == [], args


def test_a_ray_task_closes_its_scratch_store_before_removing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """An OpenClaw task on a Ray node (run here in-process, the runner stubbed) works in a scratch store: it returns
    what the run stored, and the store is closed before its directory goes (a worker runs many tasks)."""
    import clawstore.runners.openclaw as openclaw
    from clawstore.builder import ray_client
    from clawstore.store import Store, oid_of

    seen: list[str] = []

    def run(spec: object, store: Store, work: Path, labels: object = ()) -> str:  # (labels: the attempt's, unused)
        seen.append(str(store.root.parent))
        assert store_files_open(seen[0])  # (the pack the objects given went to)
        store.put_bytes(b"the agent's report")
        return "outcome"

    monkeypatch.setattr(openclaw, "run_openclaw", run)
    given = b"the agent's workspace"
    outcome, made = ray_client._openclaw_on_node(cast(Any, None), {oid_of(given): given})
    assert outcome == "outcome" and made == {oid_of(b"the agent's report"): b"the agent's report"}
    assert store_files_open(seen[0]) == [] and not os.path.exists(seen[0])
    assert not [key for key in runtime._RUNTIMES if key[3].startswith(seen[0])]
