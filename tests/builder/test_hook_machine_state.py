"""A python hook's outcome that depends on the machine at that moment, not on the hook and its inputs, is not kept as
the checks' outcome for ever (docs/building.md, "Outcomes and faults"; docs/evaluation.md, Python hooks): a hook not
run (bubblewrap not working here: "…; python hooks never run unconfined, so the hook was not run", or failing once its
probe passed), whose process gave no result (killed by a signal: the kernel's OOM killer) or stopped at its timeout (a
loaded machine) leaves a checks record that is not reusable, so the next build runs the checks again; the judge is
asked again only when what they say then differs. A result a hook gave is reused where bubblewrap does not work (a
store pulled there).

Before session 75 a hook not run or timed out was reused by every later build (0 executed, checks still `error`), and
a no-op stamp answered the next `claw build` without even planning; before session 76 a hook without a result was.
Records an older claw kept so are left behind (their key had no `hook_faults`), or, made by session 75's claw (with
`hook_faults: retried`), not reused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import stamp as stamps
from clawstore.evaluate import hooks
from clawstore.host import confine
from clawstore.host.confine import bwrap_unavailable_reason
from clawstore.store import Store
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply, judge_requests
from tests.support.oldclaw import old_claw, old_clawstore
from tests.support.stamps import wait_out_racy_window
from tests.support.workspace import Workspace

pytestmark = pytest.mark.skipif(bwrap_unavailable_reason() is not None, reason="bubblewrap does not work here")

EV = ("--evaluation-profile", "ev")
KEPT_HOOK_FAULTS = "9cf08d63"  # main when session 75's s75-hookfail began: a hook not run was the checks' outcome
STATUS = ("status", "--suite", "main", "--run-profile", "rp", *EV, "--output", "json")
EXPLAIN = ("explain", "--suite", "main", "--run-profile", "rp", *EV)
HOOK = ("import time\ndef check(artifact):\n    time.sleep(0.4)\n"
        "    return {'passed': True, 'message': 'the hook ran'}\n")
# main when session 76 began: a hook process killed (or bubblewrap failing once its probe passed) left an outcome kept
KILLED_HOOKS_KEPT = "ac4767c9"
# A hook killed by the machine where the bwrap in front of it (`_bwrap_on_path`) says so: its process gets SIGKILL, as
# from the kernel's OOM killer, whatever the hook and its inputs.
KILLABLE_HOOK = ("import os, signal\ndef check(artifact):\n    if os.environ.get('CLAW_TEST_KILL'):\n"
                 "        os.kill(os.getpid(), signal.SIGKILL)\n"
                 "    return {'passed': True, 'message': 'the hook ran'}\n")
# (POSIX sh, run by the bwrap on PATH when its marker exists, before it runs the real one with "$@")
KILL_THE_HOOK = ('for a do\n  if [ -z "$started" ]; then started=1; set --; fi\n  set -- "$@" "$a"\n'
                 '  if [ "$a" = -- ] && [ -z "$split" ]; then split=1; set -- "$@" /usr/bin/env CLAW_TEST_KILL=1; fi\n'
                 'done\n')
FAIL_AFTER_PROBE = ('for last do :; done\nif [ "$last" != true ]; then\n'
                    '  echo \'bwrap: Creating new namespace failed: No space left on device\' >&2; exit 1\nfi\n')


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "RACY_NS", 500_000_000)  # (as tests/builder/test_case_stamp.py: a stamp in 0.5 s)


def _hook_campaign(ws: Workspace, standin: StandIn, hook: str = HOOK) -> None:
    """One model; case alpha's one check a python hook (taking 0.4 s) in its case directory. Its files old enough for a
    build to leave a stamp (a no-op answered by it would not plan, nor run the hook)."""
    ws.suite("main", ["m1"])
    (ws.configs / "cases" / "alpha" / "hooks").mkdir()
    (ws.configs / "cases" / "alpha" / "hooks" / "check.py").write_text(hook)
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "hook", "python_hook": {"path": "hooks/check.py", "callable_name": "check"}}]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})
    standin.script(JUDGE, *[judge_reply(7) for _ in range(20)])
    wait_out_racy_window(ws.root)


def _build(claw: Claw) -> tuple[int, dict[str, Any]]:
    code, out, err = claw.build(*EV, "--output", "json")
    assert out, err
    return code, json.loads(out)


def _hook_messages(store_root: Path) -> set[str]:
    """The hook check's message in every checks record of the store."""
    store = Store(store_root)
    found = set()
    for key, _ in store.iter_actions():
        record = store.get_action(key)
        if record is not None and record.kind == "checks" and record.summary["checks"]:
            found.add(record.summary["checks"][0]["message"])
    return found


def _failed(report: dict[str, Any]) -> list[str]:
    return [f["node"] for f in report["failures"]]


def _layer_counts(claw: Claw, kind: str) -> dict[str, int]:
    code, out, err = claw(*STATUS)
    assert code == 0, out + err
    return json.loads(out)["models"]["m1"]["layers"][kind]


def _broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bwrap first on PATH that fails as bubblewrap does where user namespaces are not allowed while the file it
    returns exists, and is the real one otherwise: the same environment (PATH) either way, as when bubblewrap is
    repaired or installed."""
    return _bwrap_on_path(tmp_path, monkeypatch, "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1\n")


def _bwrap_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marked: str) -> Path:
    """A bwrap first on PATH that runs the shell lines `marked` while the file it returns exists, then the real bwrap
    (with "$@" as they leave it); the marker is there when it returns."""
    bindir, marker = tmp_path / "bin", tmp_path / "marker"
    bindir.mkdir()
    (bindir / "bwrap").write_text(f"#!/bin/sh\nif [ -e {marker} ]; then\n{marked}fi\n"
                                  f"exec {confine.bwrap_exe()} \"$@\"\n")
    (bindir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    marker.touch()
    return marker


def _new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confine, "_probe", {})  # (bubblewrap is probed once per process: each build is its own)


def test_a_machine_where_bubblewrap_works_again_runs_the_hook(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hook_campaign(ws, standin)
    broken = _broken_bwrap(tmp_path, monkeypatch)
    _new_process(monkeypatch)
    code, first = _build(claw)
    assert code == 1 and _failed(first) == ["checks/m1/alpha/0"], first  # the hook was not run: a harness's fault
    messages = _hook_messages(Path(os.environ["CLAW_STORE"]))
    assert len(messages) == 1 and "never run unconfined" in messages.pop()
    assert judge_requests(standin) == 2  # (the judge still sees what the checks said, as for any error)

    broken.unlink()
    _new_process(monkeypatch)
    assert _layer_counts(claw, "checks")["failed"] == 1  # `claw status`; and why, `claw explain`:
    code, out, err = claw(*EXPLAIN)
    assert code == 0 and "hook_not_run" in out, out + err
    code, second = _build(claw)
    assert code == 0, second
    assert second["counts"]["executed"] == 3, second  # alpha's checks, judgement and result
    assert judge_requests(standin) == 3  # what the checks say changed: the judge is asked again
    assert "the hook ran" in _hook_messages(Path(os.environ["CLAW_STORE"]))
    _new_process(monkeypatch)
    assert _build(claw)[1]["counts"]["executed"] == 0  # and then it is kept

    broken.touch()  # a machine where it does not work (or a store pulled there) keeps the result the hook gave
    _new_process(monkeypatch)
    code, third = _build(claw)
    assert code == 0 and third["counts"]["executed"] == 0, third


def test_a_store_where_an_older_claw_kept_a_hook_not_run_runs_it(
        ws: Workspace, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _hook_campaign(ws, standin)
    broken = _broken_bwrap(tmp_path, monkeypatch)
    old = old_clawstore(tmp_path / "old", KEPT_HOOK_FAULTS)
    built = old_claw(old, ws.root, "build", "--suite", "main", "--run-profile", "rp", *EV)
    assert built.returncode == 0, built.stdout + built.stderr  # (it kept the hook's `error` as the checks' outcome)
    assert "never run unconfined" in _hook_messages(Path(os.environ["CLAW_STORE"])).pop()
    broken.unlink()
    _new_process(monkeypatch)
    code, report = _build(Claw(ws.root))
    assert code == 0 and report["counts"]["executed"] == 3, report  # the checks of a hook now, and what follows
    assert "the hook ran" in _hook_messages(Path(os.environ["CLAW_STORE"]))


def test_a_hook_stopped_at_its_timeout_runs_again_next_build(
        ws: Workspace, claw: Claw, standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    _hook_campaign(ws, standin)
    monkeypatch.setattr(hooks, "DEFAULT_HOOK_TIMEOUT_S", 0.1)  # a loaded machine: the hook's 0.4 s take longer
    code, first = _build(claw)
    assert code == 1, first  # not every evaluation is complete: the checks run again next build
    assert _failed(first) == ["checks/m1/alpha/0"], first
    judged = judge_requests(standin)
    assert judged == 2  # (the judge still sees what the checks said, as for any error)
    assert _layer_counts(claw, "checks")["failed"] == 1
    code, out, err = claw(*EXPLAIN)
    assert code == 0, out + err
    assert "hook_timed_out" in out, out

    code, again = _build(claw)  # still loaded: the checks run again, say the same, and the judgement stands
    assert code == 1 and _failed(again) == ["checks/m1/alpha/0"], again
    assert again["counts"]["executed"] == 0, again
    assert judge_requests(standin) == judged

    monkeypatch.setattr(hooks, "DEFAULT_HOOK_TIMEOUT_S", 30.0)  # an idle machine
    code, third = _build(claw)
    assert code == 0, third
    assert third["counts"]["executed"] == 3, third
    assert judge_requests(standin) == judged + 1  # the checks say something else now: the judge is asked again
    assert "the hook ran" in _hook_messages(Path(os.environ["CLAW_STORE"]))
    code, fourth = _build(claw)
    assert code == 0 and fourth["counts"]["executed"] == 0, fourth


@pytest.mark.parametrize(("machine", "code", "message"), [
    (KILL_THE_HOOK, "hook_no_result", "hook process was killed by signal 9 (SIGKILL) before it gave a result"),
    (FAIL_AFTER_PROBE, "hook_not_run", "bubblewrap failed to start the hook's sandbox (bwrap: Creating new namespace "
                                       "failed: No space left on device); the hook was not run"),
], ids=["killed by the machine", "bubblewrap failing after its probe"])
def test_a_hook_the_machine_kept_from_giving_a_result_runs_again_next_build(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine: str,
        code: str, message: str) -> None:
    """The hook's process killed from outside (the OOM killer) or bubblewrap failing once its probe passed: what the
    checks say then is nothing about the run. Before session 76 it was kept, and reused by every later build."""
    _hook_campaign(ws, standin, KILLABLE_HOOK)
    marker = _bwrap_on_path(tmp_path, monkeypatch, machine)
    _new_process(monkeypatch)
    exit_code, first = _build(claw)
    assert exit_code == 1 and _failed(first) == ["checks/m1/alpha/0"], first
    assert _hook_messages(Path(os.environ["CLAW_STORE"])) == {message}
    judged = judge_requests(standin)
    assert judged == 2  # (the judge still sees what the checks said, as for any error)
    assert _layer_counts(claw, "checks")["failed"] == 1
    exit_code, out, err = claw(*EXPLAIN)
    assert exit_code == 0 and code in out, out + err

    marker.unlink()  # the machine is well again
    _new_process(monkeypatch)
    exit_code, second = _build(claw)
    assert exit_code == 0 and second["counts"]["executed"] == 3, second  # alpha's checks, judgement and result
    assert judge_requests(standin) == judged + 1
    assert "the hook ran" in _hook_messages(Path(os.environ["CLAW_STORE"]))
    assert _build(claw)[1]["counts"]["executed"] == 0


def test_a_store_where_session_75s_claw_kept_a_killed_hook_runs_it(
        ws: Workspace, standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks of a python hook an older claw (sessions 75 to 76) recorded are reused, unless what they kept is a
    hook process that gave no result: those run again."""
    _hook_campaign(ws, standin, KILLABLE_HOOK)
    killer = _bwrap_on_path(tmp_path, monkeypatch, KILL_THE_HOOK)
    killer.unlink()
    old = old_clawstore(tmp_path / "old", KILLED_HOOKS_KEPT)
    build = ("build", "--suite", "main", "--run-profile", "rp", *EV)
    built = old_claw(old, ws.root, *build)
    assert built.returncode == 0, built.stdout + built.stderr
    _new_process(monkeypatch)
    code, report = _build(Claw(ws.root))
    assert code == 0 and report["counts"]["executed"] == 0, report  # what the hook gave then is reused

    hook = ws.configs / "cases" / "alpha" / "hooks" / "check.py"
    hook.write_text(hook.read_text() + "# edited\n")  # (its checks' key changes)
    killer.touch()
    built = old_claw(old, ws.root, *build)
    assert built.returncode == 0, built.stdout + built.stderr  # (it kept the killed hook as the checks' outcome)
    assert "hook process exited with code 137 without a result" in _hook_messages(Path(os.environ["CLAW_STORE"]))
    killer.unlink()
    _new_process(monkeypatch)
    code, report = _build(Claw(ws.root))
    # the checks (the hook ran: what they say now was judged before the edit, so that judgement and its result are
    # reused); before session 76 nothing, the killed hook kept as their outcome
    assert code == 0 and report["counts"]["executed"] == 1, report
