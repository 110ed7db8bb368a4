"""`claw report`'s chart drawn by a process forked when the command starts (report/chart_beside.py): the same PNG as
drawn in the command's own process, the same refusals, and drawn here when the drawer is gone."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.errors import UsageError
from clawstore.report import chart_beside
from clawstore.report.chart import NoScoresError, write_chart
from clawstore.report.chart_beside import ChartBeside
from clawstore.report.data import CampaignReport, build_report
from clawstore.store import Store
from tests.query.campaigns import Spec, build

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the drawer is forked on Linux only")
MODELS = ["openai/gpt-a", "anthropic/claude-b"]


@pytest.fixture
def report(tmp_path: Path) -> CampaignReport:
    store = Store(tmp_path / "store")
    build(store, Spec(models=MODELS))
    return build_report(store, "suite_a__std__judge_x")


def _refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process may not draw: a chart that is written was drawn by the drawer."""
    def refused(*_: object) -> Path:
        raise AssertionError("drawn by the command's process")

    monkeypatch.setattr(chart_beside, "write_chart", refused)


def test_the_drawer_draws_the_chart_this_process_would(report: CampaignReport, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    here = write_chart(report, tmp_path / "here.png")
    drawer = ChartBeside()  # (forked before write_chart is refused here)
    _refused(monkeypatch)
    assert drawer.draw(report, tmp_path / "sub" / "beside.png") == tmp_path / "sub" / "beside.png"
    assert (tmp_path / "sub" / "beside.png").read_bytes() == here.read_bytes()


def test_a_drawer_killed_leaves_the_chart_to_this_process(report: CampaignReport, tmp_path: Path) -> None:
    drawer = ChartBeside()
    assert drawer._pid is not None
    os.kill(drawer._pid, signal.SIGKILL)
    drawer.draw(report, tmp_path / "beside.png")
    assert (tmp_path / "beside.png").read_bytes() == write_chart(report, tmp_path / "here.png").read_bytes()


def test_what_the_drawer_refuses_is_refused_as_here(report: CampaignReport, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    unscored = dataclasses.replace(report, models=[])
    blocker = tmp_path / "file"
    blocker.write_text("")
    drawers = [ChartBeside(), ChartBeside()]
    _refused(monkeypatch)
    with pytest.raises(NoScoresError, match="no model in this campaign has a final score"):
        drawers[0].draw(unscored, tmp_path / "none.png")
    with pytest.raises(UsageError, match=f"--chart {blocker / 'c.png'}: "):
        drawers[1].draw(report, blocker / "c.png")  # (under a file: the drawer's OSError, said as here)


def test_a_drawer_not_asked_is_ended_and_reaped(tmp_path: Path) -> None:
    drawer = ChartBeside()
    pid = drawer._pid
    assert pid is not None
    drawer.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # (reaped: no child of that id is left)
    drawer.close()  # (twice: nothing to end)



def test_a_caller_s_process_draws_the_chart_itself(tmp_path: Path) -> None:
    """CliRunner (a process running many commands, as the tests): no drawer; the `claw` program's fork is
    test_report.py's test_default_chart_path_in_a_real_process."""
    store = Store(tmp_path / "store")
    build(store, Spec(models=MODELS))
    flags = ["report", "--suite", "suite_a", "--run-profile", "std", "--evaluation-profile", "judge_x",
             "--store", str(store.root), "--chart", str(tmp_path / "d.png")]
    made: list[bool] = []
    real = ChartBeside.__init__

    def init(self: ChartBeside, fork: bool = True) -> None:
        real(self, fork)
        made.append(self._pid is not None)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChartBeside, "__init__", init)
        result = CliRunner().invoke(main, flags)
    assert result.exit_code == 0, result.stderr
    assert made == [False] and (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"


def test_a_report_that_does_not_pickle_is_drawn_here(report: CampaignReport, tmp_path: Path) -> None:
    odd = dataclasses.replace(report, untrusted_signer=None, judge_reliability=[threading.Lock()])  # type: ignore[list-item]
    drawer = ChartBeside()
    drawer.draw(odd, tmp_path / "here.png")
    assert (tmp_path / "here.png").read_bytes() == write_chart(report, tmp_path / "again.png").read_bytes()


def test_a_drawer_ended_mid_write_leaves_no_temp_file(report: CampaignReport, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C reaches the drawer too, and it dies of it (its SIGINT is SIG_DFL) while it writes the PNG: no cleanup ran,
    # and `.c.png.<pid>-….tmp` stayed beside the chart (session 72: `claw report --chart` interrupted).
    from matplotlib.figure import Figure

    def half_then_hang(self: Figure, target: Any, **_: object) -> None:
        target.write(b"\x89PNG half a chart")
        target.flush()
        time.sleep(60)

    monkeypatch.setattr(Figure, "savefig", half_then_hang)
    drawer = ChartBeside()  # (forked now: its savefig hangs mid-write)
    assert drawer._pid is not None
    _refused(monkeypatch)  # (the chart drawn here instead: refused, the thread ends with it)
    out = tmp_path / "c.png"
    failed: list[BaseException] = []

    def draw() -> None:
        try:
            drawer.draw(report, out)
        except BaseException as exc:  # noqa: BLE001 - what the thread met, looked at below
            failed.append(exc)

    asking = threading.Thread(target=draw)
    asking.start()
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".c.png.*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert list(tmp_path.glob(".c.png.*")), "the drawer never began the chart"
    os.kill(drawer._pid, signal.SIGINT)
    asking.join(60)
    assert not asking.is_alive() and isinstance(failed[0], AssertionError), failed  # (drawn here: refused)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
