"""An llm_probe case sends its messages (and attachments) to the model: one with neither is refused by `claw validate`
naming the file and `input.messages`. Before session 72 it validated, and every run of it ended `invalid` in the build
("the case has no input messages"), the case counted as run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.claw import Claw
from tests.support.workspace import Workspace


@pytest.mark.parametrize("given", [{}, {"messages": []}, {"messages": None, "attachments": []},
                                   {"messages": [{"role": "user", "source": {"path": "none.yaml"}}]},
                                   {"turns": [{"role": "user", "content": "Hi."}]}])
def test_an_llm_probe_case_with_nothing_to_send_is_refused(ws: Workspace, claw: Claw, given: dict[str, Any]) -> None:
    (ws.configs / "cases/alpha/none.yaml").write_text("[]\n", encoding="utf-8")
    ws.edit("cases/alpha/test.yaml", lambda doc: doc.update({"input": given}))
    line = claw.one_config_error()
    assert line.startswith("configs/cases/alpha/test.yaml: input.messages: "), line
    assert "nothing to send" in line, line


@pytest.mark.parametrize(("runner", "given"), [
    ("llm_probe", {"attachments": ["notes.txt"]}),
    ("llm_probe", {"messages": [{"role": "user", "source": {"path": "one.yaml"}}]}),
    ("openclaw", {"turns": [{"role": "user", "content": "Write a.md."}]}),
])
def test_a_case_with_something_to_send_validates(ws: Workspace, claw: Claw, runner: str,
                                                 given: dict[str, Any]) -> None:
    (ws.configs / "cases/alpha/notes.txt").write_text("numbers\n", encoding="utf-8")
    (ws.configs / "cases/alpha/one.yaml").write_text("content: Hi.\n", encoding="utf-8")
    ws.edit("cases/alpha/test.yaml", lambda doc: doc.update({"input": given, "runner": {"type": runner}}))
    code, out, err = claw("validate")
    assert code == 0, out + err
