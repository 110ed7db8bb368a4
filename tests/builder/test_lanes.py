"""The build's slots and per-model rate-limit lanes (clawstore/builder/lanes.py): AIMD, paused nodes
giving their slot back, and an interrupt waking them."""

from __future__ import annotations

import threading
import time

from clawstore.builder.lanes import INCREASE_AFTER, Lane, Lanes, Wait
from clawstore.builder.scheduler import Later, run_tasks

A = Lane("http://127.0.0.1:1/v1", "vendor/a", label="a")
B = Lane("http://127.0.0.1:1/v1", "vendor/b", label="b")


def test_a_429_halves_the_lane_once_per_episode_and_successes_raise_it_back_to_max_concurrency() -> None:
    lanes = Lanes(8)
    assert lanes.limit(A) == 8
    sent = time.monotonic()
    for _ in range(4):  # four requests in flight together, all answered 429: one episode
        lanes.throttled(A, 0.0, None, sent, halve=True)
    assert lanes.limit(A) == 4
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)  # sent after the halving: halves again
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)
    assert lanes.limit(A) == 1  # never below one
    lanes.throttled(A, 0.0, 2.0, time.monotonic(), halve=False)  # a Retry-After on a 503: holds, no halving
    assert lanes.limit(A) == 1 and lanes.limit(B) == 8  # another model is not touched
    for expected in range(2, 9):
        for _ in range(INCREASE_AFTER - 1):
            lanes.succeeded(A)
        assert lanes.limit(A) == expected - 1
        lanes.succeeded(A)
        assert lanes.limit(A) == expected
    for _ in range(3 * INCREASE_AFTER):
        lanes.succeeded(A)
    assert lanes.limit(A) == 8  # bounded by max_concurrency


def test_a_lane_takes_no_more_nodes_than_its_limit_and_none_while_held() -> None:
    lanes = Lanes(4)
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)  # limit 2
    assert [lanes.try_start(A) for _ in range(3)] == [True, True, False]
    assert lanes.try_start(B) and lanes.try_start(B)
    assert not lanes.try_start(B)  # the build's four slots are taken
    waits: list[Wait] = []
    lanes.on_wait = waits.append
    lanes.throttled(B, 30.0, 30.0, time.monotonic(), halve=False)
    assert [(w.label, w.retry_after_s, w.limit, w.slots) for w in waits] == [("b", 30.0, 4, 4)]
    assert 29 < waits[0].until - time.time() <= 30


def test_a_paused_node_gives_its_slot_to_another_model_and_gets_one_back_first() -> None:
    lanes = Lanes(1)
    assert lanes.try_start(A)
    events: list[str] = []
    never = threading.Event()

    def paused_a() -> None:
        lanes.throttled(A, 0.3, 0.3, time.monotonic(), halve=True)
        assert lanes.pause(A, 0.3, never)
        events.append("a resumed")

    thread = threading.Thread(target=paused_a)
    thread.start()
    deadline = time.monotonic() + 2
    while not lanes.try_start(B):  # the slot A gave back
        assert time.monotonic() < deadline
        time.sleep(0.01)
    events.append("b started")
    time.sleep(0.4)  # A's wait is over; it waits for the one slot, which B holds
    assert not lanes.try_start(B)
    lanes.finish(B)  # B ends: its slot goes to A, not to a new node of B
    thread.join(2)
    assert events == ["b started", "a resumed"]
    assert lanes.in_use == 1 and not lanes.try_start(B)


def test_an_interrupt_wakes_a_paused_node_at_once() -> None:
    lanes = Lanes(2)
    assert lanes.try_start(A)
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(lanes.pause(A, 60.0, threading.Event())))
    thread.start()
    time.sleep(0.1)
    began = time.monotonic()
    lanes.cancel()
    thread.join(2)
    assert outcome == [False] and time.monotonic() - began < 0.5
    assert lanes.in_use == 1  # still the node's slot, given back when it ends


def test_full_is_every_slot_taken_and_the_scheduler_starts_a_task_when_a_paused_one_gives_its_slot_back() -> None:
    from clawstore.builder.scheduler import run_tasks

    lanes = Lanes(2)
    assert not lanes.full()
    assert lanes.try_start(A) and not lanes.full()
    assert lanes.try_start(B) and lanes.full()
    assert not lanes.try_start(A) and not lanes.try_start(B) and not lanes.try_start(None)
    lanes.finish(A)
    assert not lanes.full() and lanes.try_start(A)

    lanes = Lanes(1)  # one slot: while "a" runs the scheduler has nothing to try, until "a" pauses
    events: list[str] = []
    never = threading.Event()

    def work(task: str) -> str:
        events.append(f"{task} started")
        if task == "a":
            assert lanes.pause(A, 0.2, never)  # gives the slot back: "b" starts meanwhile
            events.append("a resumed")
        return task

    done: list[str] = []
    left = run_tasks(["a", "b"], work, 1, lambda outcome: done.append(outcome.value) or True, lanes=lanes,
                     lane_of=lambda task: A if task == "a" else B)
    assert left == [] and sorted(done) == ["a", "b"]
    assert events.index("b started") < events.index("a resumed")
    assert lanes.in_use == 0


def test_the_in_flight_limit_and_a_lanes_limit_must_both_allow_a_start() -> None:
    told: list[tuple[int, int]] = []
    lanes = Lanes(4, on_limit=lambda limit, slots: told.append((limit, slots)))
    lanes.inflight.limit = 2  # (as builder/inflight.py lowers it)
    assert lanes.try_start(A) and lanes.try_start(B)
    assert lanes.full() and not lanes.try_start(A)  # 2 of the 4 slots: the in-flight limit holds
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)  # A's lane: 4 -> 2
    lanes.throttled(A, 0.0, None, time.monotonic(), halve=True)  # -> 1, and A has one running
    lanes.inflight.limit = 4
    assert not lanes.try_start(A) and lanes.try_start(B)  # the lane's limit holds A; B may go
    lanes.finish(A)
    assert lanes.try_start(A)
    assert told == []  # (told only when the controller moves the limit, at an outcome)
    fixed = Lanes(4, adaptive=False)
    assert fixed.inflight.limit == 4 and all(fixed.try_start(A) for _ in range(4)) and fixed.full()


def test_a_node_set_aside_is_no_completion_of_the_in_flight_limit() -> None:
    # `Later`: another build holds the node's claim; its quick return says nothing of the limit's throughput
    finished: list[bool] = []
    lanes = Lanes(4)
    lanes.inflight.finished = lambda binding: finished.append(binding)  # type: ignore[method-assign]
    tries: dict[int, int] = {}

    def work(task: int) -> int | Later:
        tries[task] = tries.get(task, 0) + 1
        return Later(0.01) if task % 2 and tries[task] == 1 else task

    run_tasks(range(6), work, 4, lambda outcome: True, lanes=lanes)
    assert sum(tries.values()) == 9 and len(finished) == 6  # 3 set aside once: 9 returns, 6 completions
