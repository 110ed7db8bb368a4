"""`claw report`'s chart drawn by a process forked when the command starts, before the store is opened (no thread yet
to fork with): it imports matplotlib (about 0.8 s of CPU, a sixth of a 50,000-run report) on the other core while
this one builds the report, then draws the chart it is sent. Linux only; elsewhere, and when the fork or the drawer
fails (killed, out of memory), the chart is drawn here as before. Same PNG either way
(tests/query/test_chart_beside.py)."""

from __future__ import annotations

import dataclasses
import glob
import os
import pickle
import signal
from pathlib import Path
from typing import Any

from clawstore.errors import UsageError
from clawstore.host.beside import Beside
from clawstore.report.chart import NoScoresError, write_chart
from clawstore.report.data import CampaignReport


class ChartBeside(Beside):
    """A forked drawer: `draw` sends it the report (its summaries: the chart reads no row), `close` ends it. Not
    `fork`: none, the chart is drawn here (a process running many commands keeps matplotlib imported once)."""

    def __init__(self, fork: bool = True) -> None:
        super().__init__(_drawer, fork)
        self._asked: Path | None = None  # the chart the drawer was sent

    def draw(self, report: CampaignReport, path: Path) -> Path:
        """write_chart(report, path), by the drawer when it answers (its NoScoresError or UsageError raised here);
        drawn here when it does not."""
        self._asked = path
        answer = self._ask(dataclasses.replace(report, rows=[], spilled=None), path)
        self.close()
        if answer is None:
            return write_chart(report, path)
        kind, value = answer
        if kind == "nothing":
            raise NoScoresError(value)
        if kind == "usage":
            raise UsageError(value)
        return Path(value)

    def close(self) -> None:
        """End the drawer (killed if still at work) and remove the temp file it was writing the chart into, if any: a
        drawer ended mid-write (Ctrl-C reaches it too, and it dies of it; the command's end kills it) runs no cleanup,
        and its `.<chart>.<pid>-….tmp` stayed beside the chart (before session 72)."""
        pid = self._pid
        super().close()  # (reaped: no process of that pid writes there any more)
        if pid is not None and self._asked is not None:
            pattern = f".{glob.escape(self._asked.name)}.{pid}-*.tmp"
            for left in self._asked.parent.glob(pattern):
                left.unlink(missing_ok=True)

    def _ask(self, summaries: CampaignReport, path: Path) -> tuple[str, str] | None:
        if self._send is None or self._answers is None:
            return None
        try:
            pickle.dump((summaries, path), self._send)
            self._send.close()
            answer = pickle.load(self._answers)
        except Exception:  # noqa: BLE001 - the drawer gone (EOF, a broken pipe), or a value that does not pickle
            return None
        return answer if isinstance(answer, tuple) and answer[0] in ("drawn", "nothing", "usage") else None


def _drawer(requests: int, answers: int) -> None:
    """The forked process: import matplotlib, draw what it is sent, say how it went, exit without running the
    command's cleanup (os._exit: the parent's atexit hooks and buffers are the parent's)."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot  # noqa: F401 - imported before the report arrives: the point of this process

        with os.fdopen(requests, "rb") as source:
            try:
                report, path = pickle.load(source)
            except EOFError:
                return  # (no chart wanted after all)
        answer: tuple[str, Any]
        try:
            answer = ("drawn", str(write_chart(report, path)))
        except NoScoresError as exc:
            answer = ("nothing", str(exc))
        except UsageError as exc:
            answer = ("usage", str(exc))
        with os.fdopen(answers, "wb") as sink:
            pickle.dump(answer, sink)
    except BaseException:  # noqa: BLE001 - anything else: the parent draws the chart itself and says what failed
        code = 1
    finally:
        os._exit(code)
