"""Attachments are sent "just before the first user message" (the config reference), as extra user messages. Before
session 72 claw put them right after the leading system messages, which is the same place only when a user message
comes next: a conversation opening with an assistant's greeting had the file before the greeting, not before the
user's question (a stand-in on 127.0.0.1 records what was sent)."""

from __future__ import annotations

from typing import Any

import pytest

from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def _sent(ws: Workspace, claw: Claw, standin: StandIn, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    (ws.configs / "cases/alpha/notes.txt").write_text("numbers: 1 2 3\n", encoding="utf-8")
    ws.edit("cases/alpha/test.yaml", lambda doc: doc["input"].update({"messages": messages,
                                                                     "attachments": ["notes.txt"]}))
    code, out, err = claw.build("--case", "alpha", "--model", "m1")
    assert code == 0, out + err
    [request] = [r for r in standin.requests if r["model"] == "vendor/m1"]
    return [(m["role"], m["content"][:22]) for m in request["messages"]]


ATTACHED = ("user", "Attached context file:")


@pytest.mark.parametrize(("messages", "expected"), [
    ([{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "Hello! Ask me."},
      {"role": "user", "content": "Sum them."}],
     [("system", "Be brief."), ("assistant", "Hello! Ask me."), ATTACHED, ("user", "Sum them.")]),
    ([{"role": "assistant", "content": "Hello! Ask me."}, {"role": "user", "content": "Sum them."},
      {"role": "user", "content": "Now."}],
     [("assistant", "Hello! Ask me."), ATTACHED, ("user", "Sum them."), ("user", "Now.")]),
])
def test_attachments_go_just_before_the_first_user_message(ws: Workspace, claw: Claw, standin: StandIn,
                                                           messages: list[dict[str, Any]],
                                                           expected: list[tuple[str, str]]) -> None:
    assert _sent(ws, claw, standin, messages) == expected


def test_without_a_user_message_they_follow_the_system_messages(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "assistant", "content": "Hello! Ask me."}]
    assert _sent(ws, claw, standin, messages) == [("system", "Be brief."), ATTACHED, ("assistant", "Hello! Ask me.")]
