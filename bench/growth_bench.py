"""How claw grows with the campaign (issue 54): the same campaign at two sizes, each run and judged once
against the stand-in, printing for each the cold build's wall time, CPU per request and peak memory,
the no-op rebuild's time, and the read commands' wall time and peak memory (with --stale, also those of `status`,
`build --dry-run`, `explain` and `plan` with every node stale: another provider URL, as after an edit of the provider
or a model); then the ratios of the
larger to the smaller, and a bare httpx loop's CPU per request to the same stand-in as the baseline.
The bare loop is taken three times (before each size's builds and after the last: this machine moves it by a
third from one minute to the next) and its median is the baseline; all three are printed.

Usage: python bench/growth_bench.py [--small 2000 --large 10000 --models 5] [--commands] [--stale]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import generate, wait_out_racy_window  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402
from clawstore.testing.standin import StandIn  # noqa: E402

CAMPAIGN = ("--suite", "bench", "--run-profile", "bench", "--evaluation-profile", "ev")
READ_COMMANDS: dict[str, tuple[str, ...]] = {
    "build (no-op)": ("build", *CAMPAIGN),
    "query leaderboard": ("query", "leaderboard"),
    "report --output json": ("report", *CAMPAIGN, "--output", "json"),
    "gc --dry-run": ("gc", "--dry-run"),
    "build --dry-run": ("build", *CAMPAIGN, "--dry-run"),
    "explain": ("explain", *CAMPAIGN),
    "status": ("status", *CAMPAIGN),
    "plan": ("plan", *CAMPAIGN),
    "fsck": ("fsck",),
    "view": ("view", *CAMPAIGN, "--out", "view.html"),
}
# The read commands of the same campaign with every node stale (--stale): what users meet after editing a model, a
# judge or a provider URL. Another base URL changes every run's key; nothing is sent (the bench checks that).
STALE_COMMANDS: dict[str, tuple[str, ...]] = {
    "status (stale)": ("status", *CAMPAIGN),
    "build --dry-run (stale)": ("build", *CAMPAIGN, "--dry-run"),
    "explain (stale)": ("explain", *CAMPAIGN),
    "plan (stale)": ("plan", *CAMPAIGN),
}


@dataclass
class Measured:
    wall: float
    cpu: float
    max_rss: int  # bytes, this command's process alone


# Peak RSS is read by wait4 in a small launcher process, never in this one: a child's max RSS starts at
# the RSS of the process it was forked from (Linux carries it over exec), and this one holds the stand-in's
# record of every request (hundreds of MB at 10,000 x 5), which would floor every command's figure.
_LAUNCH = """
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss, file=sys.stderr)
"""


def measure(root: Path, args: tuple[str, ...], env: dict[str, str]) -> Measured:
    """Run `claw ARGS` in `root`; its wall time, CPU (user + system) and peak RSS, read by wait4."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        subprocess.run([sys.executable, "-S", "-c", _LAUNCH, sys.executable, "-m", "clawstore.cli", *args], cwd=root,
                       env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=errors, check=True)
        wall = time.perf_counter() - started
        errors.seek(0)
        lines = errors.read().decode(errors="replace").splitlines()
    code, cpu, rss = lines[-1].split()
    # 1: a run failed a check or the judge (an outcome, not a fault) — or Python ended on an exception (one exits 1 too)
    if int(code) not in (0, 1) or any(line.startswith("Traceback") for line in lines):
        raise SystemExit(f"claw {' '.join(args)} exited {code}: {lines[-6:-1]!r}")
    return Measured(wall, float(cpu), int(rss) * 1024)


def bare_loop_cpu(server: StandIn, requests: int) -> float:
    """CPU seconds per request of the plainest client: one httpx connection, one request after another."""
    body = {"model": "vendor/m0", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}
    before = resource.getrusage(resource.RUSAGE_THREAD)
    with httpx.Client(base_url=server.base_url) as client:
        for _ in range(requests):
            client.post("/chat/completions", json=body).raise_for_status()
    after = resource.getrusage(resource.RUSAGE_THREAD)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / requests


def one_size(server: StandIn, tmp: Path, name: str, cases: int, models: int, commands: bool,
             stale: bool = False) -> dict[str, Measured]:
    root = tmp / f"ws-{name}"  # (by name, not size: --small and --large may be equal, two builds of one size)
    generate(root, cases, models, evaluation=True, judge_repetitions=1)
    env = {"OPENROUTER_API_KEY": "bench-key-0123456789", "OPENROUTER_BASE_URL": server.base_url,
           "CLAW_STORE": str(tmp / f"store-{name}")}
    sent = len(server.requests)
    found = {"cold build": measure(root, ("build", *CAMPAIGN), env)}
    requests = len(server.requests) - sent
    if requests == 0:
        raise SystemExit(f"the cold build of {cases} x {models} sent no request: nothing to measure")
    found["cold build"].cpu /= requests  # per request from here on
    wait_out_racy_window(root)  # past the stamp's mtime-granularity window (builder/stamp.py)
    measure(root, ("build", *CAMPAIGN), env)  # writes the stamp
    names = READ_COMMANDS if commands else {"build (no-op)": READ_COMMANDS["build (no-op)"]}
    for name, args in names.items():
        found[name] = measure(root, args, env)
    if stale:  # (last: the stale commands leave nothing a fresh one would read differently, but keep them apart)
        moved = {**env, "OPENROUTER_BASE_URL": f"{server.url}/moved/v1"}
        for name, args in STALE_COMMANDS.items():
            found[name] = measure(root, args, moved)
    assert len(server.requests) - sent == requests, "a read command or a no-op sent requests"
    print(f"{cases} x {models}: {requests} requests")
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=2000, help="cases of the smaller campaign")
    parser.add_argument("--large", type=int, default=10000, help="cases of the larger campaign")
    parser.add_argument("--models", type=int, default=5)
    parser.add_argument("--commands", action="store_true", help="also time every read command")
    parser.add_argument("--stale", action="store_true",
                        help="also time status, build --dry-run, explain and plan with every node stale")
    parser.add_argument("--bare-requests", type=int, default=2000)
    args = parser.parse_args()
    with StandIn() as server, tempfile.TemporaryDirectory(prefix="claw-growth-") as scratch:
        bares = [bare_loop_cpu(server, args.bare_requests)]
        server.script("judge/j", judge_reply(7))
        small = one_size(server, Path(scratch), "small", args.small, args.models, args.commands,
                         args.stale)
        bares.append(bare_loop_cpu(server, args.bare_requests))
        large = one_size(server, Path(scratch), "large", args.large, args.models, args.commands,
                         args.stale)
        bares.append(bare_loop_cpu(server, args.bare_requests))
    bare = statistics.median(bares)
    print(f"bare httpx loop: {bare * 1000:.2f} ms CPU per request (median of "
          f"{', '.join(f'{b * 1000:.2f}' for b in bares)} ms: before, between and after the builds)")
    print(f"{'':24} {'small wall':>10} {'large wall':>10} {'ratio':>6} {'small RSS':>10} {'large RSS':>10} "
          f"{'ratio':>6}")
    for name in small:
        a, b = small[name], large[name]
        print(f"{name:24} {a.wall:>9.2f}s {b.wall:>9.2f}s {b.wall / a.wall:>6.2f} {a.max_rss / 2**20:>7.0f} MB "
              f"{b.max_rss / 2**20:>7.0f} MB {b.max_rss / a.max_rss:>6.2f}")
    cold_a, cold_b = small["cold build"].cpu, large["cold build"].cpu
    print(f"cold build CPU per request: {cold_a * 1000:.2f} ms small, {cold_b * 1000:.2f} ms large "
          f"(ratio {cold_b / cold_a:.2f}, target <= 1.1); {cold_b / bare:.1f}x the bare loop (target <= 3)")
    print(f"cold build max RSS: large/small {large['cold build'].max_rss / small['cold build'].max_rss:.2f} "
          f"(target <= 1.3)")


if __name__ == "__main__":
    main()
