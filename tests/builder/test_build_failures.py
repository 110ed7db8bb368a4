"""Failure semantics: retries, provider errors, timeouts, interruption, containment, secrets."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import zstandard

from clawstore.store import Store
from clawstore.testing.standin import StandIn, error, hang, malformed, text, tool_call
from tests.support.claw import Claw
from tests.support.judging import eval_profile
from tests.support.reaped import Reap
from tests.support.sockets import closed_port
from tests.support.workspace import SECRET, Workspace


def _rows(out: str) -> dict[tuple[str, str, int], dict]:
    return {(r["model_id"], r["case_id"], r["repetition"]): r for r in json.loads(out)["rows"]}


def test_retry_after_is_honoured(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", error(429, retry_after=1), text("four"))
    started = time.monotonic()
    code, out, _ = claw.build("--output", "json")
    assert code == 0
    assert time.monotonic() - started >= 1.0
    assert len(standin.requests) == 2
    gap = standin.requests[1]["received_at"] - standin.requests[0]["received_at"]
    assert gap >= 0.95


def test_exhausted_500s_are_provider_error_exit_1_and_retried_next_build(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", error(500))
    code, out, _ = claw.build("--output", "json")
    assert code == 1
    row = _rows(out)[("m1", "alpha", 0)]
    assert row["status"] == "provider_error" and row["run"] == "fail"
    assert len(standin.requests) == 3  # retries: 2 → three attempts
    standin.reset()
    code, out, _ = claw.build("--output", "json")
    assert code == 0
    assert _rows(out)[("m1", "alpha", 0)]["run"] == "exec"
    assert len(standin.requests) == 1


def test_malformed_body_is_provider_error(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", malformed())
    code, out, _ = claw.build("--output", "json")
    assert code == 1
    assert _rows(out)[("m1", "alpha", 0)]["status"] == "provider_error"


def test_hang_ends_timed_out(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    ws.run_profile(defaults={"timeout_seconds": 1, "retries": 0})
    standin.script("vendor/m1", hang(30))
    started = time.monotonic()
    code, out, _ = claw.build("--output", "json")
    assert code == 1
    assert _rows(out)[("m1", "alpha", 0)]["status"] == "timed_out"
    assert time.monotonic() - started < 10


def test_a_timeout_retried_says_each_attempt_waited(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch) -> None:
    """`within 0.3s` beside a latency of 1.2 s (two attempts and a backoff) read as a wrong timeout: the line says the
    limit held each of its attempts (session 78, a llama.cpp server slower than the profile's timeout, `retries: 1`)."""
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    ws.run_profile(defaults={"timeout_seconds": 0.3, "retries": 1})
    standin.script("vendor/m1", hang(30))
    code, out, _ = claw.build("--output", "json")
    row = _rows(out)[("m1", "alpha", 0)]
    assert code == 1 and row["status"] == "timed_out" and len(standin.requests) == 2
    assert row["error"].endswith("within 0.3s (each of 2 attempts)"), row["error"]
    ws.run_profile(defaults={"timeout_seconds": 0.3, "retries": 0})
    code, out, _ = claw.build("--output", "json")
    assert _rows(out)[("m1", "alpha", 0)]["error"].endswith("within 0.3s"), out  # one attempt: as before


def test_empty_answer_is_invalid_and_cached(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    standin.script("vendor/m1", text(""))
    code, out, _ = claw.build("--output", "json")
    assert code == 1 and _rows(out)[("m1", "alpha", 0)]["status"] == "invalid"
    code, out, _ = claw.build("--output", "json")
    assert _rows(out)[("m1", "alpha", 0)]["run"] == "reuse"
    assert len(standin.requests) == 1


def test_stop_on_runner_error_skips_the_rest(ws: Workspace, claw: Claw, standin: StandIn, monkeypatch) -> None:
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.run_profile(concurrency=1, stop_on_runner_error=True, defaults={"retries": 0})
    standin.script("vendor/m1", error(500))
    code, out, _ = claw.build("--output", "json")
    assert code == 1
    actions = [r["run"] for r in json.loads(out)["rows"]]
    assert actions[0] == "fail" and "skip" in actions
    assert len(standin.requests) == 1


def test_a_stop_says_why_the_runs_not_started_were_skipped(ws: Workspace, claw: Claw, standin: StandIn,
                                                           monkeypatch) -> None:
    """The user reads why runs were skipped: the policy that stopped the build and the run that tripped it (before
    session 78 the summary said "2 skipped" and nothing more, text or JSON: `Stop.reason` was never shown)."""
    monkeypatch.setenv("CLAW_BACKOFF_BASE", "0.01")
    ws.run_profile(concurrency=1, stop_on_runner_error=True, defaults={"retries": 0})
    standin.script("vendor/m1", error(500))
    code, out, err = claw.build("--output", "json")
    report = json.loads(out)
    skipped = sum(r["run"] == "skip" for r in report["rows"])
    assert code == 1 and skipped >= 1
    stopped = report["stopped"] or ""
    assert "stop_on_runner_error" in stopped and "provider_error" in stopped, stopped
    assert f"{skipped} run(s) not started" in stopped, stopped
    code, out, err = claw.build()
    assert code == 1
    line = next((row for row in out.splitlines() if row.startswith("stopped: ")), "")
    assert "stop_on_runner_error" in line and "execution_policy" in line, out


def test_a_judges_refused_connection_reads_as_a_runs_does(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    """A judge's provider failure is said as a run's is (`transport_error: ConnectError talking to …: … Connection
    refused`): before session 78 it was the exception's repr, `ProviderError: provider transport_error: …`, whose
    extra words pushed "Connection refused" past the cut of the build's failure line (a llama.cpp server stopped
    mid-build read `[Errno 111] Connection refus…`)."""
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["alpha"]})
    eval_profile(ws, repetitions=1)
    ws.edit("evaluation_profiles/ev.yaml",
            lambda d: d["judges"][0].update(base_url=f"http://127.0.0.1:{closed_port()}/v1"))
    code, out, err = claw.build("--evaluation-profile", "ev", "--output", "json")
    assert code == 1, out + err
    [judge] = [f["reason"] for f in json.loads(out)["failures"] if f["node"].startswith("judge/")]
    assert judge.startswith("judge_provider_error: transport_error: ConnectError talking to http://127.0.0.1:"), judge
    assert judge.endswith("Connection refused"), judge
    code, out, err = claw("query", "select error_message from judgements", "--format", "json")
    [row] = json.loads(out)
    assert row["error_message"].startswith("transport_error: ConnectError talking to "), row


def test_sigkill_mid_build_then_resume_never_resends_finished_runs(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path) -> None:
    for index in range(6):
        ws.case(f"c{index}", f"Question {index}?")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=2)
    standin.set_default(text("slow answer", latency=0.4))
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    deadline = time.monotonic() + 20
    store = Store(Path(os.environ["CLAW_STORE"]))
    while time.monotonic() < deadline and len(list(store.iter_actions())) < 3:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    # What the killed build finished: the entries indexed and those in its pack the kill came before indexing (a
    # build adopts them: docs/store.md). Under load the kill landed in that window and the resumed build reused two
    # more runs than the index had named; adopted in a copy, so that the build below still adopts its own.
    shutil.copytree(store.root, tmp_path / "adopted")
    with Store(tmp_path / "adopted") as adopted:
        adopted.adopt_orphans()
        finished = {key for key, _ in adopted.iter_actions()}
    assert 3 <= len(finished) < 8
    # The killed build's log is indexed once its lease is gone (the log is rewritten every 2 s, so
    # it may list fewer runs than finished: those are still in the store and reused below).
    code, out, _ = claw("query", "select count(*) as n, any_value(state) as state from builds", "--format", "json")
    assert code == 0 and json.loads(out) == [{"n": 1, "state": "running"}]
    sent_before = len(standin.requests)
    standin.set_default(text("fast answer"))
    code, out, _ = claw.build("--output", "json")
    assert code == 0
    rows = json.loads(out)["rows"]
    assert all(r["status"] == "success" for r in rows) and len(rows) == 8
    reused = {r["key"] for r in rows if r["run"] == "reuse"}
    assert reused == finished
    assert len(standin.requests) - sent_before == 8 - len(finished)


def test_a_killed_builds_spending_is_unknown_in_the_builds_view_never_the_part_its_log_had(
        ws: Workspace, claw: Claw, standin: StandIn, reap: Reap) -> None:
    """The log is written every 2 s, so a killed build's metrics stop short of what it paid: its row says
    NULL (unknown), not the 0.0 or partial sum that log holds."""
    for index in range(6):
        ws.case(f"c{index}", f"Question {index}?")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=1)
    standin.set_default(text("slow answer", latency=0.4))  # the kill comes well before the last of 8 runs
    proc = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp"))
    store = Store(Path(os.environ["CLAW_STORE"]))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(list(store.iter_actions())) < 2:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert len(standin.requests) >= 2  # answered, each with its cost: paid for
    code, out, _ = claw("query", "select state, cost_usd, cost_known_usd, results_cost_usd from builds", "--format",
                        "json")
    assert code == 0 and json.loads(out) == [{"state": "running", "cost_usd": None, "cost_known_usd": None,
                                              "results_cost_usd": None}]


def test_sigterm_stops_cleanly_and_records_the_build(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    standin.set_default(text("slow answer", latency=1.5))
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp")
    store = Store(Path(os.environ["CLAW_STORE"]))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not standin.requests:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    logs = list((store.root / "builds").glob("*.json"))
    assert [json.loads(p.read_text())["state"] for p in logs] == ["interrupted"]


def test_tools_are_contained_and_secrets_never_stored(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    ws.case("tools", "Use the tools.", input={
        "messages": [{"role": "user", "content": "Use the tools."}],
        "context": {"llm_probe": {"tools": ["write_file", "exec_shell"]}}})
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["tools"]})
    marker = Path("/tmp/x-claw-build-test")
    marker.unlink(missing_ok=True)
    standin.script("vendor/m1",
                   tool_call("write_file", {"path": str(marker), "content": "hello"}),
                   tool_call("exec_shell", {"command": "env; echo key=$OPENROUTER_API_KEY"}),
                   tool_call("read_file", {"path": str(marker)}),
                   text("done"))
    code, out, err = claw.build("--output", "json")
    assert code == 0, err
    assert not marker.exists()
    store = Store(Path(os.environ["CLAW_STORE"]))
    record = next(store.get_action(key) for key, _ in store.iter_actions())
    artifact = store.get_json(record.outputs["artifact"])
    results = [e for e in artifact["trace"] if e["event_type"] == "tool_result"]
    assert results[0]["status"] == "success"
    assert SECRET not in json.dumps(results[1]) and "key=\n" in json.dumps(results[1]["output"]).replace("\\n", "\n")
    assert results[2]["status"] == "error" and "not enabled" in json.dumps(results[2]["output"])
    tree = store.read_tree(record.outputs["sandbox"])
    paths = {entry.path for entry in tree}
    assert any(p.endswith("x-claw-build-test") for p in paths)
    # The API key's value is in no stored object.
    dctx = zstandard.ZstdDecompressor()
    for oid in store.iter_objects():
        assert SECRET.encode() not in store.get_bytes(oid), oid
    for path in store.root.rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert SECRET.encode() not in raw
            if raw[:4] == b"\x28\xb5\x2f\xfd":
                assert SECRET.encode() not in dctx.decompressobj().decompress(raw)


def test_a_sandbox_of_gigabytes_is_not_kept_but_the_paid_answer_is(ws: Workspace, claw: Claw,
                                                                   standin: StandIn) -> None:
    # A model's shell command can make files of any size; the old capture read them all into the store.
    ws.case("big", "Make a big file.", input={
        "messages": [{"role": "user", "content": "Make a big file."}],
        "context": {"llm_probe": {"tools": ["exec_shell"]}}})
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["big"]})
    # (Two files: one above 1 GiB is stopped by the shell's own file size limit, tests/runners/test_sandbox.py.)
    make = "truncate -s 700M /work/a.bin /work/b.bin && echo made"
    standin.script("vendor/m1", tool_call("exec_shell", {"command": make}), text("done"))
    code, _, err = claw.build("--output", "json")
    assert code == 0, err
    store = Store(Path(os.environ["CLAW_STORE"]))
    record = next(store.get_action(key) for key, _ in store.iter_actions())
    assert record.status == "success"  # the answer was paid for: it is kept and scored
    assert store.read_tree(record.outputs["sandbox"]) == []
    artifact = store.get_json(record.outputs["artifact"])
    assert artifact["runner_metadata"]["sandbox"]["kept"] is False
    assert artifact["runner_metadata"]["sandbox"]["not_kept"] == "its files hold more than 1 GiB"
    assert max(len(store.get_bytes(oid)) for oid in store.iter_objects()) < 1 << 20
    sent = len(standin.requests)
    code, _, err = claw.build("--output", "json")
    assert code == 0 and len(standin.requests) == sent, err  # not paid for again


def test_a_sandbox_nested_1500_deep_keeps_the_paid_answer(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    # Python's own tree walks recurse once per level: handing the sandbox to the shell's user, storing
    # it and removing it each failed the run with RecursionError after its answer was paid for.
    ws.case("deep", "Nest.", input={"messages": [{"role": "user", "content": "Nest."}],
                                    "context": {"llm_probe": {"tools": ["exec_shell"]}}})
    ws.suite("main", ["m1"], case_selection={"include_case_ids": ["deep"]})
    standin.script("vendor/m1", tool_call("exec_shell", {"command": 'mkdir -p $(printf "d/%.0s" $(seq 1500))'}),
                   tool_call("exec_shell", {"command": "echo again"}), text("done"))
    code, out, err = claw.build("--output", "json")
    assert code == 0, out + err
    store = Store(Path(os.environ["CLAW_STORE"]))
    record = next(store.get_action(key) for key, _ in store.iter_actions())
    assert record.status == "success"
    artifact = store.get_json(record.outputs["artifact"])
    assert artifact["runner_metadata"]["sandbox"]["not_kept"] == "it nests directories more than 256 deep"
    results = [e for e in artifact["trace"] if e["event_type"] == "tool_result"]
    assert [r["status"] for r in results] == ["success", "success"]
    assert "again" in results[1]["output"]["stdout"]


def test_an_interrupt_says_what_the_build_spent(ws: Workspace, claw: Claw, standin: StandIn, reap: Reap) -> None:
    """Ctrl-C ends a build with its one line and no table nor totals line: what the committed nodes cost went unsaid
    (session 77's newcomer; the progress lines said it, `--progress none` and `--output json` nothing)."""
    for index in range(4):
        ws.case(f"c{index}", f"Question {index}?")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=1)
    standin.set_default(text("slow answer", latency=1.5))
    proc = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp", "--progress", "none"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(standin.requests) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "Traceback" not in err, err
    store = Store(Path(os.environ["CLAW_STORE"]))
    costs = [record.metrics.cost_usd for record in (store.get_action(key) for key, _ in store.iter_actions())
             if record is not None and record.kind == "run"]
    assert len(costs) == 2 and all(costs), costs
    assert f"2 node(s) executed and 0 reused are committed, cost spent {sum(costs):.6f} USD; " in err, err


def test_an_interrupt_names_the_nodes_that_failed_before_it(ws: Workspace, claw: Claw, standin: StandIn,
                                                            reap: Reap) -> None:
    # "interrupted: 0 node(s) executed and 0 reused are committed" after a run had failed, recorded with its cost
    for index in range(4):
        ws.case(f"c{index}", f"Question {index}?")
    ws.suite("main", ["m1"])
    ws.run_profile(concurrency=1)
    standin.script("*", error(400, "bad request"), text("slow answer", latency=1.5))
    proc = reap(claw.popen("build", "--suite", "main", "--run-profile", "rp"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(standin.requests) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "node(s) executed, 1 failed (recorded, with their cost) and 0 reused are committed" in err, err
