"""The in-flight limit (clawstore/builder/inflight.py) against the real llama.cpp server: a real model's latency bounds
the build's throughput, not claw's CPU, so the build keeps every slot of max_concurrency it may use and the limit never
moves (no `in_flight` event in its JSON progress); every run answered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.realserver.campaign import judged_workspace
from tests.realserver.relay import Relay
from tests.support.claw import Claw

CASES = {f"case{i}": f"Say the number {i}." for i in range(400)}  # (seconds: windows enough to move the limit)


def test_a_real_server_keeps_the_builds_full_width(tmp_path: Path, relay: Relay, server_env: None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = judged_workspace(tmp_path / "ws", relay.base_url, CASES, concurrency=4)
    monkeypatch.chdir(workspace.root)
    code, out, err = Claw(workspace.root).build("--progress", "json")
    assert code in (0, 1), out + err  # (1: a judge's verdict may fail a tiny model's answer: an outcome)
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert sum(e["event"] in ("finished", "failed") and e["kind"] == "run" for e in events) == len(CASES), err[-2000:]
    assert [e for e in events if e["event"] == "in_flight"] == []
    assert len(relay.chats()) >= len(CASES)  # (each run answered by the real server)
