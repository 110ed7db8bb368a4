"""gc while other processes use the store: a build running as a real process, and the lease barrier."""

from __future__ import annotations

import json
import select
import threading
import time
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.locks import SWEEP_LOCK
from clawstore.store.reach import head_closure
from clawstore.store.services.gc import GcReport, collect
from clawstore.testing.standin import StandIn, text
from tests.gc.helpers import actions, build_json, store_of
from tests.store.helpers import script
from tests.support.claw import Claw
from tests.support.workspace import Workspace

HEAD = "campaigns/main__rp__none"


def _set_beta(ws: Workspace, prompt: str) -> None:
    ws.edit("cases/beta/test.yaml", lambda d: d["input"]["messages"][1].update(content=prompt))


def test_build_running_during_repeated_gcs_completes_and_keeps_its_results(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    _set_beta(ws, "Name a fruit.")
    assert claw.build()[0] == 0
    # Back to the first prompt: its beta records are cached but no ref reaches them (gc may take them,
    # or the build may reuse them: both are fine, a reuse of something gc deleted is not).
    _set_beta(ws, "Name a colour.")
    ws.case("gamma", "A slow question?")
    standin.script("*", text("slow answer", latency=1.0), match="A slow question?")

    stop = threading.Event()
    reports: list[GcReport] = []
    failures: list[BaseException] = []

    def gc_loop() -> None:
        store = Store(env["CLAW_STORE"])
        while not stop.is_set():
            try:
                reports.append(collect(store, grace_s=0))
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                failures.append(exc)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=gc_loop)
    thread.start()
    try:
        proc = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--output", "json")
        out, err = proc.communicate(timeout=120)
    finally:
        stop.set()
        thread.join(timeout=60)
    # (A loop still collecting would make the last gc below fail on its lock, "gc lock held by another process".)
    assert not thread.is_alive(), "the gc loop was still collecting 60 s after the build"
    assert not failures, failures
    assert proc.returncode == 0, err
    built = json.loads(out)
    assert actions(built)[("m1", "gamma", 0)] == "exec"
    assert any(r.live_leases for r in reports), "gc never ran while the build held its lease"
    assert sum(len(r.objects) for r in reports) > 0  # and it did collect the superseded fruit runs

    store = store_of(env)
    closure = head_closure(store, store.get_ref(HEAD))  # raises if the head reaches a missing object
    records = set(closure.actions.values())  # (the nodes are not held: their entries are)
    assert len(records) == 6 and all(store.has(r) for r in records)
    assert claw("fsck")[0] == 0
    spent = len(standin.requests)
    assert claw("gc", "--grace", "0")[0] == 0
    code, report = build_json(claw)
    assert code == 0 and set(actions(report).values()) == {"reuse"}
    assert len(standin.requests) == spent  # the next build sends nothing
    assert claw("fsck")[0] == 0


def test_a_new_lease_waits_for_a_sweep_in_progress(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    with store.exclusive(SWEEP_LOCK):
        holder = script("proc_holder.py", store.root, "build waiting")
        try:
            deadline = time.monotonic() + 20
            while not [lease for lease in store.list_leases() if lease.alive]:
                assert time.monotonic() < deadline, "the lease never appeared"
                time.sleep(0.02)
            # Visible (a sweep starting now would see it) but not yet returned to its holder.
            ready, _, _ = select.select([holder.stdout], [], [], 0.5)
            assert not ready
        except BaseException:
            holder.kill()
            raise
    try:
        ready, _, _ = select.select([holder.stdout], [], [], 20)
        assert ready and holder.stdout.readline() == b"held\n"
    finally:
        holder.kill()
        holder.wait()
