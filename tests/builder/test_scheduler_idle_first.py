"""The build's thread does what an outcome put off (on_idle: progress lines) before it hands the next task over, not
after: a worker woken first waited for the interpreter lock through it, ~2 futex calls a request at max_concurrency 1
(docs/scale/building.md, Session 63). The order is the calling thread's own: no race decides this test."""

from __future__ import annotations

from clawstore.builder.lanes import Lane, Lanes
from clawstore.builder.scheduler import Outcome, run_tasks


class _Recorded(Lanes):
    def __init__(self, slots: int, events: list[str]) -> None:
        super().__init__(slots)
        self.events = events

    def try_start(self, lane: Lane | None) -> bool:
        started = super().try_start(lane)
        if started:
            self.events.append("hand over")
        return started


def test_what_an_outcome_put_off_is_done_before_the_next_task_is_handed_over() -> None:
    events: list[str] = []
    put_off: list[str] = []

    def on_done(outcome: Outcome[str, str]) -> bool:
        events.append(f"done {outcome.value}")
        put_off.append(f"line {outcome.value}")
        return True

    def on_idle() -> None:
        events.extend(put_off)
        put_off.clear()

    left = run_tasks(["a", "b", "c"], lambda task: task, 1, on_done, lanes=_Recorded(1, events), on_idle=on_idle)
    assert left == []
    assert events == ["hand over", "done a", "line a", "hand over", "done b", "line b", "hand over", "done c",
                      "line c"]
