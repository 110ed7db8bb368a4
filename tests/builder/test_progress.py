"""Build progress as a user sees it: the live display in a real terminal (tmux), plain lines, JSON
events, the failure reasons in the final table, and Ctrl-C (stop launching, finish, commit, say what is left)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from clawstore.store import Store
from clawstore.testing.standin import StandIn, error, held, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.terminal import Terminal
from tests.support.workspace import Workspace

BUILD = ["build", "--suite", "main", "--run-profile", "rp"]


def claw_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "clawstore.cli", *args]


def child_env(env: dict[str, str]) -> dict[str, str]:
    return {**env, "CLAW_BACKOFF_BASE": "0.01", "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "TERM": "xterm-256color", "PATH": os.environ.get("PATH", "")}


def slow_and_failing(standin: StandIn, latency: float) -> None:
    standin.set_default(text("an answer", latency=latency))
    standin.script("vendor/m2", error(503, "upstream overloaded"), match="Name a colour.")


def test_live_display_in_a_terminal(ws: Workspace, env: dict[str, str], standin: StandIn,
                                    terminal: Terminal, tmp_path: Path) -> None:
    eval_profile(ws, repetitions=2)
    slow_and_failing(standin, latency=0.8)
    standin.script(JUDGE, judge_reply(7))
    terminal.start(claw_command(*BUILD, "--evaluation-profile", "ev"), ws.root, child_env(env))
    mid = terminal.wait_for(lambda s: "running" in s and "requests/s" in s and " m1 " in s)
    assert "claw build" in mid and "ETA" in mid and "nodes" in mid
    for column in ("model", "done", "running", "failed", "reused"):
        assert column in mid
    assert "tokens in" in mid and "cost $" in mid
    shots = Path(os.environ.get("CLAW_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    failing = terminal.wait_for(lambda s: "last failure" in s or "EXIT=" in s)
    (shots / "progress-live.ansi").write_text(terminal.screen(ansi=True))
    assert "last failure" in failing and "run/m2/beta/0: http_error: HTTP 503" in failing
    final = terminal.wait_for(lambda s: "EXIT=" in s)
    assert "EXIT=1" in final
    # The display's last state stays on screen: everything done, m2's failure counted.
    m2 = next(line for line in final.splitlines() if line.strip().startswith("m2 "))
    assert m2.split()[3] == "1", m2  # failed
    assert "failed nodes (1):" in final
    assert "run/m2/beta/0: http_error: HTTP 503" in final


def test_plain_lines_when_not_a_terminal(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    slow_and_failing(standin, latency=0.0)
    proc = claw.popen(*BUILD)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    lines = err.splitlines()
    assert len(lines) == 4 and all(line.startswith("[runs ") for line in lines)
    assert "[runs 4/4]" in lines[-1]
    failed = [line for line in lines if "m2/beta" in line]
    assert len(failed) == 1 and "] run/m2/beta/0: provider_error (http_error: HTTP 503 from " in failed[0]
    # The 503 reported no cost and the model declares no price: its cost is unknown, never 0.
    assert "upstream overloaded) · spent " in failed[0]
    assert lines[-1].endswith("(1 of 4 unknown)") and " · spent ≥0.0000" in lines[-1]
    assert "\x1b[" not in err  # no escape codes in a pipe
    assert "failed nodes (1):\n  run/m2/beta/0: http_error: HTTP 503" in out


def test_json_events(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws, repetitions=1)
    slow_and_failing(standin, latency=0.0)
    standin.script(JUDGE, judge_reply(6))
    proc = claw.popen(*BUILD, "--evaluation-profile", "ev", "--progress", "json", "--output", "json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    events = [json.loads(line) for line in err.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "phase" and events[0]["phase"] == "runs" and events[0]["execute"] == 4
    assert kinds.count("started") == kinds.count("finished") + kinds.count("failed")
    failed = [e for e in events if e["event"] == "failed"]
    assert [(e["node"], e["status"]) for e in failed] == [("run/m2/beta/0", "provider_error")]
    assert "upstream overloaded" in failed[0]["reason"]
    assert {e["phase"] for e in events if e["event"] == "phase"} == {"runs", "checks", "judges", "results"}
    totals = events[-1]
    assert totals["event"] == "totals" and totals["failed"] == 1 and totals["done"] == totals["total"]
    # The failed run's cost is unknown: the total is null, what is known of it is apart.
    assert totals["cost_usd"] is None and totals["cost_known_usd"] > 0
    assert totals["cost_sources"] == {"reported": 3 + 3, "unknown": 1}  # 3 runs and their 3 judgements
    assert json.loads(out)["failures"] == [{"node": "run/m2/beta/0", "reason": failed[0]["reason"]}]


def running(screen: str) -> int:
    """The sum of the live display's `running` column (model rows: name, done/total, running, ...)."""
    rows = [line.split() for line in screen.splitlines() if line.startswith("  m")]
    return sum(int(cols[2]) for cols in rows if len(cols) >= 5 and cols[2].isdigit())


def wait_requests(standin: StandIn, count: int) -> None:
    deadline = time.monotonic() + 20
    while len(standin.requests) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def _build_logs(store: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (store / "builds").glob("*.json")]


def test_ctrl_c_lets_running_nodes_finish_and_commits_them(ws: Workspace, env: dict[str, str], standin: StandIn,
                                                             terminal: Terminal) -> None:
    for case in ("gamma", "delta", "epsilon"):
        ws.case(case, f"Question {case}?")
    # 2 at a time (max_concurrency 2), 10 runs in all; the answers held until Ctrl-C is acknowledged (a 2 s latency
    # was a race: under load the first two were answered, and two more sent, before the key reached the build)
    standin.set_default(held("answers", content="slow answer"))
    terminal.start(claw_command(*BUILD), ws.root, child_env(env))
    terminal.wait_for(lambda s: running(s) == 2)
    wait_requests(standin, 2)
    sent = len(standin.requests)
    assert sent == 2
    terminal.keys("C-c")
    shown = terminal.wait_for(lambda s: "no new node starts" in s)
    assert "waiting for 2 running" in shown and "Ctrl-C again cancels them" in shown
    standin.release("answers")
    final = terminal.wait_for(lambda s: "EXIT=" in s, timeout=20)
    assert "EXIT=130" in final, final
    assert "claw: interrupted: 2 node(s) executed" in final.replace("\n", "")
    assert "8 node(s) left unbuilt in the layers begun (runs)" in final.replace("\n", "")
    assert len(standin.requests) == sent  # nothing new was launched after Ctrl-C
    store = Path(env["CLAW_STORE"])
    logs = _build_logs(store)
    assert [log["state"] for log in logs] == ["interrupted"]
    assert logs[0]["counts"]["executed"] == 2  # the two running runs finished and were committed
    assert sum(1 for _ in Store(store).iter_actions()) == 2


def test_second_ctrl_c_cancels_running_nodes(ws: Workspace, env: dict[str, str], standin: StandIn,
                                             terminal: Terminal) -> None:
    standin.set_default(text("very slow answer", latency=30.0))
    terminal.start(claw_command(*BUILD), ws.root, child_env(env))
    terminal.wait_for(lambda s: running(s) == 2)
    wait_requests(standin, 2)
    started = time.monotonic()
    terminal.keys("C-c")
    terminal.wait_for(lambda s: "no new node starts" in s)
    terminal.keys("C-c")
    final = terminal.wait_for(lambda s: "EXIT=" in s, timeout=10)
    assert time.monotonic() - started < 10  # did not wait for the 30 s answers
    assert "EXIT=130" in final and "Traceback" not in final
    assert [log["state"] for log in _build_logs(Path(env["CLAW_STORE"]))] == ["interrupted"]


def test_ctrl_c_during_the_judgements_does_not_undercount_what_is_left(ws: Workspace, claw: Claw,
                                                                       standin: StandIn) -> None:
    """A layer's nodes join the total when it begins, so a Ctrl-C among the judgements knew nothing of the results
    layer: against a llama.cpp server the user read "1 planned node(s) left unbuilt" where `claw status` then counted
    a judgement and three results never built (session 78). It says which layers it counts, and where to read all."""
    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, held("verdicts", **judge_reply(8.0)))
    proc = claw.popen("build", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                      "--progress", "plain")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(r["model"] == JUDGE for r in standin.requests):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        lines = []
        for line in iter(proc.stderr.readline, ""):  # (the interrupt taken up: the held judgements finish last)
            lines.append(line)
            if "no new node starts" in line:
                break
    finally:
        standin.release("verdicts")
        _, rest = proc.communicate(timeout=30)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err
    code, out, _ = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev",
                        "--output", "json")
    left = sum(layer["never-built"] + layer["stale"] + layer["failed"]
               for model in json.loads(out)["models"].values() for layer in model["layers"].values())
    said = re.search(r"; (\d+) node\(s\) left unbuilt in the layers begun \((?P<layers>[a-z, ]+)\)", err)
    assert said is not None, err
    assert int(said.group(1)) < left and "results" not in said.group("layers"), (err, left)
    assert "claw status counts every node left" in err, err


def test_the_total_shown_is_the_builds_from_its_first_layer(ws: Workspace, claw: Claw, standin: StandIn,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Built a case a window (WINDOW_RUNS), each window's runs, checks, judgements and results begin apart: the
    live display drawn as each layer begins shows the build's 16 nodes (done, begun and expected) from the first,
    where it showed 2, then 4, 6, ... 16 as the layers of each window began (session 78)."""
    from rich.console import Console

    from clawstore.builder.progress_live import LiveProgress
    from clawstore.graph import plan as graph_plan

    eval_profile(ws, repetitions=1)
    standin.script(JUDGE, judge_reply(7))
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", 2)  # (a window holds whole cases: alpha's two runs, then beta's)
    shown: list[str] = []

    def drawn(self: LiveProgress, label: str, stale: int, reused: int) -> None:
        console = Console(width=100, no_color=True, record=True, file=io.StringIO())
        console.print(self.render())
        shown.append(console.export_text())

    monkeypatch.setattr(LiveProgress, "on_phase", drawn)
    code, out, err = claw(*BUILD, "--evaluation-profile", "ev", "--progress", "live")
    assert code == 0, out + err
    assert len(shown) == 8, shown  # 2 windows x 4 layers
    totals = []
    for screen in shown:
        nodes = re.search(r"\b(\d+)/(\d+) nodes(?: \(\+(\d+) expected\))?", screen)
        assert nodes is not None, screen
        totals.append(int(nodes.group(2)) + int(nodes.group(3) or 0))
    assert totals == [16] * 8, shown
    assert "expected by the plan, not begun: runs 2 · checks 4 · judges 4 · results 4" in shown[0], shown[0]


def _clock_s(clock: str) -> int:
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    return hours * 3600 + minutes * 60 + seconds


def _elapsed_s(screen: str) -> int:
    found = re.search(r"elapsed (\d+:\d\d:\d\d)", screen)
    return _clock_s(found.group(1)) if found else 0


def test_live_total_and_eta_count_the_layers_not_begun(ws: Workspace, env: dict[str, str], standin: StandIn,
                                                       terminal: Terminal) -> None:
    """A layer's nodes joined the total only as it began: against a llama.cpp server the display read `6/9 nodes`
    and an ETA near zero while the judges and results had not begun, and the build ended at 12/12 (session 78). While
    the runs execute, the total and the ETA count the checks, judgements and results the plan expects."""
    eval_profile(ws, repetitions=1)
    ws.run_profile(concurrency=4, defaults={"timeout_seconds": 120})  # (the held replies outlast the 5 s default)
    standin.set_default(text("an answer"))
    standin.script("vendor/m2", held("m2"))  # m1's two runs finish, m2's two wait: the runs layer is half done
    standin.script(JUDGE, judge_reply(7))
    terminal.start(claw_command(*BUILD, "--evaluation-profile", "ev"), ws.root, child_env(env))
    try:
        # 4 runs, 4 checks, 4 judgements, 4 results; 2 runs done after 3 s or more
        mid = terminal.wait_for(lambda s: _elapsed_s(s) >= 3 and re.search(r"\b2/\d+ nodes", s) is not None)
    finally:
        standin.release("m2")
    nodes = re.search(r"\b(\d+)/(\d+) nodes(?: \(\+(\d+) expected\))?", mid)
    assert nodes is not None, mid
    done, total, expected = int(nodes.group(1)), int(nodes.group(2)), int(nodes.group(3) or 0)
    assert (done, total + expected) == (2, 16), mid
    assert "expected by the plan, not begun: checks 4 · judges 4 · results 4" in mid, mid
    pace = re.search(r"ETA ~?(\d+:\d\d:\d\d) .*elapsed (\d+:\d\d:\d\d)", mid)
    assert pace is not None, mid
    # 14 nodes left at 2 done in the time elapsed: about 7 times that (an ETA of the runs alone: about once)
    assert _clock_s(pace.group(1)) >= 3 * _clock_s(pace.group(2)), mid
    final = terminal.wait_for(lambda s: "EXIT=" in s)
    assert "EXIT=0" in final and "16/16 nodes" in final and "expected" not in final, final


def test_a_layer_begun_shows_its_real_count_not_the_plans(ws: Workspace, env: dict[str, str], standin: StandIn,
                                                          terminal: Terminal) -> None:
    """The plan expects a failed run's checks and judgement too: once every run's part of a layer has begun, the
    layer's real count stands and nothing more of it is shown as expected (the plan's 4 checks stayed `1 expected`)."""
    eval_profile(ws, repetitions=1)
    ws.run_profile(concurrency=4, defaults={"timeout_seconds": 120})
    slow_and_failing(standin, latency=0.0)  # run/m2/beta fails: no checks, judgement or result of it
    standin.script(JUDGE, held("verdicts", **judge_reply(7)))
    terminal.start(claw_command(*BUILD, "--evaluation-profile", "ev"), ws.root, child_env(env))
    try:
        mid = terminal.wait_for(lambda s: "claw build · judges" in s and running(s) == 3)
    finally:
        standin.release("verdicts")
    nodes = re.search(r"\b(\d+)/(\d+) nodes(?: \(\+(\d+) expected\))?", mid)
    assert nodes is not None, mid
    # 4 runs and 3 checks done, 3 judgements running; the plan's 4 results not begun (the failed run will have none:
    # the plan could not know that one)
    assert (int(nodes.group(1)), int(nodes.group(2)), nodes.group(3)) == (7, 10, "4"), mid
    assert "expected by the plan, not begun: results 4\n" in mid, mid
    final = terminal.wait_for(lambda s: "EXIT=" in s)
    assert "EXIT=1" in final and "13/13 nodes" in final and "expected" not in final, final
