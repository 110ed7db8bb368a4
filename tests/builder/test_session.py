"""A build session runs nodes on a real store with no campaign around them: each executed under its
claim and recorded in the session's log, and the budget it is handed stops what calls a provider."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder.buildlog import BuildLog
from clawstore.builder.execute import Stop, execute_nodes
from clawstore.builder.scheduler import Later, run_here
from clawstore.builder.session import Budget, BuildOptions, BuildSession
from clawstore.config.models.run_profile import ExecutionPolicy
from clawstore.graph.keys import document_key
from clawstore.graph.plan import Node
from clawstore.graph.records import make_record
from clawstore.store.claims import ClaimBoard
from clawstore.store.store import Store
from clawstore.values.clock import utc_now

COST_USD = 0.01


def _session(tmp_path: Path, limit_usd: float) -> BuildSession:
    store = Store(tmp_path / "store")
    log = BuildLog(store, {"id": "c"})
    return BuildSession(store, log, BuildOptions(), ClaimBoard(store.root, owner=log.build_id),
                        budget=Budget(limit_usd, lambda: log.metrics))


def _nodes(kind: str, count: int) -> list[Node]:
    nodes = []
    for case in range(count):
        address = {"model_id": "m", "case_id": f"case{case}", "repetition": 0}
        document = {"kind": kind, **address}
        nodes.append(Node(kind, address, document, document_key(document)))
    return nodes


def _work(session: BuildSession) -> Any:
    def work(node: Node) -> tuple[str, dict[str, Any]]:
        cost = COST_USD if node.kind == "run" else None
        record = make_record(kind=node.kind, key=node.key, address=node.address, status="success", cacheable=True,
                             outputs={}, metrics={"cost_usd": cost, "cost_source": "reported", "latency_s": 0.0},
                             summary={}, error=None, started_at=utc_now(), finished_at=utc_now(),
                             build_id=session.build_id)
        return session.store.put_action(node.key, record), record
    return work


def test_the_budget_stops_paid_nodes_and_the_rest_are_recorded_as_skipped(tmp_path: Path) -> None:
    session = _session(tmp_path, limit_usd=0.015)
    runs = _nodes("run", 5)
    with session.claims:
        execute_nodes(session, runs, _work(session))
    assert [n.action for n in runs] == ["exec", "exec", "skip", "skip", "skip"]
    assert session.log.counts["executed"] == 2 and session.log.counts["skipped"] == 3
    assert session.log.metrics["cost_usd"] == 2 * COST_USD
    assert session.budget is not None and session.budget.reason is not None
    assert session.budget.reason.startswith("--max-cost 0.015 USD reached (spent 0.020000")
    for node in runs[:2]:  # recorded in the store, under the node's key
        assert session.store.get_action_record_id(node.key) == node.record_id


def test_nodes_that_call_no_provider_run_past_the_budget(tmp_path: Path) -> None:
    session = _session(tmp_path, limit_usd=0.0)
    checks = _nodes("checks", 3)
    with session.claims:
        execute_nodes(session, _nodes("run", 1), _work(session))  # reached before it starts: skipped
        execute_nodes(session, checks, _work(session), paid=False)
    assert [n.action for n in checks] == ["exec", "exec", "exec"]
    assert session.log.counts["skipped"] == 1 and session.log.counts["executed"] == 3


def test_batch_lines_submitted_count_against_the_budget_until_settled() -> None:
    metrics = {"cost_usd": 0.004}
    budget = Budget(0.01, lambda: metrics)
    assert budget.room_for(0.005) and not budget.room_for(None)  # an unknown estimate never fits
    budget.committed["k"] = 0.005
    assert not budget.room_for(0.002) and not budget.reached()
    metrics["cost_usd"] = 0.011  # the line was collected: its record's cost replaces the estimate
    budget.committed.pop("k")
    assert budget.reached()


def test_local_nodes_run_in_the_calling_thread_and_are_recorded_like_the_others(tmp_path: Path) -> None:
    session = _session(tmp_path, limit_usd=1.0)
    checks = _nodes("checks", 4)
    threads: list[threading.Thread] = []
    work = _work(session)

    def here(node: Node) -> tuple[str, dict[str, Any]]:
        threads.append(threading.current_thread())
        return work(node)

    with session.claims, session.store.group_commit():
        execute_nodes(session, checks, here, paid=False, here=True)
    assert threads == [threading.main_thread()] * 4  # no hand-off to a worker
    assert [n.action for n in checks] == ["exec"] * 4 and session.log.counts["executed"] == 4
    for node in checks:
        assert session.store.get_action_record_id(node.key) == node.record_id
        assert session.claims.read(node.key) is None  # released once durable


def test_a_local_node_another_build_holds_is_waited_for_then_adopted(tmp_path: Path) -> None:
    session = _session(tmp_path, limit_usd=1.0)
    checks = _nodes("checks", 3)
    other = ClaimBoard(session.store.root, owner="other-build")
    assert other.take(checks[1].key)
    record_id, _ = _work(session)(checks[1])  # what the other build stores, under its claim

    def finish_other() -> None:
        time.sleep(0.3)
        other.release(checks[1].key)

    executed: list[str] = []
    work = _work(session)

    def here(node: Node) -> tuple[str, dict[str, Any]]:
        executed.append(node.address["case_id"])
        return work(node)

    releaser = threading.Thread(target=finish_other)
    releaser.start()
    checks[1].record_id = None  # planned before the other build stored it
    with session.claims:
        execute_nodes(session, checks, here, paid=False, here=True)
    releaser.join()
    other.close()  # (its claim file's descriptor)
    assert executed == ["case0", "case2"]  # the held one set aside, never executed here
    assert [n.action for n in checks] == ["exec", "reuse", "exec"] and checks[1].record_id == record_id


def test_run_here_stops_when_told_and_says_so_on_ctrl_c() -> None:
    seen: list[int] = []
    left = run_here(range(5), lambda task: task, lambda outcome: seen.append(outcome.value) or outcome.value < 2,
                    then=lambda aside: aside)
    assert seen == [0, 1, 2] and left == [3, 4]
    aside = run_here(range(4), lambda task: Later(0.1) if task % 2 else task, lambda outcome: True,
                     then=lambda tasks: [t * 10 for t in tasks])
    assert aside == [10, 30]  # what `then` (the scheduler) left


def test_a_ctrl_c_during_a_local_task_lets_it_finish_then_stops_and_a_second_one_stops_at_once() -> None:
    told: list[int] = []
    done: list[int] = []

    def interrupted(task: int) -> int:
        if task == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while a store write may be half done
            time.sleep(0.05)  # (delivered here: the task goes on)
        return task

    with pytest.raises(KeyboardInterrupt):
        run_here([0, 1, 2], interrupted, lambda outcome: done.append(outcome.value) or True, then=lambda tasks: tasks,
                 on_interrupt=told.append)
    assert done == [0, 1] and told == [0]  # the running task finished and was recorded; none started after
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back

    def stuck(task: int) -> int:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # the second cancels the task itself
        time.sleep(5)
        raise AssertionError("not cancelled")

    with pytest.raises(KeyboardInterrupt):
        run_here([0], stuck, lambda outcome: True, then=lambda tasks: tasks, on_interrupt=told.append)
    assert told == [0]


def test_a_forced_run_that_raises_stops_the_build_though_its_node_had_a_result(tmp_path: Path) -> None:
    """stop_on_runner_error after a re-execution (`--force`) that ended in an exception, not a record: the node
    still holds its earlier, cacheable, record, and the exception is the runner error all the same."""
    store = Store(tmp_path / "store")
    log = BuildLog(store, {"id": "c"})
    session = BuildSession(store, log, BuildOptions(), ClaimBoard(store.root, owner=log.build_id))  # no --max-cost
    runs = _nodes("run", 3)
    work = _work(session)
    with session.claims:
        execute_nodes(session, runs[:1], work)  # its result, as an earlier build left it
    runs[0].action = None

    def raising(node: Node) -> tuple[str, dict[str, Any]]:
        if node is runs[0]:
            raise RuntimeError("the runner broke")
        return work(node)

    stop = Stop(ExecutionPolicy(stop_on_runner_error=True))
    with session.claims:
        execute_nodes(session, runs, raising, stop=stop)
    assert [n.action for n in runs] == ["fail", "skip", "skip"]
