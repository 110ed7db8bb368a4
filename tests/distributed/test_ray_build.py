"""`claw build --executor ray` on a real two-node Ray cluster on loopback, against the stand-in provider."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.store.core.packfile import scan_pack
from clawstore.testing.standin import StandIn, held
from tests.support.benchrun import run_bench
from tests.support.judging import JUDGE, eval_profile
from tests.support.outcomes import request_bodies, run_outcomes
from tests.support.raycluster import RayCluster, need_ray
from tests.support.storefiles import pack_files
from tests.support.workspace import SECRET, Workspace, many_cases, one_case

BUILD = ("build", "--suite", "main", "--run-profile", "rp", "--output", "json")


def wait_for_requests(standin: StandIn, count: int) -> None:
    deadline = time.monotonic() + 120
    while len(standin.requests) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def claw(ws: Workspace, standin: StandIn, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    env.update({"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url})
    return subprocess.Popen([sys.executable, "-m", "clawstore.cli", *args], cwd=ws.root, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert SECRET not in out + err
    return json.loads(out)


def answers(ws: Workspace, standin: StandIn) -> list[tuple]:
    proc = claw(ws, standin, "query", "select case_id, model_id, status, output_tokens, input_tokens from runs "
                                     "order by 1, 2", "--format", "json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return [tuple(row.values()) for row in json.loads(out)]


def test_distributed_build_sends_each_request_once_and_matches_local(cluster: RayCluster, standin: StandIn,
                                                                     tmp_path: Path) -> None:
    standin.set_default({"content": "forty-two", "latency": 0.05})
    local = many_cases(tmp_path / "local", cases=20, concurrency=8)
    finish(claw(local, standin, *BUILD))
    assert len(standin.requests) == 40 and 1 < standin.peak <= 8
    sent_locally = request_bodies(standin)
    standin.reset()
    standin.set_default({"content": "forty-two", "latency": 0.05})
    spread = many_cases(tmp_path / "ray", cases=20, concurrency=8)
    report = finish(claw(spread, standin, *BUILD, "--executor", "ray", "--ray-address", cluster.address))
    assert report["counts"]["executed"] == 40
    assert len(standin.requests) == 40, "each request sent once"
    assert 1 < standin.peak <= 8  # the run profile's max_concurrency holds for the whole cluster
    # The process ended without Ray's teardown (clawstore/host/process_end.py), but after claw's own: its pack sealed.
    packs = pack_files(Store(spread.root / "store", create=False))
    assert packs and all(scan_pack(path).sealed for path in packs)
    assert answers(spread, standin) == answers(local, standin)
    # Byte-identical: the same request bodies reached the provider, the same answers were stored.
    assert request_bodies(standin) == sent_locally
    outcomes = run_outcomes(local.root / "store")
    assert len(outcomes) == 40 and run_outcomes(spread.root / "store") == outcomes


def test_killed_workers_requests_are_retried_committed_once_and_their_lost_spend_shows(cluster: RayCluster,
        standin: StandIn, tmp_path: Path) -> None:
    """A request in flight on a killed worker may have been answered and billed: its run is sent again and
    committed once, and its cost reads unknown with the answer's as its known part, as a local timeout's does
    (before session 78 Ray re-sent it itself and the run's cost was the second answer's, a known number)."""
    standin.set_default({"content": "fine", "latency": 0.3})  # (each answer reports its cost)
    ws = many_cases(tmp_path / "ws", cases=15, concurrency=6)
    proc = claw(ws, standin, *BUILD, "--executor", "ray", "--ray-address", cluster.address)
    wait_for_requests(standin, 8)
    workers = cluster.worker_pids()
    assert workers, "the build's provider actors run on the cluster"
    for pid in workers:  # (every node's: the requests may all be on the actor that started first)
        os.kill(pid, signal.SIGKILL)
    report = finish(proc)
    assert report["counts"]["executed"] == 30 and report["counts"]["failed"] == 0
    assert len(answers(ws, standin)) == 30  # every run committed, once
    # Retried requests are the ones in flight when the workers died: at most the concurrency.
    assert 30 <= len(standin.requests) <= 30 + 6
    lost = len(standin.requests) - 30  # answered by the stand-in (so billed), their answers lost with the worker
    assert lost >= 1, "the kill caught requests in flight"
    metrics, rows = report["metrics"], report["rows"]
    unknown = [row for row in rows if row["cost_source"] == "unknown"]
    assert metrics["cost_usd"] is None and metrics["cost_unknown"] == len(unknown) >= lost, metrics
    assert all(row["cost_usd"] is None for row in unknown), unknown
    # Every run's answer reported the same cost: the known part is all 30 of them, the lost attempts apart.
    [each] = {row["cost_usd"] for row in rows if row not in unknown}
    assert metrics["cost_known_usd"] == pytest.approx(30 * each), metrics
    # Each such run says why: its lost attempt, logged as the provider client logs its own failed ones.
    proc = claw(ws, standin, "query", "select r.case_id, r.model_id, r.cost_source, r.attempts, string_agg(m.content, "
                "'|') filter (where m.tool_name = 'provider_retry') as retried from runs r left join messages m "
                "on m.run_key = r.key group by all", "--format", "json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    retried = {(row["case_id"], row["model_id"]): row for row in json.loads(out) if row["cost_source"] == "unknown"}
    assert retried.keys() == {(row["case_id"], row["model_id"]) for row in unknown}, retried
    for row in retried.values():  # (a retry sent to the other worker before its death was seen is lost too)
        logged = sorted((row["retried"] or "").split("|"))
        assert logged == [f"attempt {n} failed: worker_lost" for n in range(1, row["attempts"])] != [], row


# `claw build` whose provider actors fail otherwise than by the provider once their workers are killed (`mark`: made by
# the test just before): they find no API key in their environment (a restarted worker on a node whose environment
# lacks it: MissingApiKeyError), or raise an error of their own. (Actors of their own, named by their tag.)
LOST_THEN_TAG = "lost-then-fails"
KEY = "OPENROUTER_API_KEY"
THEN = {"key": f"os.environ.pop({KEY!r}, None)", "error": "raise RuntimeError('the node went wrong')"}
LOST_THEN = """
import os, sys
from clawstore.builder import ray_client

class LostThenFails(ray_client._ChatWorker):
    def chat(self, *args, **kwargs):
        if os.path.exists(%(mark)r):
            %(then)s
        return super().chat(*args, **kwargs)

ray_client._ChatWorker = LostThenFails
ray_client._code_tag = lambda: %(tag)r
sys.argv = ["claw", *sys.argv[1:]]
from clawstore.cli import entry
entry()
"""


def _lost_then_build(cluster: RayCluster, ws: Workspace, standin: StandIn, model: str, then: str,
                     *extra: str) -> dict:
    """Build `ws` on the cluster, killing the provider actors' workers once `model`'s request is at the stand-in
    (held there: its answer never comes back), after which they fail as `then` says; then remove the test's actors.
    The build's JSON report."""
    env = {k: v for k, v in os.environ.items() if k != "CLAW_STORE"}
    env.update({KEY: SECRET, "OPENROUTER_BASE_URL": standin.base_url})
    mark = ws.root / "killed"
    script = LOST_THEN % {"mark": str(mark), "then": THEN[then], "tag": LOST_THEN_TAG}
    proc = subprocess.Popen([sys.executable, "-c", script, *BUILD, *extra, "--executor", "ray", "--ray-address",
                             cluster.address], cwd=ws.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 180
        while not any(r["model"] == model for r in standin.requests) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        workers = cluster.worker_pids(b"ray::LostThenFails")
        assert workers, "the build's provider actors run on the cluster"
        mark.touch()
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=200)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _remove_actors(cluster, f"claw-provider-{LOST_THEN_TAG}-")
    assert "Traceback" not in err and SECRET not in out + err, err
    assert out.strip(), err
    return json.loads(out)


def _remove_actors(cluster: RayCluster, prefix: str) -> None:
    script = (f"import ray; ray.init(address={cluster.address!r}, logging_level='ERROR'); "
              "[ray.kill(ray.get_actor(a['name'], namespace=a['namespace'])) for a in "
              f"ray.util.list_named_actors(all_namespaces=True) if a['name'].startswith({prefix!r})]")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=cluster.env)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize(("then", "code", "said"), [("key", "runner_configuration_error", KEY),
                                                    ("error", "runner_execution_failed", "the node went wrong")])
def test_a_lost_requests_spend_stays_unknown_when_its_retry_fails_otherwise_than_by_the_provider(
        cluster: RayCluster, standin: StandIn, tmp_path: Path, then: str, code: str, said: str) -> None:
    """The request in flight on the killed worker may have been answered and billed; sent again, the restarted
    worker finds no API key, or fails with an error of its own. The run fails as that error's does (a missing key:
    runner_configuration_error), its cost unknown and its attempts and trace counting the lost one (before session 80
    it was dropped with the retry's error: a missing key's run read as nothing sent, a known 0)."""
    standin.set_default(held("never"))
    ws = one_case(tmp_path / "ws")
    ws.run_profile(defaults={"timeout_seconds": 300})  # (the request stays in flight: never timed out and sent again)
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 1.0, "output": 2.0}, api_key_env=KEY)
                                           for m in d["models"]])  # (a key it needs: never optional)
    report = _lost_then_build(cluster, ws, standin, "vendor/m1", then)
    [row] = report["rows"]
    assert row["status"] == "failed" and said in row["error"], row
    assert row["cost_source"] == "unknown" and row["cost_usd"] is None, row
    assert report["metrics"]["cost_usd"] is None and report["metrics"]["cost_unknown"] == 1, report["metrics"]
    assert len(standin.requests) == 1  # (the retry never left)
    proc = claw(ws, standin, "query", "select r.status, r.error_code, r.attempts, r.cost_source, string_agg(m.content, "
                "'|') filter (where m.tool_name = 'provider_retry') as retried from runs r left join messages m "
                "on m.run_key = r.key group by all", "--format", "json")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    [run] = json.loads(out)
    assert run["error_code"] == code and run["cost_source"] == "unknown", run
    assert run["attempts"] >= 1 and sorted((run["retried"] or "").split("|")) == [
        f"attempt {n} failed: worker_lost" for n in range(1, run["attempts"] + 1)], run


def test_a_lost_judge_requests_spend_is_recorded_when_its_retry_finds_no_key(cluster: RayCluster, standin: StandIn,
                                                                              tmp_path: Path) -> None:
    """The same for a judge's request: its repetition is recorded failed, its cost unknown with the lost attempt
    counted, where the missing key raised through the judge refused the build and the lost request's spend was in
    no record (before session 80)."""
    standin.script(JUDGE, held("never"))
    ws = one_case(tmp_path / "ws")
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judges"][0].update(api_key_env=KEY))
    report = _lost_then_build(cluster, ws, standin, JUDGE, "key", "--evaluation-profile", "ev")
    [row] = report["rows"]
    assert row["status"] == "success", row  # (the run, answered before the judge was asked)
    assert sum(r["model"] == JUDGE for r in standin.requests) == 1
    proc = claw(ws, standin, "query", "select status, error_code, cost_usd, cost_source, attempts from judgements",
                "--format", "json")
    out, qerr = proc.communicate(timeout=120)
    assert proc.returncode == 0, qerr
    [judged] = json.loads(out)
    assert judged["status"] == "failed" and judged["error_code"] == "judge_failed", judged
    assert judged["cost_usd"] is None and judged["cost_source"] == "unknown", judged
    assert judged["attempts"] >= 1, judged


def test_a_killed_driver_resumes_without_resending_committed_work(cluster: RayCluster, standin: StandIn,
                                                                  tmp_path: Path) -> None:
    standin.set_default({"content": "fine", "latency": 0.3})
    ws = many_cases(tmp_path / "ws", cases=15, concurrency=4)
    proc = claw(ws, standin, *BUILD, "--executor", "ray", "--ray-address", cluster.address)
    wait_for_requests(standin, 12)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    sent = len(standin.requests)
    report = finish(claw(ws, standin, *BUILD, "--executor", "ray", "--ray-address", cluster.address))
    resent = sent + report["counts"]["executed"] - 30
    # Group commit (store/core/batch.py): what was in flight at the kill (4), plus what finished within the
    # last commit window (0.25 s; at 0.3 s a request, at most one more per slot).
    assert 0 <= resent <= 4 + 4, "only the requests in flight or in the last commit window are sent again"


def _provider_actors(cluster: RayCluster) -> list[str]:
    """The builds' provider actors on the cluster: this checkout's (other tests' are named by tags of their own)."""
    from clawstore.builder.ray_client import _code_tag

    script = (f"import ray; ray.init(address={cluster.address!r}, logging_level='ERROR'); "
              "print(' '.join(sorted(a['name'] for a in ray.util.list_named_actors(all_namespaces=True) "
              f"if a['name'].startswith('claw-provider-{_code_tag()}-'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=cluster.env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_next_build_reuses_the_nodes_actors(cluster: RayCluster, standin: StandIn, tmp_path: Path) -> None:
    standin.set_default({"content": "again", "latency": 0.01})
    finish(claw(many_cases(tmp_path / "one", cases=4), standin, *BUILD, "--executor", "ray",
                "--ray-address", cluster.address))
    actors = _provider_actors(cluster)
    assert len(actors) == 2  # one per node, left running for the next build
    finish(claw(many_cases(tmp_path / "two", cases=4), standin, *BUILD, "--executor", "ray",
                "--ray-address", cluster.address))
    assert _provider_actors(cluster) == actors  # the same ones: none started


def test_a_program_connected_to_ray_already_keeps_its_connection(cluster: RayCluster, standin: StandIn) -> None:
    """claw embedded in a program (a notebook) that called ray.init itself: claw uses that connection
    and leaves it open."""
    standin.set_default({"content": "embedded", "latency": 0.0})
    script = f"""
import os, ray
ray.init(address={cluster.address!r}, logging_level="ERROR")
os.environ["OPENROUTER_BASE_URL"] = {standin.base_url!r}
from clawstore.builder.ray_client import RayClient
from clawstore.providers.endpoint import resolve_endpoint
client = RayClient()
reply = client.chat(resolve_endpoint({{}}), {{"model": "vendor/m1", "messages": [{{"role": "user", "content": "hi"}}]}})
client.close()
assert ray.is_initialized()
print(type(reply).__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**cluster.env, "OPENROUTER_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(standin.requests) == 1


def test_requests_do_not_wait_for_a_node_whose_actor_is_still_starting(cluster: RayCluster, standin: StandIn,
                                                                         tmp_path: Path) -> None:
    """On a new cluster each node's actor starts a worker process, one sooner than the other: the requests
    go to the actors that have started. Here one of the two takes two minutes to start; eight requests
    are answered meanwhile, all by the other."""
    standin.set_default({"content": "answered", "latency": 0.0})
    script = f"""
import os, time, ray
from concurrent.futures import ThreadPoolExecutor, wait
ray.init(address={cluster.address!r}, logging_level="ERROR")
os.environ["OPENROUTER_BASE_URL"] = {standin.base_url!r}
from clawstore.builder import ray_client
from clawstore.providers.endpoint import resolve_endpoint
MARK = {str(tmp_path / "slow")!r}

class SlowToStart(ray_client._ChatWorker):
    def __init__(self):
        try:  # the first actor to start is the slow one (Ray's placement by node is only a preference)
            os.close(os.open(MARK, os.O_CREAT | os.O_EXCL))
            time.sleep(120)
        except FileExistsError:
            pass
        super().__init__()

ray_client._ChatWorker = SlowToStart
ray_client._code_tag = lambda: "slow-node-test"  # actors of their own, not the builds' (named by the tag)
client = ray_client.RayClient()
body = {{"model": "vendor/m1", "messages": [{{"role": "user", "content": "hi"}}]}}
with ThreadPoolExecutor(8) as pool:
    started = time.monotonic()
    done, late = wait([pool.submit(client.chat, resolve_endpoint({{}}), body) for _ in range(8)], timeout=60)
    print(len(done), len(late), round(time.monotonic() - started, 1), flush=True)
    for actor in client._actors:
        ray.kill(actor)
    os._exit(0)  # (the late requests would wait for the killed actor)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**cluster.env, "OPENROUTER_API_KEY": SECRET})
    assert done.returncode == 0, done.stderr[-3000:]
    answered, late, _ = done.stdout.split()
    assert (int(answered), int(late)) == (8, 0), done.stdout
    assert len(standin.requests) == 8


def test_when_no_actor_starts_the_waiting_callers_give_up_together(cluster: RayCluster, tmp_path: Path) -> None:
    """A cluster whose actors never start: the callers waiting for the first one give up after one
    `patience` in all (then their requests fail as the cluster's), not one patience after another."""
    script = f"""
import os, time, ray
from concurrent.futures import ThreadPoolExecutor
ray.init(address={cluster.address!r}, logging_level="ERROR")
from clawstore.builder import ray_client

class NeverStarts(ray_client._ChatWorker):
    def __init__(self):
        time.sleep(300)

ray_client._ChatWorker = NeverStarts
ray_client._code_tag = lambda: "never-starts-test"
client = ray_client.RayClient()
with ThreadPoolExecutor(3) as pool:
    started = time.monotonic()
    picked = list(pool.map(lambda _: client._actor(2.0), range(3)))
    print(round(time.monotonic() - started, 1), all(actor in client._actors for actor in picked), flush=True)
for actor in client._actors:
    ray.kill(actor)
os._exit(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=cluster.env)
    assert done.returncode == 0, done.stderr[-3000:]
    waited, picked = done.stdout.split()
    assert picked == "True"
    assert 1.5 <= float(waited) < 3.5, done.stdout  # one patience (2 s), not three (6 s)


def test_a_request_the_driver_gave_up_on_is_never_sent(cluster: RayCluster, standin: StandIn,
                                                      tmp_path: Path) -> None:
    """No actor has started within a request's patience: the request fails (`transport_error`, its cost unknown) and
    must never reach the provider. Before session 80 it waited in Ray's queue for the actor and was sent once it
    started: answered to nobody, paid, and the next build asked again. (Its ref is kept, as the client waits for it,
    to wait for its end once the actors start; a request sent to each actor afterwards is answered at once.)"""
    standin.set_default({"content": "answered", "latency": 0.0})
    script = f"""
import json, os, time, uuid, ray
ray.init(address={cluster.address!r}, logging_level="ERROR")
os.environ["OPENROUTER_BASE_URL"] = {standin.base_url!r}
from clawstore.builder import ray_client
from clawstore.providers.endpoint import resolve_endpoint
from clawstore.providers.errors import ProviderError
MARK = {str(tmp_path / "start")!r}

class StartsWhenTold(ray_client._ChatWorker):
    def __init__(self):
        deadline = time.monotonic() + 120
        while not os.path.exists(MARK) and time.monotonic() < deadline:
            time.sleep(0.05)
        super().__init__()

ray_client._ChatWorker = StartsWhenTold
ray_client._code_tag = lambda: "given-up-" + uuid.uuid4().hex[:8]  # actors of their own
# Patience: the request's timeout, 0.5 s (no actor starts before MARK, made after the give-up: a longer one only waits)
ray_client.MAX_BACKOFF_S = ray_client.CHAT_MARGIN_S = 0.0
client = ray_client.RayClient()
endpoint = resolve_endpoint({{}})
get, kept = ray.get, []
ray.get = lambda ref, **kw: kept.append(ref) or get(ref, **kw)
try:
    client.chat(endpoint, {{"model": "vendor/m1", "messages": [{{"role": "user", "content": "given up"}}]}},
                timeout=0.5, retries=0)
    error = None
except ProviderError as exc:
    error = exc.message
ray.get = get
open(MARK, "w").close()
try:
    ray.get(kept[0], timeout=120)
    end = "answered"
except ray.exceptions.RayError as exc:
    end = type(exc).__name__
after = {{"model": "vendor/m1", "messages": [{{"role": "user", "content": "after"}}]}}
ray.get([actor.chat.remote(endpoint, after, 30.0, 0) for actor in client._actors], timeout=120)
print(json.dumps({{"error": error, "end": end, "kept": len(kept)}}), flush=True)
for actor in client._actors:
    ray.kill(actor)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=cluster.env)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["kept"] == 1 and "did not answer (GetTimeoutError)" in found["error"], found
    prompts = [request["messages"][-1]["content"] for request in standin.requests]
    assert "given up" not in prompts, (found, prompts)
    assert prompts == ["after"] * 2, prompts


def _closed_port() -> int:
    """A loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.2", 0))
        return int(sock.getsockname()[1])


def _fails_at_once(ws: Workspace, standin: StandIn, *args: str) -> str:
    began = time.monotonic()
    proc = claw(ws, standin, *args)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"claw {' '.join(args)} still waited after 60 s")
    assert proc.returncode == 2, err
    assert time.monotonic() - began < 30
    assert "Traceback" not in err and SECRET not in out + err
    return err.strip()


def test_an_unreachable_cluster_is_a_clear_error_at_once(standin: StandIn, tmp_path: Path) -> None:
    """Ray itself retries a cluster address that does not answer for about ten minutes."""
    need_ray()
    address = f"127.0.0.2:{_closed_port()}"
    err = _fails_at_once(many_cases(tmp_path / "ws", cases=2), standin, *BUILD, "--executor", "ray",
                         "--ray-address", address)
    assert err.splitlines()[-1] == (f"claw: error: --executor ray: cannot reach a Ray cluster at {address} "
                                    "(nothing answers there: start one with `ray start --head`, or pass "
                                    "--ray-address)")
    assert not standin.requests


def test_a_bad_config_is_reported_as_such_with_executor_ray(standin: StandIn, tmp_path: Path) -> None:
    need_ray()
    ws = many_cases(tmp_path / "ws", cases=2)
    err = _fails_at_once(ws, standin, "build", "--suite", "nope", "--run-profile", "rp", "--executor", "ray",
                         "--ray-address", f"127.0.0.2:{_closed_port()}")
    assert err.splitlines()[-1].startswith("claw: error: could not resolve suite 'nope'")


def test_the_distributed_bench_runs_at_smoke_size_on_this_cluster(cluster: RayCluster, tmp_path: Path) -> None:
    # bench/distributed_bench.py's smoke run (tests/test_bench_smoke.py runs the others), on this
    # folder's cluster (tests/distributed/conftest.py) instead of clusters of its own.
    proc = run_bench("distributed_bench", ["--runs", "10", "--latency", "0.05", "--concurrency", "4", "--repeat", "1",
                                           "--ray-address", cluster.address], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "requests per round: [10]" in proc.stdout and "byte-identical requests sent: True" in proc.stdout
    assert "Ray's defaults" not in proc.stdout  # (no cluster of its own)
