"""The build's concurrency: up to `max_concurrency` slots shared by every node (as many as make the build faster:
builder/inflight.py), and per (provider, model) lane an adaptive limit and a rate-limit hold, so that a model told to
wait gives its slots to the others. Details: docs/building.md (Details by module)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from clawstore.builder.inflight import InFlight
from clawstore.providers.pacing import paced_by

INCREASE_AFTER = 10  # answered requests in a row that raise a lane's limit by one
POLL_S = 0.25  # how often a paused request looks at the clock (a cancel or a freed slot wakes it at once)


@dataclass(frozen=True)
class Lane:
    """Where rate limits apply: one model at one provider (its base URL)."""

    base_url: str
    model: str
    label: str = field(default="", compare=False)  # what the displays call it (the model id)


@dataclass(frozen=True)
class Wait:
    """A lane held back by its provider, as the progress displays show it."""

    label: str
    until: float  # epoch seconds: when its requests go again
    retry_after_s: float | None  # the provider's Retry-After, if it sent one
    limit: int  # the lane's concurrency now
    slots: int  # the build's max_concurrency


@dataclass
class _LaneState:
    limit: int
    active: int = 0  # its nodes holding a slot
    ready: int = 0  # its paused nodes whose wait is over, waiting for a slot
    resume_at: float = 0.0  # time.monotonic(): no new request of the lane before this
    successes: int = 0  # answered requests since the limit last changed
    halved_at: float = -math.inf


class Lanes:
    """Thread-safe. `try_start`/`running` are the scheduler's side; `_LanePacer` the provider client's."""

    def __init__(self, slots: int, on_wait: Callable[[Wait], None] | None = None, adaptive: bool = True,
                 on_limit: Callable[[int, int], None] | None = None):
        self.slots = max(1, int(slots))  # the ceiling: max_concurrency
        self.inflight = InFlight(self.slots, adaptive)  # how many of them may be taken now
        self.on_limit = on_limit  # told (limit, slots) when the in-flight limit moves
        self.on_wait = on_wait
        self.on_free: Callable[[], None] | None = None  # wakes the scheduler when a paused node frees a slot
        self.in_use = 0
        self._lanes: dict[Lane | None, _LaneState] = {}
        self._cond = threading.Condition()
        self._cancelled = False

    def limit(self, lane: Lane | None) -> int:
        with self._cond:
            return self._state(lane).limit

    def try_start(self, lane: Lane | None) -> bool:
        """Take a slot for a new node of `lane` if one is free for it now."""
        with self._cond:
            state = self._state(lane)
            if not self._free_for(state, time.monotonic()) or self._resumers_waiting():
                return False
            self._take(state)
            return True

    def full(self) -> bool:
        """Every slot taken: no `try_start` can succeed. Read without the lock: a slot given back meanwhile wakes the
        scheduler (`on_free`) or is the scheduler's own (`finish`), so it asks again."""
        return self.in_use >= self.inflight.limit

    @contextmanager
    def running(self, lane: Lane | None) -> Iterator[None]:
        """A node started by `try_start` runs inside: its provider requests are paced by its lane."""
        with paced_by(_LanePacer(self, lane)):
            yield

    def finish(self, lane: Lane | None, completed: bool = True) -> None:
        """A node started by `try_start` has ended (its outcome is handled): its slot is free. Not `completed`: set
        aside (`Later`: another build holds its claim), no measure of the in-flight limit's throughput."""
        with self._cond:
            before = self.inflight.limit
            if completed:
                self.inflight.finished(binding=self.in_use >= before)
            self._give_back(self._state(lane), wake=False)  # the scheduler calls this itself
        if self.inflight.limit != before and self.on_limit is not None:
            self.on_limit(self.inflight.limit, self.slots)

    def restart(self) -> None:
        """The scheduler starts a round of nodes: the time since the last one's end measures nothing."""
        with self._cond:
            self.inflight.restart()

    def cancel(self) -> None:
        """An interrupt: paused requests stop waiting (their calls fail as `cancelled`)."""
        with self._cond:
            self._cancelled = True
            self._cond.notify_all()

    # ---- what the provider client reports, through _LanePacer
    def pause(self, lane: Lane | None, seconds: float, cancelled: threading.Event) -> bool:
        deadline = time.monotonic() + seconds
        with self._cond:
            state = self._state(lane)
            self._give_back(state)
            ready = False
            try:
                while not (self._cancelled or cancelled.is_set()):
                    now = time.monotonic()
                    if now >= deadline and not ready:
                        ready, state.ready = True, state.ready + 1
                    if ready and self._free_for(state, now):
                        self._take(state)
                        return True
                    self._cond.wait(min(POLL_S, max(deadline, state.resume_at) - now) if not ready else POLL_S)
                self._take(state)  # given back again when the node ends, as it is about to
                return False
            finally:
                if ready:
                    state.ready -= 1

    def throttled(self, lane: Lane | None, seconds: float, retry_after_s: float | None, sent_at: float,
                  halve: bool) -> None:
        now = time.monotonic()
        with self._cond:
            state = self._state(lane)
            extended = now + seconds > state.resume_at
            state.resume_at = max(state.resume_at, now + seconds)
            if halve and sent_at > state.halved_at:
                state.limit, state.halved_at, state.successes = max(1, state.limit // 2), now, 0
            wait = Wait(lane.label or lane.model, time.time() + (state.resume_at - now), retry_after_s,
                        state.limit, self.slots) if lane is not None else None
        if extended and wait is not None and self.on_wait is not None:
            self.on_wait(wait)

    def succeeded(self, lane: Lane | None) -> None:
        with self._cond:
            state = self._state(lane)
            state.successes += 1
            if state.successes >= INCREASE_AFTER and state.limit < self.slots:
                state.limit, state.successes = state.limit + 1, 0
                self._cond.notify_all()

    # ---- under self._cond
    def _state(self, lane: Lane | None) -> _LaneState:
        state = self._lanes.get(lane)  # (not setdefault: that made a state to throw away on every call)
        if state is None:
            state = self._lanes[lane] = _LaneState(self.slots)
        return state

    def _free_for(self, state: _LaneState, now: float) -> bool:
        return self.in_use < self.inflight.limit and state.active < state.limit and now >= state.resume_at

    def _resumers_waiting(self) -> bool:
        """A paused node that could take a free slot now goes before any node not started yet."""
        now = time.monotonic()
        return any(s.ready and self._free_for(s, now) for s in self._lanes.values())

    def _take(self, state: _LaneState) -> None:
        state.active += 1
        self.in_use += 1

    def _give_back(self, state: _LaneState, wake: bool = True) -> None:
        state.active -= 1
        self.in_use -= 1
        self._cond.notify_all()
        if wake and self.on_free is not None:
            self.on_free()


class _LanePacer:
    """The Pacer (clawstore/providers/pacing.py) of one node's thread: its lane of the build's Lanes."""

    def __init__(self, lanes: Lanes, lane: Lane | None):
        self.lanes = lanes
        self.lane = lane

    def pause(self, seconds: float, cancelled: threading.Event) -> bool:
        return self.lanes.pause(self.lane, seconds, cancelled)

    def throttled(self, seconds: float, retry_after_s: float | None, sent_at: float, *, halve: bool) -> None:
        self.lanes.throttled(self.lane, seconds, retry_after_s, sent_at, halve)

    def succeeded(self) -> None:
        self.lanes.succeeded(self.lane)
