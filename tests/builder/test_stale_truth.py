"""What one edit makes `claw build` do again: exactly the nodes that read what changed, and `claw explain` names it.

One campaign (2 cases × 2 models, judged once, a declarative check and a python hook on one case) is built once for
the module; each row copies its workspace and store, makes one edit, and checks which nodes the dry run would execute
(by layer), the requests the build then sends to the subject models and to the judge, and a line of `claw explain`
(session 74's audit: docs/building.md, Keys; the whole table of fields it tried is in docs/scale/building.md).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import EV, Layers, Rebuild, eval_profile, judged_once
from tests.support.oldclaw import KEYED_WITH_HARNESS_SETTINGS, old_claw, old_clawstore
from tests.support.workspace import SECRET, Workspace, standard

HOOK = "def check(artifact):\n    return {'passed': True, 'message': 'wanted ' + open('expected.txt').read().strip()}\n"
EXPLAIN = ("explain", "--suite", "main", "--run-profile", "rp", *EV)


def _campaign(ws: Workspace) -> None:
    alpha = ws.configs / "cases" / "alpha"
    (alpha / "hooks").mkdir()
    (alpha / "hooks" / "check.py").write_text(HOOK)
    (alpha / "expected.txt").write_text("4\n")
    ws.edit("cases/alpha/test.yaml", lambda d: d.update(deterministic_checks=[
        {"check_id": "present", "declarative": {"kind": "final_response_present"}},
        {"check_id": "hook", "python_hook": {"path": "hooks/check.py", "callable_name": "check"}}]))
    (ws.configs / "cases" / "beta" / "data.txt").write_text("some data\n")
    ws.edit("cases/beta/test.yaml", lambda d: d["input"].update(attachments=["data.txt"]))
    eval_profile(ws, repetitions=1, security_policy={"allow_local_python_hooks": True})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandIn, Path]]:
    with judged_once(tmp_path_factory, "stale-truth", _campaign) as made:
        yield made


@pytest.fixture
def rebuild(built: tuple[StandIn, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Rebuild:
    """The built campaign's workspace and store, copied for one test (the stand-in is the module's)."""
    return Rebuild.of(built, tmp_path, monkeypatch)


def _rewrite(relative: str, change: Callable[[str], str]) -> Callable[[Workspace], None]:
    def edit(ws: Workspace) -> None:
        path = ws.configs / relative
        path.write_text(change(path.read_text()))
    return edit


def _as_json(relative: str) -> Callable[[Workspace], None]:
    """The same values written as JSON (YAML's flow style: other quoting, order and whitespace), a comment above."""
    return _rewrite(relative, lambda text: "# the same, as JSON\n" + json.dumps(yaml.safe_load(text), indent=3))


def _anchored(text: str) -> str:
    """The run profile with an anchor and an alias standing for the value it had, and comments."""
    assert "retries: 2\n" in text and "max_concurrency: 2\n" in text
    return ("# comments\n" + text.replace("retries: 2\n", "retries: &two 2  # an anchor\n")
            .replace("max_concurrency: 2\n", "max_concurrency: *two\n"))


def _moved(ws: Workspace) -> None:
    """The suite file renamed (.yml), a case moved into a group directory, every mtime touched."""
    (ws.configs / "suites" / "main.yaml").rename(ws.configs / "suites" / "renamed.yml")
    (ws.configs / "cases" / "group").mkdir()
    shutil.move(ws.configs / "cases" / "beta", ws.configs / "cases" / "group" / "beta_moved")
    for path in ws.configs.rglob("*"):
        os.utime(path)


def _attachment_moved(ws: Workspace) -> None:
    beta = ws.configs / "cases" / "beta"
    (beta / "files").mkdir()
    shutil.move(beta / "data.txt", beta / "files" / "data.txt")
    ws.edit("cases/beta/test.yaml", lambda d: d["input"].update(attachments=["files/data.txt"]))


def _localhost() -> str:
    """The stand-in under another URL (another endpoint to claw, the same server)."""
    return os.environ["OPENROUTER_BASE_URL"].replace("127.0.0.1", "localhost")


def _case(change: Callable[[dict[str, Any]], Any], case: str = "beta") -> Callable[[Workspace], None]:
    return lambda ws: ws.edit(f"cases/{case}/test.yaml", change)


def _evaluation(change: Callable[[dict[str, Any]], Any]) -> Callable[[Workspace], None]:
    return lambda ws: ws.edit("evaluation_profiles/ev.yaml", change)


ALPHA = {"alpha/m1", "alpha/m2"}
EVERY = {f"{c}/{m}" for c in ("alpha", "beta") for m in ("m1", "m2")}
NOTHING: Layers = {}

# (what changes, the edit, the layers that execute, subject requests, judge requests, a line explain prints)
ROWS: list[tuple[str, Callable[[Workspace], None], Layers, int, int, str | None]] = [
    ("case as JSON", _as_json("cases/beta/test.yaml"), NOTHING, 0, 0, None),
    # (a python hook may read every file of its case's directory, its test.yaml too: its checks run again, free)
    ("case with a hook as JSON", _as_json("cases/alpha/test.yaml"), {"checks": ALPHA, "judge": ALPHA, "result": ALPHA},
     0, 0, "host_inputs.test.yaml changed"),
    ("profiles as JSON", lambda ws: (_as_json("run_profiles/rp.yaml")(ws), _as_json("evaluation_profiles/ev.yaml")(ws)),
     NOTHING, 0, 0, None),
    ("anchor and comments", _rewrite("run_profiles/rp.yaml", _anchored), NOTHING, 0, 0, None),
    ("files moved and touched", _moved, NOTHING, 0, 0, None),
    ("attachment moved", _attachment_moved, NOTHING, 0, 0, None),
    ("expectation metadata", _case(lambda d: d["expectations"]["hard_expectations"][0].update(metadata={"k": 1})),
     NOTHING, 0, 0, None),
    ("suite leaves a case out", lambda ws: ws.edit("suites/main.yaml", lambda d: d.update(
        case_selection={"include_case_ids": ["alpha"]})), NOTHING, 0, 0, None),
    ("check description", _case(lambda d: d["deterministic_checks"][0].update(description="It answers."), "alpha"),
     {"checks": ALPHA, "judge": ALPHA, "result": ALPHA}, 0, 2, "checks[0].description added ('It answers.')"),
    ("hook file, same result", _rewrite("cases/alpha/hooks/check.py", lambda text: "# a comment\n" + text),
     {"checks": ALPHA, "judge": ALPHA, "result": ALPHA}, 0, 0, "host_inputs.hooks/check.py changed"),
    ("file the hook reads", _rewrite("cases/alpha/expected.txt", lambda text: "5\n"),
     {"checks": ALPHA, "judge": ALPHA, "result": ALPHA}, 0, 2, "host_inputs.expected.txt changed"),
    ("hook network", _evaluation(lambda d: d["security_policy"].update(network_access="allow")),
     {"checks": EVERY, "judge": EVERY, "result": EVERY}, 0, 0, "policy.network_access 'deny' -> 'allow'"),
    ("one model's override", lambda ws: ws.edit("run_profiles/rp.yaml", lambda d: d.update(
        model_overrides={"m1": {"max_tokens": 100}})),
     {k: {"alpha/m1", "beta/m1"} for k in ("run", "checks", "judge", "result")}, 2, 2, "runner.max_tokens added (100)"),
    # (how long claw waits and how often it asks again: their failures are never reused, so no result depends on them)
    ("runner timeout and retries", lambda ws: ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(
        timeout_seconds=60, retries=4)), NOTHING, 0, 0, None),
    ("judge base_url", _evaluation(lambda d: d["judges"][0].update(base_url=_localhost())),
     {"judge": EVERY, "result": EVERY}, 0, 4, "judge.endpoint.base_url"),
    # (nor how long claw waits for the judge, how often it asks again: session 75)
    ("judge timeout and retries", _evaluation(lambda d: d["judges"][0].update(timeout_seconds=60, retries=4)),
     NOTHING, 0, 0, None),
    # (a rubric the judge's prompt does not show: a scale with neither anchors, criteria nor instructions, an empty
    # one, blank instructions; session 75)
    ("a rubric's scale alone", _case(lambda d: d.update(rubric={"scale": {"min": 1, "max": 5}})), NOTHING, 0, 0, None),
    ("a rubric shown nothing", _case(lambda d: d.update(rubric={"scoring_instructions": "  \n"})), NOTHING, 0, 0,
     None),
    ("a rubric's criterion", _case(lambda d: d.update(rubric={"criteria": [{
        "name": "colour", "what_good_looks_like": "a colour", "what_bad_looks_like": "no colour"}]})),
     {"judge": {"beta/m1", "beta/m2"}, "result": {"beta/m1", "beta/m2"}}, 0, 2, "target.rubric"),
]


@pytest.mark.parametrize(("edit", "executes", "subject", "judged", "explained"),
                         [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_an_edit_rebuilds_what_reads_it(rebuild: Rebuild, edit: Callable[[Workspace], None], executes: Layers,
                                        subject: int, judged: int, explained: str | None) -> None:
    edit(rebuild.ws)
    assert rebuild.executes() == executes
    code, out, err = rebuild.claw(*EXPLAIN)
    assert code == 0, out + err
    if explained is None:
        assert "everything is fresh" in out, out
    else:
        assert explained in out, out
    assert rebuild.build() == (subject, judged)
    assert rebuild.executes() == NOTHING


def test_the_api_key_rebuilds_nothing_the_base_url_everything(
        rebuild: Rebuild, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-v1-another-key-of-the-same-account-0123456789")
    assert rebuild.executes() == NOTHING
    monkeypatch.setenv("OPENROUTER_BASE_URL", _localhost())
    every = {"run": EVERY, "checks": EVERY, "judge": EVERY, "result": EVERY}
    assert rebuild.executes() == every
    assert "model.endpoint.base_url" in rebuild.claw(*EXPLAIN)[1]
    assert rebuild.build() == (4, 4)


def test_a_file_the_hook_reads_changes_its_result(rebuild: Rebuild) -> None:
    """The hook may read its case's directory (docs/evaluation.md, What a hook may read): a file there it reads is
    an input of the checks. Before session 74 only the hook's own file was: the edit below rebuilt nothing, and the
    result kept the check outcome of the old file."""
    (rebuild.ws.configs / "cases" / "alpha" / "expected.txt").write_text("5\n")
    assert rebuild.build() == (0, 2)
    # the first build's, and the one this edit made
    assert rebuild.check_messages("hook") == {"wanted 4", "wanted 5"}


def test_runs_keyed_with_their_timeout_and_retries_are_reused(
        built: tuple[StandIn, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose runs the claw before session 74 keyed with `timeout_seconds` and `retries`: this claw finds them
    under that key (status says fresh, the build sends nothing) and records them under its own, which the next edit of
    either setting leaves as it is."""
    standin, root = built
    old = old_clawstore(tmp_path / "old", KEYED_WITH_HARNESS_SETTINGS)
    shutil.copytree(root / "ws", tmp_path / "ws", symlinks=True)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path / "ws")
    ws, claw = Workspace(tmp_path / "ws"), Claw(tmp_path / "ws")
    rebuild = Rebuild(standin, ws, claw)
    ws.edit("evaluation_profiles/ev.yaml", lambda d: d["judge_runs"][0].update(repetitions=1))
    before = len(standin.requests)
    made = old_claw(old, ws.root, "build", "--suite", "main", "--run-profile", "rp", *EV)
    assert made.returncode == 0, made.stdout + made.stderr
    assert len(standin.requests) == before + 8  # 4 runs, 4 judgements
    # (alpha's checks run again, once: its hook's case directory entered their key in the same session; free, and
    # their results are the same, so its judgements are reused)
    assert rebuild.executes() == {"checks": ALPHA, "judge": ALPHA, "result": ALPHA}
    assert "run m" not in claw(*EXPLAIN)[1]
    assert rebuild.build() == (0, 0)
    ws.edit("run_profiles/rp.yaml", lambda d: d["runner_defaults"].update(timeout_seconds=60, retries=4))
    assert rebuild.executes() == NOTHING
    assert rebuild.build() == (0, 0)


def test_a_run_batch_an_older_claw_submitted_is_collected_not_sent_again(
        standin: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs the claw before session 74 sent by provider batch, keyed with `timeout_seconds` and `retries`, still
    pending when this claw builds: collected under that key, not submitted (paid) a second time."""
    old = old_clawstore(tmp_path / "old", KEYED_WITH_HARNESS_SETTINGS)
    ws = standard(tmp_path / "ws")
    for name, value in {"OPENROUTER_API_KEY": SECRET, "OPENROUTER_BASE_URL": standin.base_url,
                        "CLAW_STORE": str(tmp_path / "store"), "CLAW_BATCH_POLL_S": "0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(ws.root)
    standin.batch_settings(delay=60)
    made = old_claw(old, ws.root, "build", "--suite", "main", "--run-profile", "rp", "--batch")
    assert made.returncode == 0, made.stdout + made.stderr
    submitted = standin.batch_stats()
    assert submitted["lines"] == 4 and submitted["batches"] == 2  # (one a model)
    standin.batch_settings(delay=0)
    code, out, err = Claw(ws.root).build("--batch", "--wait", "--output", "json")
    assert code == 0, out + err
    assert {(r["run"], r["status"]) for r in json.loads(out)["rows"]} == {("exec", "success")}
    assert {k: standin.batch_stats()[k] for k in ("lines", "batches")} == {"lines": 4, "batches": 2}
    assert standin.requests == []
    code, out, err = Claw(ws.root).build("--output", "json")  # and found under its key now
    assert {r["run"] for r in json.loads(out)["rows"]} == {"reuse"} and standin.requests == []
