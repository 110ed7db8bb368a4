"""After an edit of some cases, `status`, `explain`, `build --dry-run` and `plan` plan those cases alone and take every
other case's answer from the build's stamp (builder/casestamp.py): the same bytes as the whole campaign planned.

Real in-process `claw` commands on a workspace built against the stand-in provider. Each answer per case is compared
with the full plan's (the per-case path turned off), text and JSON, and the per-case path is shown to have answered
(its split seen, with the cases it planned).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import casestamp
from clawstore.builder import stamp as stamps
from clawstore.builder.stamp import STAMPS_DIR
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.stamps import wait_out_racy_window
from tests.support.workspace import Workspace, write_yaml

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
MODELS = ["m1", "m2", "m3"]
COMMANDS = [("status", "text"), ("status", "json"), ("explain", "text"), ("explain", "json"),
            ("build --dry-run", "text"), ("plan", "text"), ("plan", "json")]
SHARED = "../shared/notes.txt"  # an attachment two cases name, outside both their directories


# The stamp's racy window for these in-process commands: 0.5 s instead of 2 s (RACY_NS), still ~100 times the file
# system's timestamp tick. These tests are about what a stamp answers per case, not about the window (that is
# test_noop_stamp's test_no_stamp_for_configs_written_within_the_granularity_window, at the real 2 s); each of their
# nine wait_out_racy_window calls slept up to 2 s (~15 s of the file's ~30).
WINDOW_NS = 500_000_000


@pytest.fixture(autouse=True)
def short_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "RACY_NS", WINDOW_NS)  # (what a build's stamp.write reads, and wait_out_racy_window)


def _campaign(ws: Workspace, standin: StandIn) -> None:
    """Ten cases × three models × two repetitions, judged three times each; c02 reads its question from a `source:`
    file, c04 and c08 attach a file kept outside their directories; replies of varied length (so the plan's
    estimates, whose sums depend on the order they are added in, vary)."""
    rng = random.Random(11)
    for index in range(10):
        extra: dict[str, Any] = {}
        if index == 2:
            extra["input"] = {"messages": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "source": {"path": "messages/ask.yaml"}}]}
        ws.case(f"c{index:02d}", f"Question {index}: " + "word " * rng.randint(1, 30), **extra)
        if index in (4, 8):
            ws.edit(f"cases/c{index:02d}/test.yaml", lambda doc: doc["input"].update(attachments=[SHARED]))
    write_yaml(ws.configs / "cases" / "c02" / "messages" / "ask.yaml", [{"role": "user", "content": "Question 2?"}])
    (ws.configs / "cases" / "shared").mkdir()
    (ws.configs / "cases" / "shared" / "notes.txt").write_text("Notes, first version.\n")
    ws.suite("main", MODELS)
    ws.run_profile(repetitions=2, concurrency=4)
    eval_profile(ws)
    for model in MODELS:
        standin.script(f"vendor/{model}", *[text("answer " * rng.randint(1, 30)) for _ in range(400)])
    standin.script(JUDGE, *[judge_reply(rng.choice([4.0, 6.5, 7.0, 9.0])) for _ in range(3000)])


class Split:
    """The per-case path's answers, seen: the cases each split planned (None: it did not answer)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[list[str] | None] = []
        self.off = False
        real = casestamp.split

        def spy(*args: Any) -> casestamp.ByCase | None:
            found = None if self.off else real(*args)
            self.seen.append(None if found is None else found.campaign.case_ids)
            return found

        monkeypatch.setattr(casestamp, "split", spy)


def _answers(claw: Claw) -> dict[tuple[str, str], tuple[int, str, str]]:
    return {(command, output): claw(*command.split(), *CAMPAIGN, "--output", output) for command, output in COMMANDS}


def _same_as_full(claw: Claw, split: Split, planned: list[str]) -> dict[tuple[str, str], tuple[int, str, str]]:
    """Every command's answer per case, checked to be the full plan's; each answered per case, planning `planned`."""
    split.seen.clear()
    by_case = _answers(claw)
    assert split.seen == [planned] * len(COMMANDS), split.seen  # (each asked once, and it answered)
    split.off = True
    full = _answers(claw)
    split.off = False
    for key in by_case:
        assert by_case[key] == full[key], key
    return by_case


def test_read_commands_after_an_edit_of_some_cases_plan_those_alone_and_print_what_the_full_plan_prints(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    _campaign(ws, standin)
    assert claw.build(*CAMPAIGN[4:])[0] == 0
    wait_out_racy_window(ws.root)
    code, _, err = claw.build(*CAMPAIGN[4:])
    assert code == 0, err
    stamp = json.loads(next((store / STAMPS_DIR).glob("*.json")).read_text())
    assert stamp["format"] == 3 and [case_id for case_id, _ in stamp["cases"]["files"]] == [
        "alpha", "beta", *(f"c{i:02d}" for i in range(10))]  # (the standard workspace's two, then these)
    assert stamp["cases"]["layers"][0] == ["m1", {"run": 2, "checks": 2, "judge": 6, "result": 2}]
    split = Split(monkeypatch)
    fresh = _answers(claw)
    assert split.seen == [] and fresh[("explain", "text")][1] == "everything is fresh (main__rp__ev)\n"

    # An edit in place of the same size, its mtime put back: c03 alone is planned; its runs and all they feed stale.
    case = ws.configs / "cases" / "c03" / "test.yaml"
    before = case.stat()
    case.write_text(case.read_text().replace("Question 3:", "Question 9:"))
    os.utime(case, ns=(before.st_atime_ns, before.st_mtime_ns))
    edited = _same_as_full(claw, split, ["c03"])
    assert "m1     run     22     2      0       0" in edited[("status", "text")][1]
    assert edited[("build --dry-run", "text")][1].endswith(
        "36 node(s) would execute (6 runs, 6 checks, 18 judgements, 6 results), 396 fresh (main__rp__ev)\n")
    assert json.loads(edited[("plan", "json")][1])["requests"] == 6 + 18
    # A new case (never built) beside it; then c05 removed (the stamp answers for the others: nothing planned of it).
    ws.case("c10", "A new question?")
    _same_as_full(claw, split, ["c03", "c10"])
    shutil.rmtree(ws.configs / "cases" / "c05")
    removed = _same_as_full(claw, split, ["c03", "c10"])
    assert "396 fresh" not in removed[("build --dry-run", "text")][1]
    # The shared attachment: both cases naming it; a `source:` file: its case.
    _restamp_after_building(ws, claw)
    (ws.configs / "cases" / "shared" / "notes.txt").write_text("Notes, second version.\n")
    attached = _same_as_full(claw, split, ["c04", "c08"])
    assert "run m1 c04 rep 0 (stale)" in attached[("explain", "text")][1]
    _restamp_after_building(ws, claw)
    write_yaml(ws.configs / "cases" / "c02" / "messages" / "ask.yaml", [{"role": "user", "content": "Question 22?"}])
    _same_as_full(claw, split, ["c02"])
    # Only a removal: nothing to plan, the stamp answers for every case left.
    _restamp_after_building(ws, claw)
    shutil.rmtree(ws.configs / "cases" / "c06")
    only_removed = _same_as_full(claw, split, [])
    assert only_removed[("explain", "text")][1] == "everything is fresh (main__rp__ev)\n"


def _restamp_after_building(ws: Workspace, claw: Claw) -> None:
    """Build what the edits made stale, then leave a stamp of the workspace as it is."""
    assert claw.build(*CAMPAIGN[4:])[0] == 0
    wait_out_racy_window(ws.root)
    assert claw.build(*CAMPAIGN[4:])[0] == 0


def test_anything_but_case_files_takes_the_full_path(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile edited, a stamp of the older format, a judge prompt kept among the cases: no answer per case (every
    case depends on them). A case whose id another case's file now declares is planned."""
    _campaign(ws, standin)
    assert claw.build(*CAMPAIGN[4:])[0] == 0
    _restamp_after_building(ws, claw)
    split = Split(monkeypatch)
    ws.run_profile(repetitions=2, concurrency=4, title="Retitled")  # (not in any key: every node still fresh)
    answers = _answers(claw)
    assert split.seen == [None] * len(COMMANDS)
    assert answers[("explain", "text")][1] == "everything is fresh (main__rp__ev)\n"
    _restamp_after_building(ws, claw)
    stamp = next((Path(env["CLAW_STORE"]) / STAMPS_DIR).glob("*.json"))
    doc = json.loads(stamp.read_text())
    case = ws.configs / "cases" / "c01" / "test.yaml"
    case.write_text(case.read_text().replace("Question 1:", "Question 0:"))
    older = {**doc, "format": 2}
    del older["cases"]
    stamp.write_text(json.dumps(older))
    split.seen.clear()
    _answers(claw)
    assert split.seen == []  # (an older stamp does not match at all: never asked)
    stamp.write_text(json.dumps(doc))
    # A judge prompt kept in a case's directory: what every judgement depends on, so the full path.
    (ws.configs / "cases" / "c01" / "judge.md").write_text("Judge strictly.\n")
    eval_profile(ws, judge_system_prompt=None, judge_system_prompt_path="../cases/c01/judge.md")
    _restamp_after_building(ws, claw)
    (ws.configs / "cases" / "c01" / "judge.md").write_text("Judge kindly.\n")
    split.seen.clear()
    answers = _answers(claw)
    assert split.seen == [None] * len(COMMANDS) and "judge m1 c05 rep 0" in answers[("explain", "text")][1]
    _restamp_after_building(ws, claw)
    doc = json.loads(stamp.read_text())
    # c01's file now declares c00's id: c00 comes of another file than the stamp's, so it is planned too.
    ws.edit("cases/c01/test.yaml", lambda d: d.update(case_id="c00"))
    shutil.rmtree(ws.configs / "cases" / "c00")
    split.seen.clear()
    _same_as_full(claw, split, ["c00"])
