"""A `source:` file whose message mapping has no `content` (a typo: `contnet:`) is accepted as the schema says (the
content empty, the other keys metadata), but `claw validate` and a build's config load say so in one warning line
naming the file, the message and the keys, so the typo is seen. The exit code is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.workspace import Workspace

SOURCED = {"role": "user", "source": {"path": "msgs.yaml"}}


def _sourced_case(ws: Workspace, text: str) -> Path:  # noqa: F811
    path = ws.case("alpha", "What is 2 + 2?", input={"messages": [{"role": "system", "content": "Be brief."},
                                                                   SOURCED]})
    (path.parent / "msgs.yaml").write_text(text)
    return path


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_validate_warns_of_a_message_without_content(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    _sourced_case(ws, "- role: user\n  content: fine\n- role: user\n  contnet: What is 2 + 2?\n  lang: en\n")
    code, out, err = claw("validate")
    assert code == 0, out + err
    assert out.startswith("OK:")
    [line] = _warnings(err)
    assert "configs/cases/alpha/test.yaml" in line and "input.messages[1]" in line
    assert "msgs.yaml: [1]" in line and "contnet, lang" in line, line


def test_validate_json_lists_the_warning(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    _sourced_case(ws, "role: user\ncontnet: hi\n")
    code, out, err = claw("validate", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["ok"] is True
    [warning] = doc["warnings"]
    assert warning["path"] == "configs/cases/alpha/test.yaml" and warning["field"] == "input.messages[1]"
    assert "contnet" in warning["message"]


@pytest.mark.parametrize("text", ["role: user\ncontent: hi\nlang: en\n", "just a string\n",
                                  "- role: user\n  content: ''\n"])
def test_a_message_with_content_gives_no_warning(ws: Workspace, claw: Claw, text: str) -> None:  # noqa: F811
    _sourced_case(ws, text)
    code, out, err = claw("validate")
    assert code == 0 and not _warnings(err), err


def test_a_build_warns_once(ws: Workspace, claw: Claw, standin: StandIn) -> None:  # noqa: F811
    _sourced_case(ws, "role: user\ncontnet: hi\n")
    code, out, err = claw.build()
    assert code == 0, err
    [line] = _warnings(err)  # (two models, one warning)
    assert "msgs.yaml" in line and "contnet" in line
    ws.case("beta", "Name a colour.", tags=["other"])
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp", "--case", "beta")
    assert code == 0 and not _warnings(err), err  # (a campaign without that case is not told of it)
