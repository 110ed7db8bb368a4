"""The chart file is written as the other outputs are (report/chart.py): beside and renamed into place, so a disk that
fills mid-write leaves the old chart whole and no torn PNG, and a pipe, device or symlink at the path is refused
instead of blocking the report or being replaced."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from clawstore.errors import UsageError
from clawstore.report.chart import write_chart
from clawstore.report.data import CampaignReport, build_report
from clawstore.store import Store
from tests.query.campaigns import Spec, build


@pytest.fixture
def report(tmp_path: Path) -> CampaignReport:
    store = Store(tmp_path / "store")
    build(store, Spec(models=["openai/gpt-a", "anthropic/claude-b"]))
    return build_report(store, "suite_a__std__judge_x")


def test_a_full_disk_mid_write_leaves_the_old_chart_whole(report: CampaignReport, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "charts" / "c.png"
    old = write_chart(report, out).read_bytes()
    assert old.startswith(b"\x89PNG")

    def half_then_full(self: Figure, target: object, **_: object) -> None:
        target.write(b"\x89PNG half a chart")  # type: ignore[attr-defined]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Figure, "savefig", half_then_full)
    with pytest.raises(UsageError, match=f"--chart {out}: No space left on device"):
        write_chart(report, out)
    assert out.read_bytes() == old
    assert sorted(p.name for p in out.parent.iterdir()) == ["c.png"]  # no temp file left


def test_a_pipe_or_a_symlink_at_the_path_is_refused(report: CampaignReport, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="not a regular file"):
        write_chart(report, fifo)  # (before: "--chart …: None", an OSError without its text)
    target = tmp_path / "elsewhere.png"
    target.write_bytes(b"keep")
    link = tmp_path / "link.png"
    link.symlink_to(target)
    with pytest.raises(UsageError, match="not a regular file"):
        write_chart(report, link)
    assert target.read_bytes() == b"keep" and link.is_symlink()
