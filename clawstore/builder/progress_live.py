"""The live build display on a terminal, drawn with rich (imported only when a terminal shows it)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from clawstore.builder.progress import BuildProgress, wait_text
from clawstore.values.costs import CostSum, usd
from clawstore.values.tokens import token_cell

REFRESH_PER_SECOND = 4


def _clock(seconds: float | None) -> str:
    return "--:--" if seconds is None else str(timedelta(seconds=int(seconds)))


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%H:%M:%S")


def _usd(value: float) -> str:
    return f"${usd(value, 4 if value >= 0.01 else 6)}"


def _spent(cost: CostSum) -> str:
    """`$?` while every cost is unknown, `≥$x` while part is, and which parts are priced or unknown."""
    amount = "$?" if cost.all_unknown else ("≥" if cost.unknown else "") + _usd(cost.known_usd)
    return amount + cost.notes()


def _tokens(known: int, unknown: int, paid: int) -> str:
    """A token total as the cost beside it: `?` while every paid node's tokens are unknown, `≥n` while some are."""
    return token_cell(known, unknown, paid).replace(str(known), f"{known:,}")


class LiveProgress(BuildProgress):
    def __init__(self, stream: TextIO, planned_cost_usd: float | None = None,
                 planned_layers: Mapping[str, Mapping[str, int]] | None = None):
        super().__init__(planned_cost_usd, planned_layers)
        self.console = Console(file=stream, force_terminal=True, highlight=False)
        self.live = Live(console=self.console, get_renderable=self.render, refresh_per_second=REFRESH_PER_SECOND,
                         redirect_stdout=False, redirect_stderr=False, transient=False)
        self.live.start()

    def render(self) -> Group:
        with self._lock:
            self._count_starts()
            return self._render()

    def _render(self) -> Group:
        s = self.state
        elapsed = max(time.monotonic() - s.started_at, 1e-6)
        rate = s.done / elapsed
        # The layers not begun count as the plan expects (`~`: an estimate, each node at the pace so far), or the bar
        # stood near its end with an ETA near zero while the judgements (and their spend) were still to come.
        expected = self.expected()
        total = s.total + sum(expected.values())
        eta = (total - s.done) / rate if rate > 0 and total > s.done else (0.0 if total else None)
        bar = Table.grid(padding=(0, 1))
        title = f"claw build · {s.layer}" if s.layer else "claw build"
        later = f" (+{sum(expected.values()):,} expected)" if expected else ""
        bar.add_row(Text(title, style="bold"), ProgressBar(total=max(total, 1), completed=s.done, width=30),
                    Text(f"{s.done}/{s.total} nodes" + later
                         + (f" ({s.pending} pending in a batch)" if s.pending else "")))
        pace = Text.assemble((f"ETA {'~' if expected else ''}{_clock(eta)}", "cyan"),
                             f" · {s.requests / elapsed:.1f} requests/s · ",
                             (f"elapsed {_clock(elapsed)}", "dim"))
        models = Table(box=None, padding=(0, 2), show_edge=False, header_style="bold")
        now = time.time()
        held = {name: wait for name, wait in s.waits.items() if wait.until > now}  # rate-limited models
        for column in ("model", "done", "running", "failed", "reused", *(("state",) if held else ())):
            models.add_column(column, justify="left" if column in ("model", "state") else "right")
        for name, m in sorted(s.models.items()):
            state = [Text(f"waits until {_at(held[name].until)}", style="yellow") if name in held else ""]
            models.add_row(name, f"{m.done}/{m.total}", str(m.running),
                           Text(str(m.failed), style="bold red" if m.failed else ""), str(m.reused),
                           *(state if held else ()))
        about = "≥" if self.planned_minimum else "~"  # (an agent never run: the plan is a floor, spend/estimate.py)
        plan = "" if self.planned_cost_usd is None else f" of {about}{_usd(self.planned_cost_usd)} planned"
        unknown, paid = s.tokens_unknown, s.cost.count
        spend = Text(f"tokens in {_tokens(s.input_tokens, unknown, paid)} · out "
                     f"{_tokens(s.output_tokens, unknown, paid)} · cost {_spent(s.cost)}{plan}")
        parts: list[RenderableType] = [bar, pace, models, spend]
        if expected:  # (a line of its own: beside the bar it wrapped on an 80-column terminal)
            parts.insert(2, Text("expected by the plan, not begun: "
                                 + " · ".join(f"{label} {n:,}" for label, n in expected.items()), style="dim"))
        for wait in held.values():  # the judges' models have no row of their own
            parts.append(Text(f"waiting: {wait_text(wait)}", style="yellow"))
        parts.extend(Text(line, style="cyan") for line in s.batches)
        if s.failures:
            last = s.failures[-1]
            parts.append(Text(f"last failure ({len(s.failures)} so far): {last.node}: {last.reason}",
                              style="red", overflow="ellipsis", no_wrap=True))
        if s.stopping:
            parts.append(Text(s.stopping, style="bold yellow"))
        return Group(*parts)

    def close(self) -> None:
        with self._lock:
            self.planned_layers = {}  # the build is over: its last state is what it did, nothing is expected
        self.live.stop()  # draws the final state once more and leaves it on screen
