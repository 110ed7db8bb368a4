"""The in-flight limit's controller (clawstore/builder/inflight.py) on a simulated build: its clock and CPU reading
advanced by a model of how fast requests complete at each limit. Real builds: tests/builder/test_build_inflight.py."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from clawstore.builder.inflight import HOLD_S, WINDOW_S, InFlight

# After each move of the limit the controller waits for the requests sent before it (limit / completions a second:
# 16 / 700, 23 ms): timings here leave that much more
SETTLE = 0.05


class Simulated:
    """A build whose completions a second at limit n are `rate(n)`, using `busy(n)` of a core."""

    def __init__(self, ceiling: int, rate: Callable[[int], float], busy: Callable[[int], float],
                 adaptive: bool = True):
        self.now = self.cpu = 0.0
        self.rate, self.busy = rate, busy
        self.control = InFlight(ceiling, adaptive, clock=lambda: self.now, cpu=lambda: self.cpu)
        self.limits: list[int] = []  # the limit after each completion

    def run(self, seconds: float, binding: bool = True) -> list[int]:
        end, seen = self.now + seconds, len(self.limits)
        while self.now < end:
            n = self.control.limit
            step = 1 / self.rate(n)
            self.now += step
            self.cpu += self.busy(n) * step
            self.control.finished(binding)
            self.limits.append(self.control.limit)
        return self.limits[seen:]


def cpu_bound(n: int) -> float:
    """Against a server that answers at once: claw's CPU is the bottleneck, as fast at 1 as at 16."""
    return 700.0


def latency_bound(n: int) -> float:
    """A server answering in 20 ms, claw kept busy by it at 16: each request fewer in flight is throughput lost."""
    return min(n / 0.020, 800.0)


def test_it_starts_at_the_ceiling() -> None:
    assert InFlight(16).limit == 16
    assert InFlight(0).limit == 1


def test_saturated_without_throughput_loss_it_goes_down_to_one() -> None:
    build = Simulated(16, cpu_bound, lambda n: 1.0)
    limits = build.run(12 * WINDOW_S)  # one window to warm up, one to measure, nine probes: 16 12 9 7 6 5 4 3 2 1
    assert limits[0] == 16 and build.control.limit == 1
    assert limits == sorted(limits, reverse=True)  # only ever down


def moves(limits: list[int]) -> list[int]:
    """The limits in the order they were taken: each once, until it moved."""
    return [n for i, n in enumerate(limits) if i == 0 or n != limits[i - 1]]


def test_claw_bound_its_first_step_down_goes_straight_to_one() -> None:
    build = Simulated(16, cpu_bound, lambda n: 1.0)
    build.run(2 * WINDOW_S + SETTLE)  # one window to warm up, one to measure, then the first probe: 1
    assert build.control.limit == 1  # (nine steps down before: 16 12 9 7 6 5 4 3 2 1)
    assert set(build.run(30)) == {1}  # kept: as fast as 16


def test_a_probe_that_costs_throughput_goes_back_up_and_holds() -> None:
    build = Simulated(16, latency_bound, lambda n: 0.9)
    build.run(2 * WINDOW_S + 0.01)  # a window to warm up, one to measure, then a probe: a request takes 20 ms, 1
    assert build.control.limit == 1
    limits = build.run(WINDOW_S + SETTLE)  # its window lost 15/16 of the throughput: judged as long as the one before
    assert limits[-1] == 16
    held = build.run(HOLD_S - 2 * SETTLE)
    assert set(held) == {16}
    # over a long build it spends nearly all its time at the ceiling: each failed probe holds twice as long
    limits = build.run(60)
    assert limits.count(16) / len(limits) > 0.9
    assert moves(limits)[:3] == [16, 12, 16]  # the next probes take the usual steps


def test_a_provider_slower_than_the_jump_takes_the_usual_steps() -> None:
    # 200 in flight of 1 s each, claw busy: a window at 1 would last a latency, and the width as long to come back
    build = Simulated(200, lambda n: n / 1.0, lambda n: 0.9)
    assert moves(build.run(3 * WINDOW_S))[:2] == [200, 150]


def test_a_step_down_that_noise_let_through_is_undone_by_a_step_up() -> None:
    build = Simulated(16, latency_bound, lambda n: 0.9)
    seen: set[int] = set()

    def rate(n: int) -> float:  # 12 looked as fast as 16 in its window, then 9 showed the loss
        seen.add(n)
        return 800.0 if n >= 12 and 9 not in seen else latency_bound(n)

    build.rate = rate
    limits = build.run(30)
    # 1 cost throughput (back to 16, held), 12 kept, 9 cost throughput: back to 12 and held, then a step up
    assert moves(limits)[:7] == [16, 1, 16, 12, 9, 12, 16]
    limits = build.run(30)
    assert limits.count(16) / len(limits) > 0.9


def test_idle_it_goes_back_to_the_ceiling_within_a_few_windows() -> None:
    cpu_heavy = [True]
    build = Simulated(16, cpu_bound, lambda n: 1.0 if cpu_heavy[0] else 0.1)
    build.run(12 * WINDOW_S)
    assert build.control.limit == 1
    cpu_heavy[0] = False  # the provider slowed down: claw waits for it
    build.run(3 * WINDOW_S)  # two windows (and the one the change fell in), and the full width at once
    assert build.control.limit == 16


def test_after_the_idle_windows_the_next_descent_goes_straight_to_one_again() -> None:
    cpu_heavy = [True]
    build = Simulated(16, cpu_bound, lambda n: 1.0 if cpu_heavy[0] else 0.1)
    build.run(3 * WINDOW_S)
    cpu_heavy[0] = False  # claw not given a core a while, or a provider slowing down: back to the ceiling
    build.run(4 * WINDOW_S)
    cpu_heavy[0] = True
    limits = build.run(3 * WINDOW_S)
    assert moves(limits) == [16, 1], moves(limits)


def test_after_a_jump_that_cost_throughput_the_next_descents_take_steps() -> None:
    idle = [False]
    build = Simulated(16, latency_bound, lambda n: 0.1 if idle[0] else 0.9)
    assert moves(build.run(4 * WINDOW_S))[:3] == [16, 1, 16]  # 1 cost 15/16 of the throughput
    idle[0] = True  # a loaded machine: claw not given a core a while, the limit at the ceiling again
    build.run(4 * WINDOW_S)
    idle[0] = False
    assert 1 not in build.run(10)  # (a jump after each such lull would cost a window at 1 again)


def test_one_window_of_claw_short_of_cpu_does_not_undo_a_descent() -> None:
    starved = [False]
    build = Simulated(16, cpu_bound, lambda n: 0.1 if starved[0] else 1.0)
    build.run(6 * WINDOW_S)
    reached = build.control.limit
    assert reached < 9
    starved[0] = True  # the machine's other processes took the CPU for a moment
    build.run(WINDOW_S)
    starved[0] = False
    build.run(WINDOW_S)
    assert build.control.limit <= reached


def test_a_machine_busy_with_other_processes_keeps_the_ceiling() -> None:
    build = Simulated(16, cpu_bound, lambda n: 0.3)  # claw gets less than IDLE_CPU of a core, whatever its limit
    assert set(build.run(10)) == {16}


def test_noise_in_the_throughput_neither_starves_a_latency_bound_build_nor_stops_a_descent() -> None:
    noisy = random.Random(54)
    build = Simulated(16, lambda n: latency_bound(n) * noisy.uniform(0.98, 1.02), lambda n: 0.9)
    limits = build.run(60)
    assert sum(limits) / len(limits) > 15  # time-weighted by completions: near the full width
    build = Simulated(16, lambda n: cpu_bound(n) * noisy.uniform(0.98, 1.02), lambda n: 1.0)
    build.run(30)
    assert build.control.limit <= 2


def test_windows_where_the_limit_was_not_binding_decide_nothing() -> None:
    build = Simulated(16, latency_bound, lambda n: 0.9)
    assert set(build.run(10, binding=False)) == {16}  # a drain, a layer's end, lanes held back by rate limits
    while build.control.limit == 16:  # the window the drain ended in, one to warm up, one to measure, then a probe
        build.run(0.001)
    assert build.control.limit == 1
    build.run(3 * WINDOW_S, binding=False)  # the probe's windows were a drain: it is judged by the next one that counts
    assert build.control.limit == 1
    build.run(2 * WINDOW_S + SETTLE)  # (the window the drain ended in, then one that counts: 1 cost throughput)
    assert build.control.limit == 16


def test_a_restart_keeps_the_limit_and_a_probe_under_way_but_not_its_first_window() -> None:
    build = Simulated(16, latency_bound, lambda n: 0.9)
    build.run(2 * WINDOW_S + 0.01)
    assert build.control.limit == 1
    build.control.restart()  # (the next window of runs: its first window is not judged)
    assert build.control.limit == 1
    build.run(WINDOW_S - 0.01)
    assert build.control.limit == 1
    build.run(WINDOW_S + SETTLE)  # the probe judged: it cost throughput
    assert build.control.limit == 16


def test_fixed_concurrency_never_moves() -> None:
    build = Simulated(16, cpu_bound, lambda n: 1.0, adaptive=False)
    assert set(build.run(10)) == {16}


def completed_against_a_provider_taking(latency: float, ceiling: int, seconds: float, adaptive: bool = True,
                                        spread: float = 0.0, seed: int = 0) -> int:
    """Requests completed in `seconds` against a provider answering each after `latency` (± `spread`, at random),
    claw busy with 0.9 of a core at every limit: each request's slot is taken again as soon as it is free."""
    now = cpu = 0.0
    draw = random.Random(seed)
    control = InFlight(ceiling, adaptive, clock=lambda: now, cpu=lambda: cpu)
    answers: list[float] = []  # when each request in flight is answered: a heap
    done = 0
    while now < seconds:
        while len(answers) < control.limit:
            heapq.heappush(answers, now + latency + draw.uniform(-spread, spread))
        answered = heapq.heappop(answers)
        cpu, now = cpu + 0.9 * (answered - now), answered
        control.finished(len(answers) + 1 >= control.limit)
        done += 1
    return done


def test_a_provider_slower_than_a_window_keeps_its_throughput() -> None:
    # 200 in flight, 1 s each: a step down shows in the completions a latency later, not in the window after it
    # (judged by that window, 200 went down to 85 and 23 % of the requests were lost)
    fixed = completed_against_a_provider_taking(1.0, 200, 60, adaptive=False)
    assert completed_against_a_provider_taking(1.0, 200, 60) > 0.9 * fixed
    fixed = completed_against_a_provider_taking(2.0, 1024, 60, adaptive=False)
    assert completed_against_a_provider_taking(2.0, 1024, 60) > 0.9 * fixed


def test_a_build_of_few_long_requests_keeps_its_throughput() -> None:
    # 16 in flight of 1-3 s each (a multi-turn run a node): 4 completions in a 0.5 s window, whose noise kept step
    # downs that cost a fifth of the throughput (0.79-0.87 of a fixed build's in 300 s)
    for seed in range(3):
        fixed = completed_against_a_provider_taking(2.0, 16, 300, adaptive=False, spread=1.0, seed=seed)
        assert completed_against_a_provider_taking(2.0, 16, 300, spread=1.0, seed=seed) > 0.92 * fixed
