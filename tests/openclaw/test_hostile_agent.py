"""An agent acts on a model's words and a suite written by someone else: what it makes is input.

A turn that prints without end, a workspace of gigabytes or of countless files, a secret written a
hundred thousand times: each fails (or is redacted in) that run, in bounded memory and time, instead
of exhausting the build that runs it beside others. Containers get resource limits of their own.
"""

from __future__ import annotations

import mmap
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clawstore.host import run_limits as limits
from clawstore.runners.openclaw import evidence, run_openclaw
from clawstore.runners.openclaw import runner as runner_module
from clawstore.runners.openclaw.container import EngineSettings
from clawstore.runners.openclaw.evidence import redact_tree
from clawstore.store import Store
from tests.openclaw.conftest import SECRET, payload
from tests.support.nesting import nest

pytestmark = pytest.mark.timeout(120)


def test_a_turn_that_prints_without_end_is_stopped_at_the_limit_and_fails(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"flood": "stdout"}])
    began = time.monotonic()
    outcome = run_openclaw(make_spec(timeout_seconds=60), store, tmp_path)
    assert time.monotonic() - began < 30, "stopped at the limit, not at the run's timeout"
    assert outcome.status == "failed"
    error = outcome.artifact["error"]
    assert error["code"] == "openclaw_output_limit" and error["metadata"] == {"step": "turn1", "stream": "stdout"}
    assert "more than 16 MiB to stdout; it was stopped" in error["message"]
    assert fake_docker.live_containers() == [] and fake_docker.calls("rm")
    logs = store.get_bytes(outcome.outputs["openclaw_logs"])
    assert limits.MAX_OUTPUT_BYTES <= len(logs) < limits.MAX_OUTPUT_BYTES + 4096  # the first 16 MiB, kept
    invocations = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]["invocations"]
    assert invocations[-1]["output_overflow"] == "stdout"
    assert "output_overflow" not in invocations[0]  # (validation ended normally: its summary is as before)


def test_flooding_stderr_ends_the_same_way(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(validate={"flood": "stderr"})
    outcome = run_openclaw(make_spec(timeout_seconds=60), store, tmp_path)
    assert outcome.status == "failed"
    assert outcome.artifact["error"]["metadata"] == {"step": "validate", "stream": "stderr"}
    assert fake_docker.calls("agent") == []


def test_a_workspace_of_gigabytes_is_not_kept_and_fails_the_run(make_spec, fake_docker, store, tmp_path):
    # 1 GiB + 1 byte that costs no disk (sparse): the old capture read it whole to redact it.
    fake_docker.script(turns=[{"sparse": {"dump.bin": limits.MAX_WORKSPACE_BYTES + 1},
                               "payload": payload("I wrote a big file.")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "failed"
    error = outcome.artifact["error"]
    assert error["code"] == "openclaw_workspace_too_large"
    assert error["message"] == "the agent's final workspace was not kept: its files hold more than 1 GiB"
    assert "workspace" not in outcome.outputs and "workspace_diff" not in outcome.outputs
    evidence = outcome.artifact["runner_metadata"]["openclaw"]
    assert evidence["workspace_snapshot"] is None and evidence["metadata"]["workspace_kept"] is False
    assert outcome.outputs["openclaw_logs"] and outcome.outputs["openclaw_raw_trace"]  # the rest is kept
    assert max(len(store.get_bytes(oid)) for oid in store.iter_objects()) < 1 << 20


def test_a_workspace_of_too_many_files_is_not_kept(make_spec, fake_docker, store, tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "MAX_WORKSPACE_FILES", 40)
    fake_docker.script(turns=[{"write": {f"many/{n}.txt": "x" for n in range(50)}, "payload": payload("ok")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "failed"
    assert outcome.artifact["error"]["message"].endswith("it holds more than 40 files and directories")
    assert "workspace" not in outcome.outputs


def test_a_timed_out_run_with_a_huge_workspace_keeps_its_timeout_as_the_reason(make_spec, fake_docker, store,
                                                                                tmp_path):
    fake_docker.script(turns=[{"sparse": {"dump.bin": limits.MAX_WORKSPACE_BYTES + 1}, "sleep": 60}])
    outcome = run_openclaw(make_spec(timeout_seconds=2), store, tmp_path)
    assert outcome.status == "timed_out" and outcome.artifact["error"]["code"] == "openclaw_timeout"
    metadata = outcome.artifact["runner_metadata"]["openclaw"]["metadata"]
    assert metadata["workspace_kept"] is False and "more than 1 GiB" in metadata["workspace_problem"]


def test_an_answered_agent_whose_huge_workspace_was_not_kept_is_not_kept_either(make_spec, fake_docker, store,
                                                                               tmp_path):
    """Its model was answering at the timeout, but its workspace, past the limit, was not kept: its checks and judge
    would read no workspace, so the run is a fault, retried (as the workspace's own failure), not the agent's outcome
    kept without its evidence."""
    answered = '{"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "toolUse"}}\n'
    fake_docker.script(turns=[{"sparse": {"dump.bin": limits.MAX_WORKSPACE_BYTES + 1},
                               "file": {"state/agents/main/sessions/s.jsonl": answered}, "payload": payload("one")},
                              {"sleep": 60}])
    spec = make_spec(timeout_seconds=4, turns=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.status == "timed_out" and outcome.artifact["error"]["code"] == "openclaw_timeout"
    assert outcome.artifact["runner_metadata"]["openclaw"]["metadata"]["workspace_kept"] is False


def test_counting_a_workspace_stops_at_the_limit(tmp_path: Path) -> None:
    for n in range(30):
        (tmp_path / f"{n}.txt").write_text("x")
    assert limits.workspace_problem(tmp_path, max_entries=30) is None
    assert limits.workspace_problem(tmp_path, max_entries=29) == "it holds more than 29 files and directories"
    assert limits.workspace_problem(tmp_path, max_bytes=29) == "its files hold more than 0 MiB"
    (tmp_path / "link").symlink_to("/dev/zero")  # a link is not followed, whatever it points at
    assert limits.workspace_problem(tmp_path) is None


_REDACT_BIG = """
import sys, tracemalloc
from pathlib import Path
from clawstore.runners.openclaw.evidence import redact_tree
tracemalloc.start()
print(redact_tree(Path(sys.argv[1]), [sys.argv[2]]))
print(tracemalloc.get_traced_memory()[1])
"""


def test_a_big_file_full_of_the_secret_is_redacted_in_bounded_memory(tmp_path: Path) -> None:
    work = tmp_path / "workspace"
    work.mkdir()
    line = f"token={SECRET};".encode()
    with open(work / "leak.log", "wb") as out:
        for _ in range(32):
            out.write(line * 40_000)  # 32 × 40,000 copies of the secret: about 48 MB, 3 times the bound below
    (work / "run.sh").write_text(f"#!/bin/sh\necho {SECRET}\n")
    (work / "run.sh").chmod(0o755)
    size = (work / "leak.log").stat().st_size
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _REDACT_BIG, str(work), SECRET], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    took = time.monotonic() - began
    touched, peak = done.stdout.split("\n")[:2]
    assert touched == "['leak.log', 'run.sh']"
    assert int(peak) < 16 << 20, "the file was not read whole"  # (Python's allocations; the file is mapped)
    assert took < 60
    redacted = work / "leak.log"
    assert redacted.stat().st_size == size - 32 * 40_000 * (len(SECRET) - len("[redacted]"))
    with open(redacted, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        assert data.find(SECRET.encode()) == -1 and data[:17] == b"token=[redacted];"
    assert stat.S_IMODE((work / "run.sh").stat().st_mode) == 0o755  # an executable stays one
    assert (work / "run.sh").read_text() == "#!/bin/sh\necho [redacted]\n"
    assert sorted(os.listdir(work)) == ["leak.log", "run.sh"]  # no staging file left behind


@pytest.mark.parametrize("chunk", [3, 4, 5, 7, 1 << 20])
def test_redaction_replaces_every_secret_wherever_a_chunk_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              chunk: int) -> None:
    monkeypatch.setattr(evidence, "REDACT_CHUNK", chunk)
    path = tmp_path / "f"
    path.write_bytes(b"abcabc--abcd--bc-x-" + b"abcd" * 5 + b"bc")
    assert redact_tree(tmp_path, ["bc", "abc", "abcd"]) == ["f"]
    assert path.read_bytes() == b"[redacted][redacted]--[redacted]--[redacted]-x-" + b"[redacted]" * 6
    assert redact_tree(tmp_path, ["absent"]) == [] and redact_tree(tmp_path, []) == []


def test_containers_get_resource_limits(make_spec, fake_docker, store, tmp_path, monkeypatch):
    fake_docker.script(turns=[{"payload": payload("ok")}])
    run_openclaw(make_spec(), store, tmp_path)
    flags = fake_docker.calls("run")[-1]["flags"]
    assert (flags["memory"], flags["pids-limit"]) == ("4g", "4096") and "cpus" not in flags
    monkeypatch.setenv("CLAW_OPENCLAW_MEMORY", "none")
    monkeypatch.setenv("CLAW_OPENCLAW_PIDS_LIMIT", "512")
    monkeypatch.setenv("CLAW_OPENCLAW_CPUS", "1.5")
    run_openclaw(make_spec(), store, tmp_path)
    flags = fake_docker.calls("run")[-1]["flags"]
    assert "memory" not in flags and (flags["pids-limit"], flags["cpus"]) == ("512", "1.5")


def test_limit_settings_are_read_from_the_environment() -> None:
    settings = EngineSettings.from_env("docker", {"CLAW_OPENCLAW_MEMORY": " 2g ", "CLAW_OPENCLAW_PIDS_LIMIT": ""})
    assert settings.limit_flags() == ["--memory", "2g", "--pids-limit", "4096"]
    assert EngineSettings.from_env("docker", {"CLAW_OPENCLAW_MEMORY": "None", "CLAW_OPENCLAW_PIDS_LIMIT": "none"}
                                   ).limit_flags() == []


def test_a_container_killed_by_the_engine_says_which_limit_to_look_at(make_spec, fake_docker, store, tmp_path):
    fake_docker.script(turns=[{"rc": 137}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.artifact["error"]["message"] == \
        "turn 1 of 1: openclaw exited 137 (killed: past its memory limit, CLAW_OPENCLAW_MEMORY?)"


def test_a_workspace_nested_too_deep_or_with_too_long_a_path_is_not_kept(tmp_path: Path) -> None:
    deep = tmp_path / "deep"
    deep.mkdir()
    nest(deep, limits.MAX_WORKSPACE_DEPTH)
    assert limits.workspace_problem(deep) is None
    nest(deep / ("d/" * limits.MAX_WORKSPACE_DEPTH), 1)
    assert limits.workspace_problem(deep) == f"it nests directories more than {limits.MAX_WORKSPACE_DEPTH} deep"
    long = tmp_path / "long"
    long.mkdir()
    nest(long, 9, "n" * 250)  # 9 × 251 bytes
    assert limits.workspace_problem(long) == "it holds a path longer than 2,048 bytes"


@pytest.mark.parametrize("name,value", [("CLAW_OPENCLAW_MEMORY", "lots"), ("CLAW_OPENCLAW_PIDS_LIMIT", "4k"),
                                        ("CLAW_OPENCLAW_CPUS", "--privileged")])
def test_a_malformed_limit_is_refused_when_the_build_plans(tmp_path: Path, name: str, value: str) -> None:
    # Before, the engine refused it once per run, each run failing with the engine's message.
    shutil.copytree(Path(__file__).resolve().parents[2] / "configs", tmp_path / "configs")
    env = {**os.environ, name: value, "OPENROUTER_API_KEY": "k-test", "CLAW_STORE": str(tmp_path / "store")}
    for command in ("plan", "build"):
        done = subprocess.run([sys.executable, "-m", "clawstore.cli", command, "--suite", "openclaw_examples",
                               "--run-profile", "openclaw_local"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [f"claw: error: {name}: expected " + {
            "CLAW_OPENCLAW_MEMORY": "a size such as 4g or 512m",
            "CLAW_OPENCLAW_PIDS_LIMIT": "a whole number such as 4096",
            "CLAW_OPENCLAW_CPUS": "a number of CPUs such as 1.5"}[name] + f", or none for no limit; got {value!r}"]


def _host_dir(tmp_path: Path) -> Path:
    """A directory of the host outside the run: a project with its .git, a file holding the key, a private file."""
    host = tmp_path / "host_project"
    (host / ".git").mkdir(parents=True)
    (host / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (host / "private.txt").write_text("host-private-marker\n")
    (host / "env.txt").write_text(f"KEY={SECRET}\n")
    return host


def _untouched(host: Path, store: Store) -> None:
    assert (host / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n", "claw deleted a host .git"
    assert (host / "env.txt").read_text() == f"KEY={SECRET}\n", "claw rewrote a host file"
    assert not any(b"host-private-marker" in store.get_bytes(oid) for oid in store.iter_objects())


def test_a_workspace_the_agent_replaced_by_a_link_to_the_host_is_neither_read_pruned_nor_redacted(
        make_spec, fake_docker, store, tmp_path):
    """The agent owns /work (the run's root, mounted): it may put a link where its workspace was. The host side
    followed it: redaction rewrote, pruning deleted (.git) and the snapshot stored the host directory it names."""
    host = _host_dir(tmp_path)
    fake_docker.script(turns=[{"link": {"workspace": str(host)}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    _untouched(host, store)
    assert outcome.status == "failed" and outcome.artifact["error"]["code"] == "openclaw_workspace_replaced"
    assert "a link" in outcome.artifact["error"]["message"] and "workspace" not in outcome.outputs


def test_a_workspace_the_agent_replaced_by_a_file_fails_the_run_not_the_build(make_spec, fake_docker, store,
                                                                               tmp_path):
    """run_openclaw never raises for a run that fails: before, the snapshot's 'not a directory' left it uncaught."""
    fake_docker.script(turns=[{"file": {"workspace": "not a directory"}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "failed" and outcome.artifact["error"]["code"] == "openclaw_workspace_replaced"
    assert "workspace" not in outcome.outputs


def test_openclaws_session_directory_replaced_by_a_link_is_not_read(make_spec, fake_docker, store, tmp_path):
    host = _host_dir(tmp_path)
    (host / "stolen.jsonl").write_text("host-private-marker\n")
    fake_docker.script(turns=[{"link": {"state/agents/a/sessions": str(host)}, "payload": payload("done")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    _untouched(host, store)
    assert not [k for k in outcome.outputs if k.startswith("openclaw_session:")]


def test_a_long_turns_message_file_is_not_written_through_a_link_the_agent_left(
        make_spec, fake_docker, store, tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "MAX_MESSAGE_ARG", 10)  # every turn's text goes through a file
    host = _host_dir(tmp_path)
    fake_docker.script(turns=[{"link": {"turns/turn_2.txt": str(host / "env.txt")}, "payload": payload("one")},
                              {"payload": payload("two")}])
    outcome = run_openclaw(make_spec(turns=[{"role": "user", "content": "first turn, long enough"},
                                            {"role": "user", "content": "second turn, long enough"}]),
                           store, tmp_path)
    _untouched(host, store)
    assert outcome.status == "success", outcome.artifact["error"]


def test_a_session_file_that_is_a_link_to_itself_is_skipped_not_a_crash(make_spec, fake_docker, store, tmp_path):
    """A link to itself cannot be resolved (Python raises RuntimeError, not OSError): the run raised out of capture,
    unrecorded with what it spent, and ran again the next build; it is skipped as any link the agent left."""
    fake_docker.script(turns=[{"link": {"state/agents/a/sessions/loop.jsonl": "loop.jsonl"}, "payload": payload("a")}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.status == "success"
    skipped = [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "session_file_skipped"]
    assert skipped == [{"name": "loop.jsonl", "reason": "reached through a link"}]


def test_a_transcript_wal_that_is_a_link_to_itself_is_skipped_not_a_crash(make_spec, fake_docker, store, tmp_path):
    """The same for an agent database's -wal file, read when a turn timed out: the run stays a fault, retried."""
    wal = "state/agents/a/agent/openclaw-agent.sqlite-wal"
    fake_docker.script(turns=[{"file": {wal[:-4]: "x"}, "link": {wal: "openclaw-agent.sqlite-wal"},
                               "payload": payload("a")}, {"sleep": 60}])
    spec = make_spec(timeout_seconds=4, turns=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    outcome = run_openclaw(spec, store, tmp_path)  # the second turn timed out: was the agent's model answering?
    assert outcome.artifact["error"]["code"] == "openclaw_timeout"
    skipped = [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "session_database_skipped"]
    assert skipped == [{"name": "a", "reason": "reached through a link"}]


_TABLE = ("CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, created_at INTEGER, "
          "event_zstd BLOB)")
_ANSWERED_ROW = ("INSERT INTO transcript_events VALUES ('s', 1, '{\"type\": \"message\", \"message\": {\"role\": "
                 "\"assistant\", \"content\": [], \"stopReason\": \"toolUse\", \"usage\": {\"input\": 40, "
                 "\"output\": 4}}}', 0, NULL)")
_DATABASE = "state/agents/a/agent/openclaw-agent.sqlite"
_CRASH = {"rc": 1, "stderr": "Segmentation fault\n"}


def test_a_crashed_runs_transcript_database_is_read_for_its_known_spend(make_spec, fake_docker, store, tmp_path):
    """The baseline of the hostile ones below: a container that crashed after its answered request (no timeout) is
    read all the same (before session 62: only a turn the timeout ended), a fault with its known part."""
    fake_docker.script(turns=[{"sql": {_DATABASE: [_TABLE, _ANSWERED_ROW]}, **_CRASH}])
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert outcome.artifact["error"]["code"] == "openclaw_execution_failed"
    usage = outcome.artifact["usage"]
    assert (usage["answered_requests"], usage["input_tokens_known"], usage["output_tokens_known"]) == (1, 40, 4)
    assert usage["cost_usd"] is None and usage["usage_rejected"], usage  # (its tokens unknown: not believed)


@pytest.mark.parametrize("hostile", [
    {"sql": {"elsewhere/openclaw-agent.sqlite": [_TABLE, _ANSWERED_ROW]},
     "link": {"state/agents/a/agent": "../../../elsewhere"}},  # (a linked directory names a host one)
    {"sql": {_DATABASE: ["CREATE VIEW transcript_events AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                         "FROM n) SELECT 'x' AS event_json, NULL AS event_zstd, x AS created_at, x AS seq FROM n"]}},
    {"sql": {_DATABASE: ["CREATE TABLE transcript_events (seq INTEGER, event_json TEXT, event_zstd BLOB, "
                         "created_at BLOB AS (zeroblob(900000000)))",
                         "INSERT INTO transcript_events (seq, event_json) VALUES (1, 'x'), (2, 'x')"]}},
], ids=["link", "endless view", "computed column bomb"])
def test_a_crashed_runs_hostile_transcript_database_is_refused_as_a_timed_out_ones(
        make_spec, fake_docker, store, tmp_path, hostile):
    """The crash's new path reads the database as the timeout's does (transcript.py): never through a link, never a
    view or a computed column; the run's spend stays unknown with no known part, in seconds."""
    fake_docker.script(turns=[{**hostile, **_CRASH}])
    started = time.monotonic()
    outcome = run_openclaw(make_spec(), store, tmp_path)
    assert time.monotonic() - started < 20
    assert outcome.artifact["error"]["code"] == "openclaw_execution_failed"
    skipped = [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "session_database_skipped"]
    assert len(skipped) == 1 and skipped[0]["name"] == "a", skipped
    assert skipped[0]["reason"] == "reached through a link" or "transcript_events" in skipped[0]["reason"], skipped
    usage = outcome.artifact["usage"]
    assert "answered_requests" not in usage and usage["cost_usd"] is None and usage["usage_rejected"], usage


def test_a_container_that_ran_and_exited_125_is_no_engine_refusal_its_spend_unknown(make_spec, fake_docker, store,
                                                                                   tmp_path):
    """`docker run` exits 125 when the engine refuses the container, and when the container's own process exits 125:
    a turn whose container ran, had its model answer, then exited 125 was taken for one the engine never started,
    its cost a known 0 (`priced`, 0 tokens) however much it spent. The engine writes --cidfile once it has made the
    container: made, it may have run. Still a fault, retried (its error unchanged)."""
    fake_docker.script(turns=[{"sql": {_DATABASE: [_TABLE, _ANSWERED_ROW]}, "rc": 125, "stderr": "exited 125\n"}])
    spec = make_spec(model_extras={"pricing": {"input": 3.0, "output": 15.0}})
    outcome = run_openclaw(spec, store, tmp_path)
    assert outcome.artifact["error"]["code"] == "openclaw_engine_unavailable", outcome.artifact["error"]
    usage = outcome.artifact["usage"]
    assert (usage["cost_usd"], usage["cost_source"]) == (None, "unknown"), usage  # (on main: 0.0, priced)
    assert (usage["answered_requests"], usage["input_tokens_known"], usage["output_tokens_known"]) == (1, 40, 4)
    assert usage["cost_known_usd"] == pytest.approx((40 * 3.0 + 4 * 15.0) / 1e6), usage
