"""A SIGKILLed build's OpenClaw containers are removed within seconds by its watchdog (runners/openclaw/watchdog.py),
with no later build or gc: before session 80 they ran on (an agent looping on its paid model) until OpenClaw's own
timeout or the next sweep (test_openclaw_orphans.py, which kills the watchdog too: the backstop). Real `claw build`
processes, a real SIGKILL, the fake container CLI whose "container" is its own process in a session of its own."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from clawstore.host.durable import process_alive
from clawstore.runners.openclaw.watchdog import watching
from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - fixtures, taken through `fake`
from tests.builder.test_openclaw_orphans import SLOW, _container_pids, _wait_for_turn, fake  # noqa: F401 - `fake`
from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, FakeDocker, payload
from tests.support.claw import Claw
from tests.support.reaped import Reap
from tests.support.watchdogs import wait_for_watchdog, watchdogs

BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--model", "m1", "--case", "oc_a")
PATIENCE_S = 60.0  # (a bound, never a wait: 0.2-0.4 s at load 3.5; the sweep starts Python and asks the engine)


def _until(done: Callable[[], object], within: float = PATIENCE_S) -> float | None:
    """Seconds until `done()` held, None if it did not within `within`."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        if done():
            return time.monotonic() - began
        time.sleep(0.02)
    return None


def test_a_killed_builds_container_is_removed_by_its_watchdog_without_any_later_build_or_gc(
        claw: Claw, fake: FakeDocker, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        reap: Reap) -> None:
    host = "tcp://ops7user:engine-pass-0w9q@127.0.0.1:2375"  # (the engine as the build reached it, never in argv)
    monkeypatch.setenv("DOCKER_HOST", host)
    store = Path(env["CLAW_STORE"])
    fake.script(**SLOW)  # an agent at work for two minutes
    build = reap(claw.popen(*BUILD))
    try:
        name = _wait_for_turn(fake, build)
        pid = _container_pids(fake)[name]
        found = watchdogs(store)
        build.send_signal(signal.SIGKILL)
        build.communicate()
        took = _until(lambda: not process_alive(pid, 0))
        assert took is not None, f"the killed build's container still runs after {PATIENCE_S:.0f} s"
        assert fake.live_containers() == []
        [argv] = found.values()  # (one, its engine's password not on its command line)
        assert "engine-pass-0w9q" not in " ".join(argv), argv
        assert [(call["name"], call["docker_host"]) for call in fake.calls("rm")] == [(name, host)]
        # Its record goes with it (as the next build's sweep removes it): `claw status` says nothing runs on.
        assert _until(lambda: not watchdogs(store)) is not None
        assert list((store / "containers").iterdir()) == []
        code, out, err = claw("status", "--suite", "main", "--run-profile", "rp")
        assert code == 0 and "killed before it finished" in err and "OpenClaw containers" not in err, out + err
    finally:
        fake.end_containers()


def test_a_build_that_ends_tells_its_watchdog_done_and_it_asks_no_engine(
        claw: Claw, fake: FakeDocker, env: dict[str, str], reap: Reap) -> None:  # noqa: F811 - the fixture
    """One watchdog for the build, whose pipe's write end no `docker run` holds (else the kernel never closes it while
    a container runs, and the watchdog waits for its end); told "done", it exits without a `ps` or an `rm`."""
    store = Path(env["CLAW_STORE"])
    fake.script(images={FAKE_IMAGE: {"Id": FAKE_ID}}, turns=[{"sleep": 1, "payload": payload("ok")}])
    build = reap(claw.popen(*BUILD))
    watchdog = wait_for_watchdog(store, build.pid)
    pipe = os.readlink(f"/proc/{watchdog}/fd/0")
    assert pipe.startswith("pipe:"), pipe
    name = _wait_for_turn(fake, build)
    out, err = build.communicate(timeout=120)
    assert build.returncode == 0, out + err
    runs = fake.calls("run")
    assert [call["flags"]["name"] for call in runs][-1] == name and len(runs) >= 2  # (validate, the turn)
    assert all(pipe not in call["fds"] for call in runs), [call["fds"] for call in runs]
    assert _until(lambda: not process_alive(watchdog, 0)) is not None, "the watchdog did not end with its build"
    assert fake.calls("rm") == []
    assert [c for c in fake.calls("ps") if c["filter"].startswith("clawstore.openclaw.build")] == []


@pytest.mark.parametrize("left_by", [KeyboardInterrupt, SystemExit, RuntimeError])
def test_a_run_left_by_an_interrupt_has_its_watchdog_sweep_and_one_left_by_an_error_tells_it_done(
        docker: FakeDocker, left_by: type[BaseException]) -> None:  # noqa: F811 - the fixture
    """An interrupt (a Ray worker told to exit as its driver died, a Ctrl-C) cuts a run's cleanup short: the CLI it
    starts may be killed with the worker, and the worker's container ran on, its watchdog told done (seen in two of four
    runs of tests/distributed/test_ray_openclaw.py, its killed driver's test). So the watchdog sweeps then, as
    after a SIGKILL; a run's error (a timeout, a refusal: its cleanup ran) tells it done."""
    label = f"clawstore.openclaw.attempt=test-{left_by.__name__}"
    with pytest.raises(left_by), watching("label", docker.cli, label):
        raise left_by()
    if left_by is RuntimeError:
        # (the watchdog exits at once on "done"; a sweep would start Python and ask the engine)
        assert _until(lambda: not watchdogs(docker.cli)) is not None
        assert docker.calls("ps") == []
    else:
        assert _until(lambda: [c["filter"] for c in docker.calls("ps")] == [label]) is not None, docker.calls()
