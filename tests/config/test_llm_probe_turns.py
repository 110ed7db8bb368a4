"""`input.turns` on an llm_probe case: the reference calls turns OpenClaw-only and the old system ignores them there,
so the case is valid — but a user paying for a multi-turn probe would otherwise never learn that only
`input.messages` is sent. `claw validate` and a build's config load say it in one warning line; the exit code is
unchanged, and the requests the stand-in receives carry the messages alone."""

from __future__ import annotations

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw, claw, env, ws  # noqa: F401  (fixtures)
from tests.support.workspace import Workspace

TURNS = [{"role": "user", "content": "And now in French?"}]


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def test_validate_warns_that_llm_probe_sends_no_turns(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    ws.case("alpha", "Name a colour.", input={"messages": [{"role": "user", "content": "Name a colour."}],
                                              "turns": TURNS})
    code, out, err = claw("validate")
    assert code == 0, out + err
    [line] = _warnings(err)
    assert "configs/cases/alpha/test.yaml" in line and "input.turns" in line and "llm_probe" in line, line


def test_a_case_without_turns_gives_no_warning(ws: Workspace, claw: Claw) -> None:  # noqa: F811
    ws.case("alpha", "Name a colour.", input={"messages": [{"role": "user", "content": "Name a colour."}],
                                              "turns": []})
    code, out, err = claw("validate")
    assert code == 0 and not _warnings(err), err


def test_a_build_warns_and_sends_the_messages_alone(ws: Workspace, claw: Claw,  # noqa: F811
                                                    standin: StandIn) -> None:
    ws.case("alpha", "Name a colour.", input={"messages": [{"role": "user", "content": "Name a colour."}],
                                              "turns": TURNS})
    code, out, err = claw.build()
    assert code == 0, err
    [line] = _warnings(err)  # (two models, one warning)
    assert "input.turns" in line
    sent = [m.get("content") for request in standin.requests for m in request["body"]["messages"]]
    assert "Name a colour." in sent and "And now in French?" not in sent
