"""Distributed build benchmark: `claw build --executor ray` on a two-node Ray cluster (127.0.0.2) vs the
in-process executor, same campaign, same concurrency, same stand-in provider latency.

    python bench/distributed_bench.py [--runs 200] [--latency 0.2] [--concurrency 16] [--repeat 3]
                                      [--no-default-cluster | --ray-address ADDR]

Prints the wall times and their ratios (target: ray <= 1.3x local) of a first Ray build on a fresh
cluster whose nodes start their workers at once (`RAY_enable_worker_prestart=1`, as docs/distributed.md
recommends), of the next build there (a fresh store: every run executes again, the actors are reused),
and of a first build on a fresh cluster with Ray's defaults (its first driver waits for each node to
start a worker process); the requests each sent (each must equal --runs), whether the first Ray build
sent the very request bodies the local build sent, and whether it stored the same runs
(tests/support/outcomes.py). A first build happens once per cluster, and its ratio moves by a few
hundredths from one cluster to the next on a small machine: each of `--repeat` rounds starts clusters of
its own, and the ratios given are of the medians (each round's too). `--no-default-cluster` leaves out
the cluster with Ray's defaults. `--ray-address ADDR` runs every Ray build on that running cluster
instead of starting clusters (the test suite's smoke run, on the cluster its Ray tests share: each
cluster costs it 10-15 s of CPU to start); there the "first" build is the first of this run, not of the
cluster.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawstore.testing.standin import StandIn  # noqa: E402
from tests.support.outcomes import request_bodies, run_outcomes  # noqa: E402
from tests.support.raycluster import ray_available, ray_cluster  # noqa: E402
from tests.support.workspace import SECRET, Workspace, many_cases  # noqa: E402

BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--output", "json")


def claw(ws: Workspace, base_url: str, *args: str) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    env.update({"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": base_url})
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", *args], cwd=ws.root, env=env,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"claw {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return time.perf_counter() - began, proc.stdout



@dataclass
class Round:
    local: float  # wall seconds of each build
    first: float
    next: float
    first_default: float | None  # a first build on a cluster with Ray's defaults (None: left out)
    sent: dict[str, int]  # requests of each build, by the name of its time above
    same_requests: bool
    same_runs: bool


@contextmanager
def this_rounds_cluster(address: str | None) -> Iterator[str]:
    """The address of the running cluster given, else of a cluster started for this round."""
    if address:
        yield address
        return
    with ray_cluster({"OPENROUTER_API_KEY": SECRET}) as cluster:
        yield cluster.address


def one_round(args: argparse.Namespace, root: Path) -> Round:
    """Local build, then a first and a next Ray build on a cluster of this round's own (nodes that start
    their workers at once), then a first Ray build on another cluster, started with Ray's defaults."""
    with StandIn() as standin:

        def build(name: str, *extra: str) -> tuple[float, int, list[bytes]]:
            """One build of the campaign in a fresh store: wall seconds, requests sent, their bodies."""
            standin.reset()
            standin.set_default({"content": "forty-two", "latency": args.latency})
            seconds, _ = claw(many_cases(root / name, args.runs // 2, args.concurrency), standin.base_url,
                              *BUILD, *extra)
            return seconds, len(standin.requests), request_bodies(standin)

        with this_rounds_cluster(args.ray_address) as address:
            on_ray = ("--executor", "ray", "--ray-address", address)
            local_s, local_sent, local_bodies = build("local")
            first_s, first_sent, first_bodies = build("ray", *on_ray)
            # The same campaign again in a fresh store: the cluster's actors from the first build are reused.
            next_s, next_sent, _ = build("next", *on_ray)
        sent = {"local": local_sent, "first": first_sent, "next": next_sent}
        default_s = None
        if args.default_cluster:
            with ray_cluster({"OPENROUTER_API_KEY": SECRET}, prestart=False) as cluster:
                default_s, sent["first_default"], _ = build("default", "--executor", "ray",
                                                            "--ray-address", cluster.address)
    return Round(local_s, first_s, next_s, default_s, sent,
                 same_requests=first_bodies == local_bodies,
                 same_runs=run_outcomes(root / "local" / "store") == run_outcomes(root / "ray" / "store"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="rounds, each on clusters of its own")
    parser.add_argument("--default-cluster", action=argparse.BooleanOptionalAction, default=True,
                        help="also a first build on a cluster started with Ray's defaults")
    parser.add_argument("--ray-address", help="run the Ray builds on this running cluster (no default cluster)")
    args = parser.parse_args()
    args.default_cluster = args.default_cluster and not args.ray_address
    reason = ray_available()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="claw-dist-bench-") as tmp:
        rounds = [one_round(args, Path(tmp) / f"round{turn}") for turn in range(max(1, args.repeat))]
    local_s = statistics.median(r.local for r in rounds)
    print(f"{args.runs} runs at {args.latency} s latency, concurrency {args.concurrency}, "
          f"{len(rounds)} round(s) (medians):")
    print(f"  local executor: {local_s:.2f} s (requests per round: {[r.sent['local'] for r in rounds]})")
    # (--ray-address: a cluster of any size, whose first build may have been before this run)
    nodes, first = ("the cluster given", "first build of this run") if args.ray_address else (
        "2 nodes", "first build on a new cluster")
    for which, what in (("first", first), ("next", "next build there"),
                        ("first_default", "first build on a new cluster with Ray's defaults")):
        if which == "first_default" and not args.default_cluster:
            continue
        wall = statistics.median(getattr(r, which) for r in rounds)
        each = ", ".join(f"{getattr(r, which) / r.local:.2f}x" for r in rounds)
        print(f"  ray executor, {nodes}, {what}: {wall:.2f} s (requests per round: {[r.sent[which] for r in rounds]})"
              f" = {wall / local_s:.2f}x local (rounds: {each})")
    print(f"  byte-identical requests sent: {all(r.same_requests for r in rounds)}; identical stored runs "
          f"(request, usage, answer, sandbox): {all(r.same_runs for r in rounds)}")

if __name__ == "__main__":
    main()
