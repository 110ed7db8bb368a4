"""Every benchmark in bench/ runs to the end at a smoke size, so a refactor cannot leave one crashing.

No timing is asserted here: the figures only mean something at full size on a quiet machine.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.benchrun import REPO, run_bench

# Tiny arguments for each bench script. Two smoke runs live with the tests that share what they need:
# openclaw_bench's with the real-engine tests (tests/openclaw/test_openclaw_bench.py), distributed_bench's
# on the Ray tests' cluster (tests/distributed/test_ray_build.py).
ELSEWHERE = {"openclaw_bench", "distributed_bench"}
SMOKE = {
    "config_bench": ["--cases", "20", "--rounds", "1"],
    "store_bench": ["--big-mib", "8", "--small-count", "50", "--one-mib-count", "2", "--rounds", "1"],
    "archive_bench": ["--mib", "1", "--gc-objects", "50"],
    "compare_bench": ["--cases", "5", "--models", "2", "--samples", "200"],
    "stats_bench": ["--campaigns", "5", "--cases", "10", "--samples", "200", "--report-runs", "40"],
    "build_bench": ["--cases", "5", "--models", "2", "--runs-b", "20", "--rounds", "1"],
    "eval_bench": ["--cases", "5", "--models", "2", "--rounds", "1"],
    "query_bench": ["--results", "200", "--per-build", "100", "--nodes", "20", "--rows", "300",
                    "--small-rows", "30", "--rounds", "1"],
    "answers_bench": ["--runs", "20"],
    "remote_bench": ["--objects", "200", "--size", "512", "--repeat", "2", "--link-mib", "50"],
    "pull_phases_bench": ["--objects", "200", "--size", "512", "--pulls", "2"],
    "push_phases_bench": ["--objects", "200", "--size", "512", "--pushes", "2", "--link-mib", "50", "--timeline"],
    "s3client_bench": ["--files", "2", "--mib", "1"],
    "view_bench": ["--runs", "40", "--models", "4"],
    "verify_bench": ["--runs", "50", "--repeat", "1"],
    "head_bench": ["--cases", "4", "--models", "1"],
    "interim_packs_bench": ["--pushes", "5", "--runs", "2"],
    "kill_bench": ["--kills", "2", "--cases", "60", "--models", "1", "--window", "0.9", "1.3"],
    "batch_bench": ["--cases", "10", "--kills", "1", "--kill-cases", "5"],
    "node_store_bench": ["--nodes", "50", "--rounds", "1"],
    "seal_bench": ["--generate", "300", "--rounds", "1"],
    "house_bench": ["--before", "HEAD"],
    "transfer_bench": ["--small", "3", "--large", "6", "--models", "1"],
    "index_bench": ["--entries", "3000", "--small", "2", "--rounds", "1"],
    "floor_bench": ["--requests", "16", "--threads", "4", "--runs", "1"],
    "growth_bench": ["--small", "4", "--large", "8", "--models", "1", "--commands", "--stale", "--bare-requests", "50"],
    "inflight_bench": ["--cases", "4", "--slow-cases", "2", "--models", "1", "--latencies", "0", "0.1"],
    "gc_fsck_bench": ["--cases", "2", "--models", "2", "--runs", "1", "--drop-model"],
    "fn_cpu_bench": ["--cases", "3", "--models", "1"],
    "thread_calls_bench": ["--cases", "3", "--models", "1", "--top", "5"],
}


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.stem for p in (REPO / "bench").glob("*_bench.py")}
    assert scripts - ELSEWHERE == set(SMOKE)


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_bench_runs_at_smoke_size(name: str, tmp_path: Path) -> None:
    proc = run_bench(name, SMOKE[name], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), "a bench prints its figures"


def test_the_gc_bench_times_gc_with_a_killed_builds_journal(tmp_path: Path) -> None:
    # --killed (issue 54): a real claw build SIGKILLed with nodes journaled, another campaign of the same nodes built
    # to its end without telling it, then gc, fsck and status timed with its journal and without (its own smoke run:
    # the SMOKE one is --drop-model's).
    proc = run_bench("gc_fsck_bench", ["--cases", "2", "--models", "2", "--runs", "1", "--killed"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [journal] = [line for line in proc.stdout.splitlines() if line.startswith("killed build's journal: ")]
    assert 0 < int(journal.split()[3]) < 16, journal  # (nodes journaled: some, not the campaign's all 16)
    for command in ("gc --dry-run", "fsck", "status"):
        assert any(line.startswith(f"claw {command}") and " with the journal: " in line and " without: " in line
                   for line in proc.stdout.splitlines()), (command, proc.stdout)


def _running(pid: int) -> bool:
    """Is `pid` a live process (not gone, not a zombie waiting to be reaped)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_killed_benchmark_leaves_no_throttling_relay_behind() -> None:
    # The relay of `--link-mib` is a process of its own: a benchmark killed with SIGKILL cannot stop it,
    # so it must notice by itself (its stdin closes) instead of relaying forever.
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from bench._throttle import throttled\n"
            "with throttled('http://127.0.0.1:9', 1e6) as url:\n    print(url, flush=True); time.sleep(60)\n")
    bench = subprocess.Popen([sys.executable, "-c", code, str(REPO)], stdout=subprocess.PIPE, text=True)
    try:
        assert bench.stdout is not None and bench.stdout.readline().startswith("http://127.0.0.1:")
        [relay] = map(int, Path(f"/proc/{bench.pid}/task/{bench.pid}/children").read_text().split())
        assert _running(relay)
    finally:
        bench.kill()
        bench.wait()
    deadline = time.monotonic() + 10
    while _running(relay) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(relay)


def test_the_growth_bench_stops_on_a_claw_that_crashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A claw that crashed (here: could not even be imported) exits 1, as a build with a failed run does: the bench
    # took it for an outcome and printed 0.05 s figures for every command (session 50: its install pointing at a
    # removed clone).
    sys.path.insert(0, str(REPO))
    try:
        from bench import growth_bench
    finally:
        sys.path.remove(str(REPO))
    python = tmp_path / "python"  # the launcher runs as it is; claw itself ends on an exception
    python.write_text(f'#!/bin/sh\n[ "$1" = -m ] && exec {sys.executable} -c "raise ImportError(1)"\n'
                      f'exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    monkeypatch.setattr(growth_bench.sys, "executable", str(python))
    with pytest.raises(SystemExit, match="exited 1"):
        growth_bench.measure(tmp_path, ("status",), {})
