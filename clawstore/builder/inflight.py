"""How many requests the build keeps in flight, up to `max_concurrency`: only as many as make it faster. Against a
provider that answers at once, claw's own CPU is the bottleneck and more requests in flight buy no throughput, only
interpreter-lock hand-overs among the worker threads (a quarter more CPU a request at 16 than at 1). Details:
docs/building.md (Details by module)."""

from __future__ import annotations

import time
from collections.abc import Callable

# A window of at least this much wall time is one measurement: hundreds of completions when claw is busy, short enough
# that a descent from 16 takes seconds.
WINDOW_S = 0.5
# Below this share of one core claw is not what bounds the throughput (the provider's latency is): no probing. On a
# 2-core machine at load 7-10, claw against a provider answering at once used 0.6-0.9 of a core, against one taking
# 20 ms 0.4-0.6 at 16 in flight (0.4 was tried: it probed that build down and cost wall time; docs/scale/building.md).
IDLE_CPU = 0.6
# Windows in a row below IDLE_CPU that put the limit back to the ceiling: one alone may be claw not given the CPU by a
# machine busy with other processes (a hiccup that would undo a descent), two are a provider that slowed down.
IDLE_WINDOWS = 2
# A step down is kept unless its window's completions a second fell by more than LOSS against the window before it; a
# step up only if they rose by more than GAIN. Windows of the same limit differ by 10-20 % on a machine loaded by other
# processes: noise failing a step down costs CPU (the limit stays higher, as without this), noise letting through a
# step down that did cost throughput is found out by the step up tried after the next failed step down.
LOSS = 0.10
GAIN = 0.05
# A failed probe holds the limit it went back to this long (times the window's length over WINDOW_S), twice as long
# after each failed probe in a row (up to HOLD_MAX_S): a limit found right is probed again rarely, each probe costing
# a window of lower throughput.
HOLD_S = 1.0
HOLD_MAX_S = 32.0
# Completions a window needs, claw busy, to be judged: a build of few, long requests (a multi-turn run a node, 1-3 s)
# saw 4 in a 0.5 s window, whose noise kept step downs that cost a fifth of its throughput. Its window grows instead.
MIN_DONE = 100
# The first step down from the ceiling (at the start, or after the idle windows put the limit back there) goes straight
# to 1 when a request takes less than this (the limit over the completions a second, Little's law): against a provider
# answering at once a descent of nine steps took 25-30 s of a 40 s build on a loaded machine, its windows' noise failing
# steps down. If 1 costs throughput the probe fails as any other (back to the ceiling, held): one window at 1 and a
# latency, under a second at this bound. Slower requests (a remote model, claw busy only with a very wide limit) take
# the usual steps: a window at 1 would last a latency or more, and the width would take as long to come back.
JUMP_LATENCY_S = 0.1
# A window counts only if at least this share of its completions found the limit binding (every slot taken): a
# window of a drain, a layer's end or lanes held back by rate limits says nothing of what the limit costs.
BINDING_SHARE = 0.75


class InFlight:
    """The adaptive limit on requests in flight. Not thread-safe: the caller (Lanes, under its lock) feeds it each
    completion with `finished`; `restart` when completions stop for a while (between two scheduling rounds)."""

    def __init__(self, ceiling: int, adaptive: bool = True, clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] = time.process_time):
        self.ceiling = max(1, ceiling)
        self.limit = self.ceiling  # starts wide: a short campaign against a slow model must not wait for a ramp
        self.adaptive = adaptive
        self._clock, self._cpu = clock, cpu
        self._hold_s = HOLD_S
        self._held_until = -1.0
        self._idle_windows = 0  # judged windows in a row where claw was not busy
        self._probe_from: int | None = None  # the limit before the probe this window measures
        self._up = False  # the next probe's way: up after a step down that cost throughput (noise may have let an
        # earlier step down through that did: only a step up finds it out)
        self._reference: float | None = None  # completions a second of the last window at this limit
        self._settle_until = -1.0  # after a move of the limit: completions before this were sent before it
        self._reference_wall = 0.0  # the length of the window that measured `_reference`
        self._jump = True  # the next step down from the ceiling may go straight to 1 (JUMP_LATENCY_S)
        self._jumped = False  # the probe under way is such a jump
        self._jump_failed = False  # one cost throughput: no more (each would cost a window at 1 again)
        self.restart()

    def restart(self) -> None:
        """A new window from now: the time since the last completion (planning the next window of runs) is no
        measurement of the limit, nor is the first window after it (threads and connections starting). A probe
        under way is judged by the next window that counts, against the reference it had."""
        self._window_from(self._clock())
        self._warming = True

    def _window_from(self, now: float) -> None:
        self._started, self._cpu_at = now, self._cpu()
        self._done = self._binding = 0
        self._settle_until = -1.0

    def finished(self, binding: bool) -> None:
        """A request's outcome was handled; `binding`: every slot under the limit was taken when it ended."""
        if not self.adaptive:
            return
        now = self._clock()
        if self._settle_until >= 0:  # requests sent before the limit moved are still coming back: not its measure
            if now >= self._settle_until:
                self._window_from(now)
            return
        self._done += 1
        self._binding += binding
        if now - self._started < WINDOW_S:
            return
        wall, before = now - self._started, self.limit
        busy, rate = (self._cpu() - self._cpu_at) / wall, self._done / wall
        if busy >= IDLE_CPU and self._done < MIN_DONE and not (self._probe_from is not None
                                                               and wall >= self._reference_wall):
            return  # (claw idle needs no count: it goes back to the ceiling; a probe's window as long as its
            # reference's had as many completions as it, had the rate held: a jump to 1 is judged in a window)
        counts = self._binding >= BINDING_SHARE * self._done
        self._window_from(now)
        if counts and self._warming:
            self._warming = False
        elif counts:
            self._judge(now, busy, rate, wall)
        if self.limit != before:  # the next window starts once the requests in flight now are answered: a request
            # takes about in-flight / completions a second (Little's law); with a provider slower than a window the
            # step's window saw only requests sent before it and kept a step down that cost throughput
            self._settle_until = now + min(HOLD_MAX_S, before / rate)

    def _judge(self, now: float, busy: float, rate: float, wall: float) -> None:
        idle = busy < IDLE_CPU
        self._idle_windows = self._idle_windows + 1 if idle else 0
        if self._idle_windows >= IDLE_WINDOWS:  # the provider bounds the throughput: all the width it may have, at once
            self.limit, self._probe_from, self._reference, self._hold_s = self.ceiling, None, None, HOLD_S
            self._jump = not self._jump_failed
            return
        if self._probe_from is not None:
            assert self._reference is not None
            up = self.limit > self._probe_from
            kept = rate > self._reference * (1 + GAIN) if up else rate >= self._reference * (1 - LOSS)
            if kept:  # more was faster, or fewer as fast: keep it, and go on that way
                self._probe_from = None
                if not up:  # (a step up kept undoes a step down: the holds go on growing)
                    self._hold_s = HOLD_S
            else:  # more bought nothing, or fewer cost throughput: back, stay a while, then try the other way
                self._jump_failed |= self._jumped
                self.limit, self._probe_from, self._reference = self._probe_from, None, None
                self._held_until = now + self._hold_s * max(1.0, wall / WINDOW_S)  # (in windows: a probe costs one)
                self._hold_s = min(HOLD_MAX_S, self._hold_s * 2)
                self._up = not up
                return
        self._reference, self._reference_wall = rate, wall  # (measured at this limit: the next probe's reference)
        if idle or now < self._held_until:
            return
        if self._up and self.limit < self.ceiling:
            self._probe_from, self.limit = self.limit, min(self.ceiling, self.limit + max(1, self.limit // 3))
        elif self.limit > 1:
            jump = self._jump and self.limit == self.ceiling and self.limit / rate < JUMP_LATENCY_S
            self._jump, self._jumped = False, jump
            step = self.limit - 1 if jump else max(1, self.limit // 4)
            self._probe_from, self.limit, self._up = self.limit, self.limit - step, False
