"""Progress without a hand-off per node: plain lines written in batches (each line, in order, once its node is
recorded; all of them by the time the build's thread waits or the build ends), and a node's start counted without
the lock the build's thread holds."""

from __future__ import annotations

import io
import threading

import pytest

from clawstore.builder import progress as progress_module
from clawstore.builder.progress import PlainProgress
from clawstore.builder.scheduler import Outcome, run_here, run_tasks
from clawstore.graph.plan import Node


class Writes(io.StringIO):
    """A stream that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def run_node(case: str, model: str = "m1") -> Node:
    return Node("run", {"model_id": model, "case_id": case, "repetition": 0}, {}, f"k-{case}")


def lines(stream: io.StringIO) -> list[str]:
    """The lines written, without their spend (a run's line ends with what the build has spent so far)."""
    return [line.split(" · spent ")[0] for line in stream.getvalue().splitlines()]


def finish(progress: PlainProgress, nodes: list[Node]) -> None:
    for node in nodes:
        progress.started(node)
        progress.finished(node, "success", True)


@pytest.fixture
def slow_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "PLAIN_FLUSH_S", 3600.0)  # only idle, close and the line bound write


def test_lines_wait_for_the_idle_build_thread_then_come_out_in_one_write_in_order(slow_flush: None) -> None:
    stream = Writes()
    progress = PlainProgress(stream)
    nodes = [run_node(f"c{i}") for i in range(5)]
    progress.phase("runs", nodes, [])
    finish(progress, nodes)
    assert stream.getvalue() == ""  # the build's thread is busy: nothing written yet
    progress.idle()
    assert stream.writes == 1
    assert lines(stream) == [f"[runs {i + 1}/5] run/m1/c{i}/0: success" for i in range(5)]
    progress.idle()  # nothing pending: no write
    assert stream.writes == 1


def test_close_and_interrupt_write_what_is_pending_first(slow_flush: None) -> None:
    stream = Writes()
    progress = PlainProgress(stream)
    nodes = [run_node(f"c{i}") for i in range(3)]
    progress.phase("runs", nodes, [])
    finish(progress, nodes[:2])
    progress.interrupt(1)
    written = lines(stream)
    assert written[:2] == ["[runs 1/3] run/m1/c0/0: success", "[runs 2/3] run/m1/c1/0: success"]
    assert written[2].startswith("interrupt: no new node starts; waiting for 1 running")
    finish(progress, nodes[2:])
    progress.close()
    assert lines(stream)[3] == "[runs 3/3] run/m1/c2/0: success"


def test_a_busy_build_thread_still_writes_every_flush_interval_or_line_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "PLAIN_FLUSH_S", 0.0)
    stream = Writes()
    progress = PlainProgress(stream)
    nodes = [run_node(f"c{i}") for i in range(3)]
    progress.phase("runs", nodes, [])
    finish(progress, nodes)
    assert stream.writes == 3 and len(stream.getvalue().splitlines()) == 3  # no idle: written as they came
    monkeypatch.setattr(progress_module, "PLAIN_FLUSH_S", 3600.0)
    monkeypatch.setattr(progress_module, "PLAIN_FLUSH_LINES", 2)
    more = [run_node(f"d{i}") for i in range(3)]
    progress.phase("runs", more, [])
    finish(progress, more)
    assert stream.writes == 4 and len(stream.getvalue().splitlines()) == 5  # two lines, one still pending


def test_a_start_never_waits_for_the_lock_and_is_counted_as_running() -> None:
    progress = PlainProgress(io.StringIO())
    nodes = [run_node("a"), run_node("b"), run_node("c", model="m2")]
    progress.phase("runs", nodes, [])
    with progress._lock:  # the build's thread recording an outcome
        worker = threading.Thread(target=lambda: [progress.started(n) for n in nodes])
        worker.start()
        worker.join(timeout=5)
        assert not worker.is_alive()  # started without waiting for the lock
    progress.finished(nodes[0], "success", True)
    models = progress.state.models
    assert (models["m1"].running, models["m1"].done, models["m2"].running) == (1, 1, 1)
    progress.finished(nodes[2], "success", True)
    assert (models["m1"].running, models["m2"].running, models["m2"].done) == (1, 0, 1)


def test_the_scheduler_calls_idle_before_it_waits_and_after_the_last_outcome() -> None:
    events: list[str] = []

    def on_done(outcome: Outcome[int, int]) -> bool:
        events.append(f"done {outcome.task}")
        return True

    run_tasks(range(6), lambda task: task, 2, on_done, on_idle=lambda: events.append("idle"))
    assert sorted(e for e in events if e != "idle") == [f"done {i}" for i in range(6)]
    assert events[-1] == "idle" and "idle" in events[:-1]  # waited at least once, and idle after the last
    events.clear()
    run_here(range(3), lambda task: task, on_done, lambda aside: aside, on_idle=lambda: events.append("idle"))
    assert events == ["done 0", "done 1", "done 2", "idle"]


def test_a_line_counts_its_kind_across_phases_a_batch_phase_included(slow_flush: None) -> None:
    """Judgements go by batch first ('judges (batch)'), then one by one ('judges'): each line counts against the
    judgements the build has planned so far, the batch's included (before: `[judges 1/0]`, the one-by-one phase's)."""
    stream = io.StringIO()
    progress = PlainProgress(stream)
    judges = [Node("judge", {"model_id": "m1", "case_id": f"c{i}", "repetition": 0, "judge_run_id": "main",
                             "judge_repetition": 0}, {}, f"j-{i}") for i in range(3)]
    progress.phase("judges (batch)", judges[:2], [])
    finish(progress, judges[:2])
    progress.phase("judges", judges[2:], [])
    finish(progress, judges[2:])
    progress.close()
    assert [line.split("] ")[0] + "]" for line in lines(stream)] == ["[judges 1/2]", "[judges 2/2]", "[judges 3/3]"]
