"""A python hook's outcome that depends on the machine at that moment, not on the hook and its inputs, is not kept as
the checks' outcome for ever (docs/building.md, "Outcomes and faults"; docs/evaluation.md, Python hooks): a hook not
run (bubblewrap not working here: "…; python hooks never run unconfined, so the hook was not run") or stopped at its
timeout (a loaded machine) leaves a checks record that is not reusable, so the next build runs the checks again; the
judge is asked again only when what they say then differs. A result a hook gave is reused where bubblewrap does not
work (a store pulled there).

Before session 75 both errors were reused by every later build (0 executed, checks still `error`), and a no-op stamp
answered the next `claw build` without even planning. Records an older claw kept so are left behind (their key had no
`hook_faults`).
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


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "RACY_NS", 500_000_000)  # (as tests/builder/test_case_stamp.py: a stamp in 0.5 s)


def _hook_campaign(ws: Workspace, standin: StandIn) -> None:
    """One model; case alpha's one check a python hook (taking 0.4 s) in its case directory. Its files old enough for a
    build to leave a stamp (a no-op answered by it would not plan, nor run the hook)."""
    ws.suite("main", ["m1"])
    (ws.configs / "cases" / "alpha" / "hooks").mkdir()
    (ws.configs / "cases" / "alpha" / "hooks" / "check.py").write_text(HOOK)
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
    bindir, broken = tmp_path / "bin", tmp_path / "broken"
    bindir.mkdir()
    (bindir / "bwrap").write_text(f"#!/bin/sh\nif [ -e {broken} ]; then\n"
                                  "  echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1\nfi\n"
                                  f"exec {confine.bwrap_exe()} \"$@\"\n")
    (bindir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    broken.touch()
    return broken


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
