"""Build benchmarks (issue 4).

(a) A no-op `claw build` of a pre-built 10,000-run campaign, answered from its stamp, next to the same
    no-op planned in full (its stamp removed first) and `claw validate` of the same configs (all as
    subprocesses, best of 3: `--rounds`). Targets: the planned no-op <= 2x validate (issue 4); the no-op <= 0.5 s
    at 2,000 cases x 5 models (issue 15).
(b) 200 runs against the stand-in at 200 ms latency with max_concurrency 16, next to the ideal
    200 x 0.2 / 16 s. Target: wall time <= 1.3x ideal (at 200 runs; `--runs-b` sets the count).

Usage: python bench/build_bench.py [--cases 2500 --models 4] [--runs-b 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import best_of, claw, generate, wait_out_racy_window  # noqa: E402
from clawstore.testing.standin import StandIn, text  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2500)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--runs-b", type=int, default=200, help="runs of part (b)")
    parser.add_argument("--only", choices=["a", "b"], default=None, help="run one part only")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each command of part (a) (the best is printed)")
    args = parser.parse_args()
    if args.runs_b < 1:
        parser.error("--runs-b: at least 1 (part (b) builds that many runs)")
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-bench-") as tmp:
        env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
               "CLAW_STORE": str(Path(tmp) / "store")}
        if args.only != "b":
            part_a(server, env, Path(tmp), args.cases, args.models, args.rounds)
        if args.only != "a":
            part_b(server, env, Path(tmp), args.runs_b)


def part_a(server: StandIn, env: dict[str, str], tmp: Path, cases: int, models: int, rounds: int) -> None:
    root = tmp / "ws"
    generate(root, cases, models)
    runs = cases * models
    first = claw(root, "build", "--suite", "bench", "--run-profile", "bench", "--output", "json", env=env)
    print(f"(a) initial build of {runs} runs: {first:.1f} s ({runs / first:.0f} runs/s, "
          f"{len(server.requests)} requests)")
    sent = len(server.requests)
    wait_out_racy_window(root)  # past the stamp's mtime-granularity window (builder/stamp.py), then stamp it
    claw(root, "build", "--suite", "bench", "--run-profile", "bench", "--output", "json", env=env)

    def noop() -> float:
        return claw(root, "build", "--suite", "bench", "--run-profile", "bench", "--output", "json", env=env)

    def planned() -> float:
        shutil.rmtree(Path(env["CLAW_STORE"]) / "stamps", ignore_errors=True)
        return noop()

    stamped, full = best_of(rounds, noop), best_of(rounds, planned)
    validate = best_of(rounds, lambda: claw(root, "validate", env=env))
    assert len(server.requests) == sent, "a no-op build sent requests"
    print(f"(a) no-op build: {stamped:.2f} s from its stamp, {full:.2f} s planned (stamp/planned "
          f"{stamped / full:.2f}; target <= 0.5 s at 2000x5)   claw validate: {validate:.2f} s   "
          f"planned/validate {full / validate:.2f} (target <= 2.0)")



def part_b(server: StandIn, env: dict[str, str], tmp: Path, runs: int) -> None:
    root_b = tmp / "ws_b"
    generate(root_b, runs, 1, concurrency=16)
    server.set_default(text("slow answer", latency=0.2))
    env_b = {**env, "CLAW_STORE": str(tmp / "store_b")}
    started = time.time()
    wall = claw(root_b, "build", "--suite", "bench", "--run-profile", "bench", "--output", "json", env=env_b)
    ended = time.time()
    waves = math.ceil(runs / 16)
    ideal = runs * 0.2 / 16
    arrivals = sorted(r["received_at"] for r in server.requests[-runs:])
    span = arrivals[-1] - arrivals[0] + 0.2
    print(f"(b) {runs} runs at 200 ms, max_concurrency 16: {wall:.2f} s   ideal {ideal:.2f} s   "
          f"ratio {wall / ideal:.2f} (target <= 1.3; includes process start and config load); "
          f"first request to last answer {span:.2f} s, ratio {span / ideal:.2f}; "
          f"before the first request {arrivals[0] - started:.2f} s, after the last answer "
          f"{ended - arrivals[-1] - 0.2:.2f} s; {waves} waves of 16 make {waves * 0.2:.2f} s the floor")


if __name__ == "__main__":
    main()
