"""OpenClaw cases of `claw build --executor ray` run as Ray tasks on the cluster's nodes (a real two-node
cluster on loopback; the container engine is the fake CLI of tests/openclaw, reached by the nodes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.host.durable import process_alive
from clawstore.store import Store
from tests.distributed.conftest import TURNS, fake_engine
from tests.openclaw.conftest import FAKE_ID, FAKE_IMAGE, FakeDocker, basic_agent
from tests.support.raycluster import RayCluster, need_ray
from tests.support.watchdogs import kill_watchdogs, watchdogs
from tests.support.workspace import SECRET, Workspace, write_yaml


def _workspace(root: Path, cli: str) -> Workspace:
    ws = Workspace(root)
    agent = ws.configs / "agents" / "basic_agent"
    (agent / "workspace").mkdir(parents=True)
    (agent / "workspace" / "AGENTS.md").write_text("# Agents\nBe concise.\n")
    write_yaml(agent / "agent.yaml", basic_agent("basic_agent"))
    for case, fruit in (("oc_a", "apples"), ("oc_b", "pears")):
        ws.case(case, f"Create report.md about {fruit}.", runner={"type": "openclaw"}, input={
            "messages": [{"role": "user", "content": f"Create report.md about {fruit}."}],
            "context": {"openclaw": {"expected_artifact": "report.md"}}})
    ws.suite("main", ["m1", "m2"])
    write_yaml(ws.configs / "run_profiles" / "rp.yaml", {
        "schema_version": 1, "run_profile_id": "rp", "title": "OpenClaw",
        "openclaw": {"agent_id": "basic_agent", "image": FAKE_IMAGE, "timeout_seconds": 60, "docker_cli": cli},
        "execution_policy": {"max_concurrency": 4, "stop_on_runner_error": False}})
    return ws


def _build(ws: Workspace, driver: FakeDocker, *extra: str) -> dict:
    env = _driver_env(driver)
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile", "rp",
                           "--output", "json", *extra], cwd=ws.root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout)


def _driver_env(driver: FakeDocker) -> dict[str, str]:
    """The environment a driver's `claw build` runs in: its engine (the fake one), the key, the workspace's store."""
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    env.update({"OPENROUTER_API_KEY": SECRET, "FAKE_DOCKER_STATE": str(driver.state),
                "FAKE_DOCKER_SCENARIO": str(driver.scenario_path)})
    return env


def _first_agent(proc: subprocess.Popen, nodes_docker: FakeDocker) -> dict[str, int]:
    """The agent container the build's case started on a node (its name: its process id), waited for while the
    build runs (at most 180 s)."""
    first: dict[str, int] = {}
    deadline = time.monotonic() + 180
    while not first and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for marker in (nodes_docker.state / "containers").glob("*-turn1.json"):
            with contextlib.suppress(FileNotFoundError, ValueError):
                first[marker.stem] = json.loads(marker.read_text())["pid"]
        time.sleep(0.05)
    assert first, "the agent's container started on a node"
    return first


def test_openclaw_cases_run_on_the_cluster_and_are_stored_by_the_driver(
        cluster: RayCluster, nodes_docker: FakeDocker, tmp_path: Path) -> None:
    driver = fake_engine(tmp_path / "driver-engine")  # the driver's own engine: it only resolves the image
    ws = _workspace(tmp_path / "ws", driver.cli)
    before = len(nodes_docker.calls("run"))
    report = _build(ws, driver, "--executor", "ray", "--ray-address", cluster.address)
    assert {row["run"] for row in report["rows"]} == {"exec"} and len(report["rows"]) == 4
    assert {row["status"] for row in report["rows"]} == {"success"}, report["rows"]
    assert len(nodes_docker.calls("run")) - before == 8  # 4 runs x (validate + one turn), all on the nodes
    assert driver.calls("run") == []  # none on the driver's machine
    store = Store(ws.root / "store")
    runs = [r for r in (store.get_action(k) for k, _ in store.iter_actions()) if r.kind == "run"]
    assert len(runs) == 4
    for run in runs:  # the evidence came back whole: the workspace the agent changed, its diff
        files = {e.path for e in store.read_tree(run.outputs["workspace"])}
        assert {"report.md", "AGENTS.md"} <= files
        assert "+All done." in store.get_bytes(run.outputs["workspace_diff"]).decode()
    again = _build(ws, driver, "--executor", "ray", "--ray-address", cluster.address)
    assert {row["run"] for row in again["rows"]} == {"reuse"}
    assert len(nodes_docker.calls("run")) - before == 8
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "fsck"], cwd=ws.root, capture_output=True,
                          text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "CLAW_STORE"})
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_openclaw_run_lost_with_its_worker_is_run_again_and_its_spend_shows(
        cluster: RayCluster, nodes_docker: FakeDocker, tmp_path: Path) -> None:
    """A run whose Ray worker is killed while its agent works may have sent paid requests: the driver runs the
    case again, and its cost reads unknown, at least what the run that finished spent (before session 78 Ray ran
    it again itself and the case's cost was the second run's alone, a known number)."""
    driver = fake_engine(tmp_path / "driver-engine")
    ws = _workspace(tmp_path / "ws", driver.cli)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 1.0, "output": 2.0}) for m in d["models"]])
    env = _driver_env(driver)
    killed = tmp_path / "killed"
    nodes_docker.script(turns=[{**TURNS[0], "until": str(killed)}])  # the agent at work until the kill (not 2 s each)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile",
                                 "rp", "--output", "json", "--executor", "ray", "--ray-address", cluster.address],
                                cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while not (working := cluster.worker_pids(b"ray::_openclaw_on_node")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert working, "an OpenClaw case runs on the cluster"
        for pid in working:
            os.kill(pid, signal.SIGKILL)
        killed.touch()  # (the runs that follow finish at once)
        out, err = proc.communicate(timeout=600)
    finally:
        killed.touch()
        nodes_docker.script(turns=TURNS)
        nodes_docker.end_containers()
    assert proc.returncode == 0, err
    assert SECRET not in out + err
    report = json.loads(out)
    rows, metrics = report["rows"], report["metrics"]
    assert len(rows) == 4 and {row["status"] for row in rows} == {"success"}, rows
    unknown = [row for row in rows if row["cost_source"] == "unknown"]
    assert len(unknown) == len(working) and all(row["cost_usd"] is None for row in unknown), rows
    assert metrics["cost_usd"] is None and metrics["cost_unknown"] == len(working), metrics
    [each] = {row["cost_usd"] for row in rows if row not in unknown}  # (each run: the same tokens, priced)
    assert metrics["cost_known_usd"] == pytest.approx(4 * each), metrics
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "fsck"], cwd=ws.root, capture_output=True,
                          text=True, timeout=300, env=env)  # (its artifact, a trace event added, is a valid one)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_container_of_a_run_lost_with_its_worker_is_stopped_before_the_case_runs_again(
        cluster: RayCluster, nodes_docker: FakeDocker, tmp_path: Path) -> None:
    """A `docker run` lives in a session of its own: the worker killed (and its attempt's watchdog: a reboot, a kill of
    every process; else the watchdog removes it, test_a_killed_drivers_container_on_a_node_is_removed_by_its_watchdog),
    its container goes on with the agent, paid requests and all, until its own timeout. The driver stops it (found by
    the label naming the lost attempt) before it runs the case again, and the case's trace names it; before, it ran
    beside the second run, unseen."""
    driver = fake_engine(tmp_path / "driver-engine")
    ws = _workspace(tmp_path / "ws", driver.cli)
    env = _driver_env(driver)
    nodes_docker.script(turns=[{**TURNS[0], "sleep": 300}])  # an agent at work far past this test
    try:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile",
                                 "rp", "--case", "oc_a", "--model", "m1", "--output", "json", "--executor", "ray",
                                 "--ray-address", cluster.address],
                                cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = _first_agent(proc, nodes_docker)
        working = cluster.worker_pids(b"ray::_openclaw_on_node")
        assert working, "its Ray task runs"
        nodes_docker.script(turns=TURNS)  # the case's second run: quick
        assert kill_watchdogs(driver.cli), "the attempt has a watchdog"  # (else it may remove the container first)
        for pid in working:
            os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=600)
        [(name, pid)] = first.items()
        assert not process_alive(pid, 0), "the lost run's container still runs its agent"  # (before the finally)
    finally:
        nodes_docker.script(turns=TURNS)
        nodes_docker.end_containers()
    assert proc.returncode == 0, err
    calls = nodes_docker.calls()
    removed = [i for i, call in enumerate(calls) if call["cmd"] == "rm" and call["name"] == name]
    again = [i for i, call in enumerate(calls) if call["cmd"] == "agent"][-1]
    assert removed and removed[0] < again, "stopped before the case ran again"
    [row] = json.loads(out)["rows"]
    assert row["status"] == "success" and row["cost_usd"] is None, row
    store = Store(ws.root / "store")
    [run] = [r for r in (store.get_action(k) for k, _ in store.iter_actions()) if r.kind == "run"]
    artifact = json.loads(store.get_bytes(run.outputs["artifact"]))
    [event] = [e for e in artifact["trace"] if e.get("name") == "worker_lost"]
    assert event["metadata"]["containers_stopped"] == [name], event


# `claw build` whose driver's patience with an OpenClaw task (the run's own limit, 60 s, plus a margin) runs out when
# the test says so: its wait for the task (run_openclaw's `ray.get(ref, timeout=patience)`) raises GetTimeoutError as
# that wait does at its end, once the file `told` exists, while the agent works on. (Before session 81 the patience
# was a fixed 30 s, long for a loaded node to start the container in time: 25 s of it were waited out.)
PATIENCE_S = 240.0  # (past _first_agent's 180 s: the test's bound, not the driver's, tells of a node that never starts)
IMPATIENT = """
import os, sys, time
import ray
from clawstore.builder import ray_client

ray_client.OPENCLAW_MARGIN_S = %(patience)r - 60
told, get = sys.argv.pop(1), ray.get

def get_until_told(refs, *, timeout=None, **kwargs):
    if timeout == %(patience)r:  # (the wait for the task; the give-up's own waits are shorter)
        deadline = time.monotonic() + timeout
        while not ray.wait([refs], timeout=0.05)[0]:
            if os.path.exists(told) or time.monotonic() >= deadline:
                raise ray.exceptions.GetTimeoutError("the driver's patience ran out")
    return get(refs, timeout=timeout, **kwargs)

ray.get = get_until_told
sys.argv = ["claw", *sys.argv[1:]]
from clawstore.cli import entry
entry()
"""


def test_a_case_the_driver_gives_up_waiting_for_has_its_container_stopped_and_named(
        cluster: RayCluster, nodes_docker: FakeDocker, tmp_path: Path) -> None:
    """The driver's patience runs out (the cluster never answered in time): the run may go on, its agent paying, so
    its task is cancelled (its worker killed: the attempt's watchdog removes its container; since session 80, before
    which a turn starting as the nodes were asked ran unseen) and its containers are removed on every node before the
    case fails; the give-up error says so, and names those the driver found."""
    driver = fake_engine(tmp_path / "driver-engine")
    ws = _workspace(tmp_path / "ws", driver.cli)
    env = _driver_env(driver)
    nodes_docker.script(turns=[{**TURNS[0], "sleep": 300}])  # an agent at work far past the driver's patience
    before = len(nodes_docker.calls())
    told = tmp_path / "give-up"
    try:
        proc = subprocess.Popen([sys.executable, "-c", IMPATIENT % {"patience": PATIENCE_S}, str(told), "build",
                                 "--suite", "main", "--run-profile", "rp", "--case", "oc_a", "--model", "m1",
                                 "--output", "json", "--executor", "ray", "--ray-address", cluster.address],
                                cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        [(name, pid)] = _first_agent(proc, nodes_docker).items()
        told.touch()  # the driver's patience runs out now, the agent at work
        out, err = proc.communicate(timeout=240)
        assert not process_alive(pid, 0), "the given-up run's container still runs its agent"  # (before the finally)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        nodes_docker.script(turns=TURNS)
        nodes_docker.end_containers()
    assert "Traceback" not in err and SECRET not in out + err, err
    calls = nodes_docker.calls()[before:]
    assert any(call["cmd"] == "rm" and call["name"] == name for call in calls), "removed on its node"
    assert sum(call["cmd"] == "agent" for call in calls) == 1  # (given up: not run again)
    report = json.loads(out)
    [row] = report["rows"]
    assert row["status"] == "failed" and row["cost_usd"] is None, row
    assert report["metrics"]["cost_usd"] is None and report["metrics"]["cost_unknown"] == 1, report["metrics"]
    assert "did not run the OpenClaw case (GetTimeoutError): its task cancelled" in row["error"], row
    assert "not stopped" not in row["error"], row  # (the watchdog, or the driver, removed it: which, a race)


# A driver that holds every CPU of the cluster with tasks of its own, gives up after 0.5 s on an OpenClaw case queued
# behind them, then lets them go and waits for the given-up task to end (its ref kept as the client submits it). (The
# CPUs are held until after the give-up: a longer patience only waits.)
QUEUED = """
import json, sys, time
from pathlib import Path
import ray
from clawstore.builder import ray_client
from clawstore.builder.run_exec import tree_contents
from clawstore.providers.errors import ProviderError
from clawstore.runners.openclaw import OpenClawSpec, agent_workspace_tree
from clawstore.store import Store

args = json.loads(sys.argv[1])
root = Path(args["root"])
ray_client.OPENCLAW_MARGIN_S = 0.5 - 60
client = ray_client.RayClient(args["address"])

@ray.remote(num_cpus=1)
def hold(mark, release):
    Path(mark).touch()
    deadline = time.monotonic() + 120
    while not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)

release, cpus = root / "release", int(ray.cluster_resources()["CPU"])
holders = [hold.remote(str(root / f"held{i}"), str(release)) for i in range(cpus)]
deadline = time.monotonic() + 120
while len(list(root.glob("held*"))) < cpus and time.monotonic() < deadline:
    time.sleep(0.05)
assert len(list(root.glob("held*"))) == cpus, "every CPU held"
with Store(root / "store") as store:
    tree = agent_workspace_tree(store, Path(args["agent_dir"]))
    objects = tree_contents(store, tree)
spec = OpenClawSpec(case_id="queued", agent_id="basic_agent", agent_dir=Path(args["agent_dir"]), agent=args["agent"],
                    agent_tree=tree, requested_model="test/model", image=args["image"], image_digest=args["digest"],
                    docker_cli=args["cli"], timeout_seconds=60, hints={"expected_artifact": "report.md"},
                    messages=[{"role": "user", "content": "Create report.md"}])
refs, submit = [], client._openclaw

class Kept:
    def remote(self, *task):
        refs.append(submit.remote(*task))
        return refs[-1]

client._openclaw = Kept()
try:
    client.run_openclaw(spec, objects)
    error = None
except ProviderError as exc:
    error = exc.message
release.touch()
ray.get(holders)
try:
    ray.get(refs[0], timeout=120)  # (the case run, if it starts now)
    end = "ran"
except ray.exceptions.RayError as exc:
    end = type(exc).__name__
print(json.dumps({"error": error, "end": end, "tasks": len(refs)}))
client.close()
"""


def test_a_queued_case_the_driver_gives_up_on_never_starts(cluster: RayCluster, nodes_docker: FakeDocker,
                                                           tmp_path: Path) -> None:
    """The cluster's CPUs busy, an OpenClaw case waits in Ray's queue past the driver's patience: the driver gives up
    on it (the case fails, its cost unknown), and the CPUs freed, it must not start. Before session 80 it did, its
    agent paid for a result nobody collected, while the driver went on (here: waited) and the next build ran the case
    again. (A program of its own: a Ray driver in pytest's process would keep its descriptors.)"""
    agent = tmp_path / "agent"
    (agent / "workspace").mkdir(parents=True)
    (agent / "workspace" / "AGENTS.md").write_text("# Agents\nBe concise.\n")
    args = {"root": str(tmp_path), "address": cluster.address, "agent_dir": str(agent), "agent": basic_agent(),
            "image": FAKE_IMAGE, "digest": FAKE_ID, "cli": nodes_docker.cli}
    before = len(nodes_docker.calls())
    done = subprocess.run([sys.executable, "-c", QUEUED, json.dumps(args)], capture_output=True, text=True,
                          timeout=300, env=cluster.env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["tasks"] == 1 and "did not run the OpenClaw case (GetTimeoutError): its task cancelled" in \
        found["error"], found
    started = [call for call in nodes_docker.calls()[before:] if call["cmd"] in ("run", "agent")]
    assert started == [], (found, started)  # no container of the given-up case, ever


def test_a_lost_runs_containers_no_node_can_stop_are_named_not_passed_over(cluster: RayCluster,
                                                                           tmp_path: Path) -> None:
    """Each node asked through its own engine; one whose engine cannot be asked is named with its reason (the lost
    run's container may run there still: the case's trace says so), never counted as nothing to stop. (A program of
    its own: a Ray driver in pytest's process would keep its descriptors.)"""
    script = f"""
import json
from clawstore.builder.ray_client import LostContainers, RayClient
from clawstore.runners.openclaw.orphans import ATTEMPT_LABEL
client = RayClient({cluster.address!r})
found = LostContainers()
client.stop_attempt({str(tmp_path / "no-such-cli")!r}, ATTEMPT_LABEL + "=lost", found)
print(json.dumps({{"nodes": client.nodes, "stopped": found.stopped, "unstopped": found.unstopped}}))
client.close()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=cluster.env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["stopped"] == [] and len(found["unstopped"]) == found["nodes"] == 2, found
    assert all("its container engine did not answer" in line and "not found" in line for line in found["unstopped"])


def test_a_killed_drivers_container_on_a_node_is_removed_by_its_watchdog(
        cluster: RayCluster, nodes_docker: FakeDocker, tmp_path: Path) -> None:
    """A driver SIGKILLed while a node's container runs its agent: Ray ends the driver's task and its worker, and the
    attempt's watchdog on the node (runners/openclaw/watchdog.py) removes the container (`rm -f`) within seconds.
    Before session 80 nothing did (a real container outlives its `docker run`, which Ray kills with the worker): it ran
    to its timeout, `claw gc` stopping only the local engine's. (The fake's container is its `docker run`, killed
    with the worker: the `rm` is what tells.)"""
    driver = fake_engine(tmp_path / "driver-engine")
    ws = _workspace(tmp_path / "ws", driver.cli)
    env = _driver_env(driver)
    nodes_docker.script(turns=[{**TURNS[0], "sleep": 300}])  # an agent at work far past this test
    try:
        proc = subprocess.Popen([sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile",
                                 "rp", "--case", "oc_a", "--model", "m1", "--executor", "ray",
                                 "--ray-address", cluster.address],
                                cwd=ws.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        [(name, pid)] = _first_agent(proc, nodes_docker).items()
        working = cluster.worker_pids(b"ray::_openclaw_on_node")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 60  # (a bound, not a wait: ~1 s at load 3)
        while name not in [call["name"] for call in nodes_docker.calls("rm")] and time.monotonic() < deadline:
            time.sleep(0.05)
        removed = [call["name"] for call in nodes_docker.calls("rm")]
        assert name in removed, ("nothing removed the killed driver's container", nodes_docker.calls()[-4:],
                                 {w: process_alive(w, 0) for w in working}, watchdogs(driver.cli))
        assert not process_alive(pid, 0) and nodes_docker.live_containers() == []
    finally:
        nodes_docker.script(turns=TURNS)
        nodes_docker.end_containers()


def test_a_driver_whose_engine_lacks_the_image_refuses_before_it_asks_the_cluster(tmp_path: Path) -> None:
    """The driver resolves each run's image digest: where its engine cannot show the image, `--executor ray` is refused
    as a local build is (builder/engine_ready.py), before the cluster is asked (here none answers: before session 80
    the build went on to it, and a cluster would have run them keyed with no digest)."""
    from clawstore.builder.buildlog import head_ref
    from tests.distributed.test_ray_build import _closed_port

    need_ray()
    driver = fake_engine(tmp_path / "driver-engine")
    ws = _workspace(tmp_path / "ws", driver.cli)
    _build(ws, driver)  # locally, with the image: the store and the campaign's head made
    head = Store(ws.root / "store").get_ref(head_ref("main__rp__none"))
    driver.script(images={}, turns=TURNS)
    env = _driver_env(driver)
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "build", "--suite", "main", "--run-profile", "rp",
                           "--executor", "ray", "--ray-address", f"127.0.0.2:{_closed_port()}"], cwd=ws.root,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    refused = "claw: error: configs/run_profiles/rp.yaml: openclaw.image: the build's OpenClaw runs cannot start: "
    assert done.stderr.splitlines()[-1].startswith(refused), done.stderr
    assert Store(ws.root / "store").get_ref(head_ref("main__rp__none")) == head
