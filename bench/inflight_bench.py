"""What the adaptive in-flight limit (clawstore/builder/inflight.py) saves and costs: the same campaign built cold
with `--fixed-concurrency` and without it, taking turns in the same minutes, against a stand-in answering at once
and after a latency; for each build its wall time, CPU per request (claw's process alone) and the stand-in's peak
of requests at once in the build's second half.

Usage: python bench/inflight_bench.py [--cases 2000 --models 5 --latencies 0 0.02 0.2 --slow-cases 200 --rounds 1]
(--slow-cases: the cases at a latency of 0.1 s and more, so that such a build takes tens of seconds, not minutes)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import generate  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402
from bench.growth_bench import CAMPAIGN, measure  # noqa: E402
from clawstore.testing.standin import StandIn, peak_at_once, text  # noqa: E402

MODES = {"fixed": ("--fixed-concurrency",), "adaptive": ()}


def one_build(server: StandIn, root: Path, store: Path, mode: str) -> tuple[float, float, int]:
    """A cold build of the campaign in `root`: wall, CPU per request and the peak in its second half."""
    env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
           "CLAW_STORE": str(store)}
    sent = len(server.requests)
    found = measure(root, ("build", *CAMPAIGN, *MODES[mode]), env)
    requests = server.requests[sent:]
    if not requests:
        raise SystemExit(f"the {mode} build sent no request: nothing to measure")
    first, last = requests[0]["received_at"], requests[-1]["received_at"]
    return found.wall, found.cpu / len(requests), peak_at_once(requests, (first + last) / 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--slow-cases", type=int, default=200, help="the cases at a latency of 0.1 s and more")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16, help="the run profile's max_concurrency")
    parser.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.02, 0.2])
    parser.add_argument("--rounds", type=int, default=1, help="builds of each mode, taking turns")
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-inflight-") as scratch:
        print(f"{'latency':>8} {'mode':>9} {'requests':>9} {'wall':>8} {'CPU a request':>14} {'peak at once':>13}")
        for latency in args.latencies:
            cases = args.slow_cases if latency >= 0.1 else args.cases
            root = Path(scratch) / f"ws-{latency}"
            generate(root, cases, args.models, concurrency=args.concurrency, evaluation=True, judge_repetitions=1)
            server.reset()
            server.set_default({**text("forty-two"), "latency": latency})
            server.script("judge/j", {**judge_reply(7), "latency": latency})
            found: dict[str, list[tuple[float, float, int]]] = {mode: [] for mode in MODES}
            for turn in range(args.rounds):
                for mode in MODES if turn % 2 == 0 else reversed(MODES):
                    built = one_build(server, root, Path(scratch) / f"store-{latency}-{mode}-{turn}", mode)
                    found[mode].append(built)
                    print(f"{latency:>7.3f}s {mode:>9} {2 * cases * args.models:>9} {built[0]:>7.2f}s "
                          f"{built[1] * 1000:>11.2f} ms {built[2]:>13}", flush=True)
            fixed, adaptive = (statistics.median(b[0] for b in found[m]) for m in MODES)
            cpu_fixed, cpu_adaptive = (statistics.median(b[1] for b in found[m]) for m in MODES)
            print(f"{latency:>7.3f}s adaptive/fixed: wall {adaptive / fixed:.2f}, CPU a request "
                  f"{cpu_adaptive / cpu_fixed:.2f} (medians of {args.rounds})", flush=True)


if __name__ == "__main__":
    main()
