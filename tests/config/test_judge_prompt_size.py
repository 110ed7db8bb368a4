"""A judge's system prompt file is bounded as a config file is (4 MiB), refused by `claw validate` naming the file and
`judge_system_prompt_path`: it is sent with every judgement. Before session 72 it was read whole whatever its size (a
50 MB one validated), and each judgement sent it, after the runs it judges were paid for."""

from __future__ import annotations

from tests.support.claw import Claw
from tests.support.judging import eval_profile
from tests.support.workspace import Workspace


def _prompt(ws: Workspace, size: int) -> None:
    eval_profile(ws, repetitions=1)
    prompts = ws.configs / "evaluation_profiles/prompts"
    prompts.mkdir(parents=True, exist_ok=True)
    (prompts / "judge.md").write_text("Judge. " + "x" * (size - 7), encoding="utf-8")
    ws.edit("evaluation_profiles/ev.yaml", lambda doc: (doc.pop("judge_system_prompt"),
                                                        doc.update({"judge_system_prompt_path": "prompts/judge.md"})))


def test_a_judge_prompt_past_the_limit_is_refused(ws: Workspace, claw: Claw) -> None:
    _prompt(ws, 4 * 2**20 + 1)
    line = claw.one_config_error()
    assert line == ("configs/evaluation_profiles/ev.yaml: judge_system_prompt_path: prompts/judge.md: file is larger "
                    "than 4,194,304 bytes (the limit for config files)"), line


def test_a_judge_prompt_at_the_limit_validates(ws: Workspace, claw: Claw) -> None:
    _prompt(ws, 4 * 2**20)
    code, out, err = claw("validate")
    assert code == 0, out + err
