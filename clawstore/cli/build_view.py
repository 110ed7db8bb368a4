"""How `claw build`, `claw status` and `claw explain` show a campaign's nodes and a build's rows."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import click

from clawstore.project.stamping import LAYERS
from clawstore.values.costs import CostSum

if TYPE_CHECKING:
    from clawstore.builder.api import NodeState
    from clawstore.project.front import Built


def node_label(node: Any) -> str:
    a = node.address
    label = f"{node.kind} {a['model_id']} {a['case_id']} rep {a['repetition']}"
    if "judge_run_id" in a:
        label += f" {a['judge_run_id']} #{a['judge_repetition']}"
    return label


def note(message: str | None) -> None:
    """A note on stderr (e.g. why the campaign has no head), when there is one."""
    if message is not None:
        click.echo(f"claw: note: {message}", err=True)


def layer_counts(states: list[NodeState], executes: Callable[[NodeState], bool]) -> str:
    """'2 runs, 2 checks, 6 judgements, 2 results' (layers with no node left out)."""
    counts = Counter(s.node.kind for s in states if executes(s))
    return ", ".join(f"{counts[kind]} {name}" for kind, name in LAYERS.items() if counts[kind]) or "nothing"


def print_plan(cid: str, states: list[NodeState], output: str, force: bool) -> None:
    """`build --dry-run`: each node that would execute and why."""
    def executes(s: NodeState) -> bool:
        return s.state != "fresh" or force

    will_run = [s for s in states if executes(s)]
    if output == "json":
        by_layer = Counter(s.node.kind for s in will_run)
        layers = {name: by_layer[kind] for kind, name in LAYERS.items()}
        click.echo(json.dumps({"campaign": cid, "would_execute": layers,
                               "nodes": [{**s.node.address, "kind": s.node.kind, "key": s.node.key, "state": s.state,
                                          "executes": executes(s), "reasons": s.reasons} for s in states]},
                              sort_keys=True))
        return
    for s in will_run:
        click.echo(f"exec {node_label(s.node)}: " + "; ".join(s.reasons))
    fresh = len(states) - len(will_run)
    click.echo(f"{len(will_run)} node(s) would execute ({layer_counts(states, executes)}), {fresh} fresh ({cid})")


def _write(before: list[str], separator: str, items: Iterable[str], after: list[str]) -> None:
    """`before`, the items joined by `separator`, `after`: to stdout, ROWS_PER_WRITE items a write."""
    click.echo("".join(before), nl=False)
    items = iter(items)
    first = True
    while block := list(itertools.islice(items, ROWS_PER_WRITE)):
        click.echo(("" if first else separator) + separator.join(block), nl=False)
        first = False
    click.echo("".join(after), nl=False)


_HEADERS = ["MODEL", "CASE", "REP", "RUN", "STATUS", "LATENCY_S", "COST"]
_EVAL_HEADERS = ["EVAL", "SCORE"]


def _cells(row: dict[str, Any]) -> tuple[list[str], list[str] | None]:
    """A row's cells, and its evaluation's (None: the row has none)."""
    line = [row["model_id"], row["case_id"], str(row["repetition"]), row["run"], row["status"],
            "-" if row["latency_s"] is None else f"{row['latency_s']:.2f}", _money(row)]
    if "eval" not in row:
        return line, None
    score = row.get("score")
    return line, [row.get("eval") or "-", "-" if score is None else f"{score:.2f}"]


def _print_table(rows: Iterable[dict[str, Any]]) -> None:
    """`format_table` of the rows (with the evaluation's columns when a row has them), read twice instead of held."""
    widths = [len(h) for h in _HEADERS + _EVAL_HEADERS]
    evals = False
    for row in rows:
        line, evaluated = _cells(row)
        evals = evals or evaluated is not None
        for index, cell in enumerate(line + (evaluated or [])):
            widths[index] = max(widths[index], len(cell))
    headers = _HEADERS + (_EVAL_HEADERS if evals else [])
    widths = widths[:len(headers)]

    def text(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    def lines() -> Iterator[str]:
        for row in rows:
            line, evaluated = _cells(row)
            yield "\n" + text(line + ((evaluated or ["-", "-"]) if evals else []))

    _write([text(headers), "\n", "  ".join("-" * w for w in widths)], "", lines(), ["\n"])


def _money(row: dict[str, Any]) -> str:
    if row["run"] == "skip":
        return "-"  # never sent
    return "?" if row["cost_usd"] is None else f"{float(row['cost_usd']):.6f}"  # None: unknown, never 0


ROWS_PER_WRITE = 1_000  # rows written to stdout at once (a build's rows are read back from its files: builder/rows.py)
_ROWS_MARK = "\x00the rows\x00"  # where the rows go in the JSON text (no other field can hold it)


def print_built(built: Built, output: str) -> None:
    """The build's rows and totals (one JSON object with --output json), the rows written a thousand at a time (the
    same text as `json.dumps` and `format_table` of them all)."""
    metrics = built.metrics
    if output == "json":
        spent = CostSum.of_build(metrics)  # (the log keeps the known part; JSON says null when any is unknown)
        metrics = {**metrics, "cost_usd": spent.usd, "cost_known_usd": spent.known_usd}
        text = json.dumps({"campaign": built.campaign_id, "build_id": built.build_id, "rows": _ROWS_MARK,
                           "counts": built.counts, "metrics": metrics,
                           "failures": [{"node": node, "reason": reason} for node, reason in built.failures],
                           "stopped": built.stopped, "exit_code": built.exit_code,
                           "pending_in_batches": built.pending},
                          sort_keys=True)
        head, tail = text.split(json.dumps(_ROWS_MARK), 1)
        _write([head + "["], ", ", (json.dumps(row, sort_keys=True) for row in built.rows), ["]" + tail + "\n"])
        return
    _print_table(built.rows)
    counts = built.counts
    click.echo(f"\nbuild {built.build_id} ({built.campaign_id}): {counts.get('executed', 0)} executed, "
               f"{counts.get('reused', 0)} reused, {counts.get('failed', 0)} failed, "
               f"{counts.get('skipped', 0)} skipped; tokens in {metrics.get('input_tokens', 0)} "
               f"out {metrics.get('output_tokens', 0)}; cost spent {CostSum.of_build(metrics).usd_text()}")
    if built.stopped:
        click.echo(f"stopped: {built.stopped}")
    if built.pending:
        click.echo(f"pending: {built.pending} judgement(s) in provider batches; the next `claw build` (or "
                   "`claw batch status`) collects what has finished")
    if built.failures:
        click.echo(f"\nfailed nodes ({len(built.failures)}):")
        for node, reason in built.failures:
            click.echo(f"  {node}: {reason}")
