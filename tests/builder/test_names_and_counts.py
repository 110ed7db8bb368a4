"""One naming rule for every command, the runs-only campaign hint, dry-run counts by layer, and no
store left behind by a command that fails before doing its work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

EV = ("--evaluation-profile", "ev")


@pytest.fixture
def judged(ws: Workspace, standin: StandIn) -> Workspace:
    eval_profile(ws)
    standin.script(JUDGE, judge_reply(7))
    return ws


def test_a_file_stem_names_the_same_campaign_in_every_command(judged: Workspace, claw: Claw) -> None:
    # The file is named differently from its id, as the reference system names profiles.
    profiles = judged.configs / "evaluation_profiles"
    (profiles / "ev.yaml").rename(profiles / "ev_v2.yaml")
    code, out, err = claw.build("--evaluation-profile", "ev_v2", "--output", "json")
    assert code == 0, err
    assert json.loads(out)["campaign"] == "main__rp__ev"
    for by in ("ev_v2", "ev", "configs/evaluation_profiles/ev_v2.yaml"):
        code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", by,
                              "--no-chart", "--output", "json")
        assert code == 0, (by, err)
        assert json.loads(out)["campaign"]["id"] == "main__rp__ev"
        code, out, err = claw("status", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", by)
        assert code == 0 and "never been built" not in err, (by, err)
    code, out, err = claw("pin", "keep", "--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev_v2")
    assert code == 0 and "main__rp__ev" in out, err


def test_runs_only_campaign_says_which_evaluation_profile_was_meant(judged: Workspace, claw: Claw) -> None:
    assert claw.build(*EV)[0] == 0
    hint = "did you mean --evaluation-profile ev?"
    for command in ("status", "explain"):
        code, _, err = claw(command, "--suite", "main", "--run-profile", "rp")
        assert code == 0 and hint in err, (command, err)
    code, _, err = claw.build("--dry-run")
    assert code == 0 and hint in err
    for command in (("pin", "x"), ("archive", "export", "-o", "a.claw"), ("report", "--no-chart")):
        code, _, err = claw(*command, "--suite", "main", "--run-profile", "rp")
        assert code == 2 and hint in err, (command, err)
        assert err.count("\n") == 1


def test_dry_run_counts_every_node_the_build_then_executes(judged: Workspace, claw: Claw) -> None:
    def planned() -> dict[str, int]:
        code, out, err = claw.build(*EV, "--dry-run", "--output", "json")
        assert code == 0, err
        return json.loads(out)["would_execute"]

    def executed() -> dict[str, int]:
        code, out, err = claw.build(*EV, "--output", "json")
        assert code == 0, err
        return json.loads(out)["counts"]

    # 2 models x 2 cases; 3 judge repetitions each.
    assert planned() == {"runs": 4, "checks": 4, "judgements": 12, "results": 4}
    assert executed()["executed"] == 4 + 4 + 12 + 4
    judged.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    assert planned() == {"runs": 2, "checks": 2, "judgements": 6, "results": 2}
    code, out, _ = claw.build(*EV, "--dry-run")
    assert "12 node(s) would execute (2 runs, 2 checks, 6 judgements, 2 results)" in out
    assert executed()["executed"] == 12
    assert planned() == {"runs": 0, "checks": 0, "judgements": 0, "results": 0}


def test_commands_that_fail_first_leave_no_store(ws: Workspace, claw: Claw, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_STORE")
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    for command in ("build", "status", "explain"):
        code, _, err = claw(command, "--suite", "main", "--run-profile", "rp")
        assert code == 2 and "no workspace found" in err, err
    assert list(outside.iterdir()) == []
    monkeypatch.chdir(ws.root)
    monkeypatch.delenv("OPENROUTER_API_KEY")
    monkeypatch.delenv("OPENROUTER_BASE_URL")  # OpenRouter: its key is required
    code, _, err = claw.build()
    assert code == 2 and "OPENROUTER_API_KEY" in err, err
    assert not (ws.root / "store").exists()
    shutil.rmtree(outside)


def test_a_placeholder_key_is_refused_before_anything_is_written(ws: Workspace, claw: Claw,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLAW_STORE")
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-…")  # the README's placeholder, copied as is
    code, _, err = claw.build()
    assert code == 2 and "OPENROUTER_API_KEY holds non-ASCII characters" in err, err
    assert "sk-or-" not in err and not (ws.root / "store").exists()


def test_report_shows_tokens_dimensions_and_pass_fail(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    eval_profile(ws, repetitions=1, threshold=0.5)
    standin.script(JUDGE, judge_reply(3), match="What is 2 + 2?")  # alpha fails the 5/10 threshold
    standin.script(JUDGE, judge_reply(8))
    assert claw.build(*EV)[0] == 0
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", *EV, "--no-chart")
    assert code == 0, err
    case_table = out.split("Case Results\n")[1].split("\n\n")[0].splitlines()
    header = case_table[0].split()
    assert {"PASS", "TOKENS_IN", "TOKENS_OUT"} <= set(header)
    verdicts = {(row.split()[0], row.split()[1]): row.split()[header.index("PASS")] for row in case_table[2:]}
    assert verdicts == {("m1", "alpha"): "fail", ("m1", "beta"): "pass", ("m2", "alpha"): "fail",
                        ("m2", "beta"): "pass"}
    assert "Dimension Scores" in out and "SPARK" in out
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", *EV, "--no-chart", "--output", "json")
    rows = {(r["model_id"], r["case_id"]): r for r in json.loads(out)["rows"]}
    alpha = rows[("m1", "alpha")]
    assert alpha["input_tokens"] > 0 and alpha["output_tokens"] > 0 and alpha["pass_threshold"] == 0.5
    assert alpha["dimensions"]["task"] == 3.0 and rows[("m1", "beta")]["dimensions"]["spark"] == 8.0
    eval_profile(ws, repetitions=1, threshold=None)  # no threshold: no verdict column (aggregation only, no request)
    assert claw.build(*EV)[0] == 0
    code, out, err = claw("report", "--suite", "main", "--run-profile", "rp", *EV, "--no-chart")
    assert code == 0 and "PASS" not in out.split("Case Results\n")[1].splitlines()[0]
