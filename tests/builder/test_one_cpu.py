"""$CLAW_BUILD_ONE_CPU=1 (host/one_cpu.py): a build's threads share one CPU, the processes it starts get the CPUs back,
and a malformed value is refused with one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clawstore.evaluate import evaluate_checks
from clawstore.host.one_cpu import spawning, threads_on_one_cpu
from clawstore.testing.standin import StandIn, held
from tests.config.workspace_builder import claw
from tests.evaluate.helpers import artifact, final
from tests.evaluate.test_hooks import write_case
from tests.support.workspace import SECRET, many_cases

BUILD = ("build", "--suite", "main", "--run-profile", "rp")
pinnable = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                              reason="needs a system that pins threads, and two CPUs")


@pinnable
def test_the_calling_thread_and_those_it_starts_share_one_cpu_until_the_end() -> None:
    given = os.sched_getaffinity(0)
    seen: list[set[int]] = []
    with threads_on_one_cpu(True):
        inside = os.sched_getaffinity(0)
        started = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        started.start()
        started.join()
    assert len(inside) == 1 and inside <= given
    assert seen == [inside]
    assert os.sched_getaffinity(0) == given
    with threads_on_one_cpu(False):
        assert os.sched_getaffinity(0) == given


@pinnable
def test_a_process_a_pinned_thread_starts_gets_the_cpus_back(tmp_path: Path) -> None:
    given = os.sched_getaffinity(0)
    probe = "import os, time; time.sleep(0.3); print(sorted(os.sched_getaffinity(0)))"
    with threads_on_one_cpu(True):
        with spawning():
            proc = subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
        still = os.sched_getaffinity(0)
        out, _ = proc.communicate(timeout=30)
    assert out.strip() == str(sorted(given))
    assert len(still) == 1  # the starting thread back on its one CPU
    # A python hook (bubblewrap, then the hook: the site that widens) sees every CPU too.
    src = write_case(tmp_path, "import os\ndef cpus(artifact):\n"
                               "    return {'passed': True, 'message': str(sorted(os.sched_getaffinity(0)))}\n")
    check = {"check_id": "hook", "python_hook": {"path": "hooks/hook.py", "callable_name": "cpus"}}
    with threads_on_one_cpu(True):
        found = evaluate_checks([check], artifact(trace=[final("42")]), case_source_path=src,
                                security={"allow_local_python_hooks": True})["checks"][0]
    if found["outcome"] == "error" and "bubblewrap" in str(found["message"]):
        pytest.skip(found["message"])
    assert found["message"] == str(sorted(given)), found


def _cpus_of_threads(pid: int) -> dict[str, str]:
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as handle:
            fields = dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
        found[task] = fields["Cpus_allowed_list"]
    return found


@pinnable
def test_a_real_build_runs_every_thread_on_one_cpu(standin: StandIn, tmp_path: Path) -> None:
    ws = many_cases(tmp_path / "ws", cases=2)
    standin.set_default(held("go", content="4"))
    env = {**os.environ, "OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
           "CLAW_BUILD_ONE_CPU": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", *BUILD], cwd=ws.root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(standin.requests) < 4 and time.monotonic() < deadline:  # every run in flight: all threads up
            time.sleep(0.05)
        assert len(standin.requests) == 4
        cpus = _cpus_of_threads(proc.pid)
    finally:
        standin.release("go")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert len(cpus) >= 5  # the build's thread, its workers, the group commit
    (only,) = set(cpus.values())
    assert only.isdigit(), cpus  # one CPU, e.g. "1" (not "0-1")


@pytest.mark.parametrize("value", ["yes", "2", "on"])
def test_a_malformed_value_is_refused_before_any_request(standin: StandIn, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("CLAW_BUILD_ONE_CPU", value)
    ws = many_cases(tmp_path / "ws", cases=2)
    done = claw(*BUILD, cwd=ws.root)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"claw: error: $CLAW_BUILD_ONE_CPU: expected 0 or 1; got {value!r}"]
    assert standin.requests == []
    assert not (ws.root / "store").exists()
