"""The `source:` files one case's messages (or turns) name are bounded in total, as each file is (4 MiB): a 4 MiB
test.yaml can name one 4 MiB source 100,000 times, 400 GB of messages. Before session 72 each mention was read and held
again: 4,000 mentions of a 100 KB source took `claw validate` 22 s and 440 MB, growing with them (and `claw plan` more).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _case_naming(ws: Workspace, times: int, field: str = "messages") -> Path:
    directory = ws.configs / "cases/alpha"
    (directory / "big.yaml").write_text("content: " + "x" * 100_000 + "\n", encoding="utf-8")
    ws.edit("cases/alpha/test.yaml", lambda doc: doc["input"].update(
        {field: [{"role": "user", "source": {"path": "big.yaml"}}] * times}))
    return directory


def test_a_source_named_past_the_total_is_refused(ws: Workspace, claw: Claw) -> None:
    _case_naming(ws, 400)  # 40 MB of messages
    line = claw.one_config_error()
    assert line.startswith("configs/cases/alpha/test.yaml: input.messages[335].source: "), line
    assert "more than 32 MiB" in line, line


def test_turns_are_bounded_too(ws: Workspace, claw: Claw) -> None:
    _case_naming(ws, 400, "turns")
    code, out, err = claw("validate")
    assert code == 2, out + err
    assert "configs/cases/alpha/test.yaml: input.turns[335].source: " in out + err


def test_a_source_named_often_within_the_total_validates(ws: Workspace, claw: Claw) -> None:
    _case_naming(ws, 50)  # 5 MB: a file named 50 times
    code, out, err = claw("validate")
    assert code == 0, out + err
