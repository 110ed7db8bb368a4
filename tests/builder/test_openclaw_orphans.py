"""OpenClaw containers a SIGKILLed build left running, its watchdog killed too (else it removes them within seconds:
test_openclaw_watchdog.py): labelled with their build, stopped by `claw gc` or the next build once that build is dead,
never while it lives. The fake container CLI's "container" is its own
process (tests/openclaw/fake_docker.py), in a session of its own as a real `docker run` is: it outlives
the build it was started by."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.host.durable import process_alive
from tests.builder.test_build_openclaw import docker, oc  # noqa: F401 - fixtures, taken through `fake`
from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, FakeDocker, payload
from tests.support.claw import Claw
from tests.support.reaped import Reap
from tests.support.watchdogs import kill_watchdogs

SLOW = {"images": {FAKE_IMAGE: {"Id": FAKE_ID}}, "turns": [{"sleep": 120, "payload": payload("late")}]}
FAST = {"images": {FAKE_IMAGE: {"Id": FAKE_ID}},
        "turns": [{"write": {"report.md": "# Report\nAll done.\n"}, "payload": payload("Wrote report.md")}]}


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> FakeDocker:
    """The fake container CLI, and a workspace of openclaw cases whose run profile uses it."""
    request.getfixturevalue("oc")
    return request.getfixturevalue("docker")


def _container_pids(fake: FakeDocker) -> dict[str, int]:
    found = {}
    for path in (fake.state / "containers").glob("*.json"):
        try:
            found[path.stem] = json.loads(path.read_text())["pid"]
        except FileNotFoundError:  # a container that ended (the image check's) between listing and reading
            continue
    return found


def _wait_for_turn(fake: FakeDocker, build: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [name for name in _container_pids(fake) if name.endswith("-turn1")]
        if new:
            return new[0]
        assert build.poll() is None, build.communicate()
        time.sleep(0.02)
    pytest.fail("no agent container started")


def _kill_with_its_watchdog(build: subprocess.Popen[str]) -> None:
    """SIGKILL the build and, first, its watchdog (what a kill of every process or a reboot does): its containers
    are left to the next build or gc, the backstop (test_openclaw_watchdog.py: the watchdog alive)."""
    assert kill_watchdogs(Path(os.environ["CLAW_STORE"])), "the build has a watchdog"
    build.send_signal(signal.SIGKILL)


@pytest.fixture
def orphan(claw: Claw, fake: FakeDocker, reap: Reap) -> Iterator[tuple[str, int]]:
    """(name, pid) of the agent container a build SIGKILLed while it ran, its watchdog killed too, left behind."""
    fake.script(**SLOW)
    build = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--model", "m1", "--case", "oc_a"))
    name = _wait_for_turn(fake, build)
    _kill_with_its_watchdog(build)
    build.communicate()
    pid = _container_pids(fake)[name]
    time.sleep(0.3)
    assert process_alive(pid, 0) and fake.live_containers() == [name]  # it outlived its build
    fake.script(**FAST)
    yield name, pid
    for pid in _container_pids(fake).values():  # (whatever a failed test left)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while process_alive(pid, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_alive(pid, 0)


def test_its_labels_name_the_build_and_the_store(orphan: tuple[str, int], fake: FakeDocker,
                                                 env: dict[str, str]) -> None:
    name, _ = orphan
    run = next(call for call in fake.calls("run") if call["flags"]["name"] == name)
    labels = dict(label.split("=", 1) for label in run["flags"]["labels"])
    [record] = (Path(env["CLAW_STORE"]) / "containers").glob("*.json")
    build_id = json.loads(record.read_text())["build_id"]
    assert record.name.startswith(f"{build_id}.")
    assert labels["clawstore.openclaw.build"] == build_id
    assert labels["clawstore.openclaw.store"] == str(Path(env["CLAW_STORE"]).resolve())


def test_gc_stops_the_container_of_a_killed_build(orphan: tuple[str, int], claw: Claw, fake: FakeDocker,
                                                  env: dict[str, str]) -> None:
    name, pid = orphan
    code, out, err = claw("gc")
    assert code == 0 and f"stopped 1 OpenClaw container(s) that killed builds left running: {name} (build " in out, \
        out + err
    assert _gone(pid) and fake.live_containers() == []
    assert list((Path(env["CLAW_STORE"]) / "containers").iterdir()) == []  # its record went with it
    assert "stopped" not in claw("gc")[1]


def test_the_next_build_stops_it_and_says_so(orphan: tuple[str, int], claw: Claw, fake: FakeDocker) -> None:
    name, pid = orphan
    code, out, err = claw.build("--model", "m1", "--case", "oc_a")
    assert code == 0, out + err
    assert f"claw: note: stopped 1 OpenClaw container(s) that killed builds left running: {name}" in err
    assert _gone(pid) and fake.live_containers() == []


def test_an_engine_that_does_not_answer_keeps_the_record_for_the_next_gc(
        orphan: tuple[str, int], claw: Claw, fake: FakeDocker) -> None:
    name, pid = orphan
    cli = Path(fake.cli)
    cli.rename(cli.with_name("away"))
    try:
        code, out, err = claw("gc")
    finally:
        cli.with_name("away").rename(cli)
    assert code == 0 and "claw: warning: cannot ask the container engine" in err and "not found" in err, out + err
    assert process_alive(pid, 0)
    code, out, _ = claw("gc")
    assert f"stopped 1 OpenClaw container(s) that killed builds left running: {name}" in out and _gone(pid)


def test_the_containers_of_a_live_build_are_left_alone(claw: Claw, fake: FakeDocker) -> None:
    fake.script(images={FAKE_IMAGE: {"Id": FAKE_ID}}, turns=[{"sleep": 3, "payload": payload("ok")}])
    build = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--model", "m1", "--case", "oc_a")
    name = _wait_for_turn(fake, build)
    code, out, err = claw("gc")
    assert code == 0 and "stopped" not in out, out + err
    assert name in fake.live_containers()
    out, err = build.communicate(timeout=60)
    assert build.returncode == 0, out + err
    assert "stopped" not in err and fake.live_containers() == []


def test_ctrl_c_twice_stops_the_builds_own_containers(claw: Claw, fake: FakeDocker, reap: Reap) -> None:
    """The second Ctrl-C cancels the running nodes: before session 60 claw exited and the agent's container ran on
    until OpenClaw's own --timeout (a looping agent kept calling its provider: 288 paid requests in a minute on the
    real engine), stopped only by the next build or gc."""
    fake.script(**SLOW)
    build = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--model", "m1", "--case", "oc_a"))
    name = _wait_for_turn(fake, build)
    pid = _container_pids(fake)[name]
    build.send_signal(signal.SIGINT)
    time.sleep(0.5)
    build.send_signal(signal.SIGINT)
    out, err = build.communicate(timeout=60)
    assert build.returncode != 0 and "interrupted" in err, out + err
    assert _gone(pid) and fake.live_containers() == []
    assert f"stopped 1 OpenClaw container(s) of this build: {name}" in err
    # Its agent ran (and may have paid) until then: not counted, and said so, never left to read as nothing spent.
    assert "1 running node(s) cancelled: what they spent is not counted" in err, err


def test_claw_status_after_a_kill_says_its_containers_may_still_run(orphan: tuple[str, int], claw: Claw) -> None:
    """What the user types after a SIGKILL (its watchdog killed too): before session 60 claw status named the killed
    build and what its log counted spent, not that its agents ran on, calling their provider, until gc or the next
    build."""
    code, out, err = claw("status", "--suite", "main", "--run-profile", "rp")
    assert code == 0, out + err
    assert "And it started OpenClaw containers, which its watchdog has not stopped (yet): they may run on until " \
           "`claw gc` or the next claw build stops them" in err


def test_an_engine_address_with_a_password_is_stored_without_it_and_still_reached(
        claw: Claw, fake: FakeDocker, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, reap: Reap) -> None:
    """A build's container record names the engine its containers run on: before session 73 it kept DOCKER_HOST as
    set, `user:password@` included, in the store (any `claw archive`-ing or copying of the store carried it). The
    record keeps the address masked; gc (in the same environment) still reaches the engine with the password."""
    host = "tcp://ops7user:engine-pass-0w9q@127.0.0.1:2375"
    monkeypatch.setenv("DOCKER_HOST", host)
    fake.script(**SLOW)
    build = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--model", "m1", "--case", "oc_a"))
    name = _wait_for_turn(fake, build)
    pid = _container_pids(fake)[name]
    _kill_with_its_watchdog(build)
    build.communicate()
    try:
        [record] = (Path(env["CLAW_STORE"]) / "containers").glob("*.json")
        text = record.read_text()
        assert "engine-pass-0w9q" not in text and "ops7user" not in text, text
        assert json.loads(text)["engine"]["DOCKER_HOST"] == "tcp://***@127.0.0.1:2375"
        code, out, err = claw("gc")
        assert code == 0 and f"stopped 1 OpenClaw container(s) that killed builds left running: {name}" in out, \
            out + err
        assert [call["docker_host"] for call in fake.calls("rm")] == [host]  # the engine as the build had it
        assert _gone(pid)
    finally:
        for left in _container_pids(fake).values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(left, signal.SIGKILL)
