"""A first Ctrl-C (or SIGTERM) anywhere in a build's windows is noted and taken up at the next safe point — a node's
end, a window's start — not raised in the middle of the bookkeeping it lands in; a second one raises at once. Before
session 51 one landing between two windows (planning the next, concluding the last) cut that work short."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.builder import engine
from clawstore.builder.engine import BuildReport
from clawstore.builder.eval_layer import EvalLayer
from clawstore.graph import plan as graph_plan
from clawstore.graph.plan import Node
from tests.builder.test_build_memory import _build, _workspace, env  # noqa: F401 - env: the stand-in fixture

WINDOW = 4  # runs a window: 6 cases x 2 models make three


def _interrupt_in_window_end(monkeypatch: pytest.MonkeyPatch, signals: int) -> tuple[list[int], list[str]]:
    """SIGINT sent `signals` times while the first window's results are taken in (the build's own thread, between
    two windows' executions); returns the runs of each window taken in whole and each layer's executed nodes."""
    monkeypatch.setattr(graph_plan, "WINDOW_RUNS", WINDOW)
    taken: list[int] = []
    executed: list[str] = []
    add_window, execute, checks = engine.BuildReport.add_window, engine._Windowed._execute, EvalLayer._exec_checks

    def interrupted(self: BuildReport, runs: list[Node], evaluations: Any) -> None:
        if not taken:
            for _ in range(signals):
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # (delivered here, before the window is taken in)
        add_window(self, runs, evaluations)
        taken.append(len(runs))

    def executing(self: Any, nodes: list[Node]) -> None:
        execute(self, nodes)
        executed.extend(node.kind for node in nodes if node.action == "exec")

    def checking(self: EvalLayer, *args: Any, **kwargs: Any) -> Any:
        executed.append("checks")
        return checks(self, *args, **kwargs)

    monkeypatch.setattr(engine.BuildReport, "add_window", interrupted)
    monkeypatch.setattr(EvalLayer, "_exec_checks", checking)
    monkeypatch.setattr(engine._Windowed, "_execute", executing)
    return taken, executed


def test_a_first_interrupt_between_windows_lets_the_window_end_then_stops(
        tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    ws = _workspace(tmp_path / "ws", 6)
    taken, executed = _interrupt_in_window_end(monkeypatch, signals=1)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt, match="interrupted: .* the next build resumes from here"):
        _build(ws, said)
    assert taken == [WINDOW]  # the first window taken in whole; none after it
    # windows 1 and 2 ran (window 2's runs beside window 1's judges), nothing after the interrupt: not window 2's
    # checks (the next step, in this thread), nor its judges, nor window 3's runs
    assert executed.count("run") == 2 * WINDOW and executed.count("judge") == WINDOW
    assert executed.count("checks") == WINDOW
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back

    monkeypatch.setattr(engine._Windowed, "_execute", engine._Windowed._execute)
    report = _build(ws, said)  # the next build resumes: what the first finished is not paid again
    assert report.exit_code == 0, said
    assert report.counts["executed"] + report.counts["reused"] == 6 * 2 * 4


def test_a_second_interrupt_between_windows_stops_at_once(
        tmp_path: Path, env: None, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    ws = _workspace(tmp_path / "ws", 6)
    taken, executed = _interrupt_in_window_end(monkeypatch, signals=2)
    with pytest.raises(KeyboardInterrupt):
        _build(ws, [])
    assert taken == []  # raised where the second landed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
