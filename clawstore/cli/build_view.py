"""How `claw build`, `claw status` and `claw explain` show a campaign's nodes and a build's rows."""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawstore.project.stamping import LAYERS
from clawstore.values.costs import CostSum, usd
from clawstore.values.tokens import TOKENS_UNKNOWN, UNKNOWN_WHEN_PART_IS, token_cell, token_notes

if TYPE_CHECKING:
    from clawstore.builder.api import NodeState
    from clawstore.project.front import Built
    from clawstore.store import Store


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


def killed_in(store_dir: Path | None, campaign_id: str) -> tuple[list[dict[str, Any]], str | None]:
    """The campaign's builds killed and not told of yet (spend/killed.py), as `claw status` and `claw build --dry-run`
    show them: `--output json`'s `killed_builds` and the note naming them (None: none). From the store alone, opened
    only when a build left a journal in it (else none was killed); no store: nothing was built, nor killed."""
    from clawstore.cli.common import existing_store_root, open_existing
    from clawstore.errors import StoreError
    from clawstore.spend.killed import killed_builds, killed_notes
    from clawstore.store.buildlogs import journals

    try:
        root = existing_store_root(store_dir)
        store = open_existing(root) if journals(root) else None
    except StoreError:
        return [], None
    if store is None:
        return [], None
    killed = killed_builds(store, campaign_id)
    return [k.to_json() for k in killed], "; ".join(killed_notes(store, killed)) or None


def pending_note(store: Store, campaign_id: str) -> str | None:
    """What a report or page of `campaign_id` leaves out: requests submitted in provider batches and not yet collected
    (paid for once their batch ends, held by no record yet), from the store alone; None when there is none."""
    from clawstore.builder import batch_doc

    docs = [doc for doc in batch_doc.pending(store) if doc.campaign_id == campaign_id]
    if not docs:
        return None
    from clawstore.builder.batching import recorded_by  # (here: batching.py imports the batch API and httpx, ~40 ms)

    # (not a line whose record, naming its batch, is here: a pull brings back the ref of a batch a colleague collected,
    # a push never deleting one, with those records; this note counted them, as forget_recorded lets them go, unread)
    pending = sum(1 for doc in docs for key in doc.covered
                  if doc.batch_id is None or not recorded_by(store, key, doc.name))
    if not pending:
        return None
    return (f"{pending} request(s) of campaign {campaign_id} are pending in provider batches: their cost and scores "
            "are not in these figures yet (`claw batch status` collects them)")


def layer_counts(kinds: Counter[str]) -> str:
    """'2 runs, 2 checks, 6 judgements, 2 results' (`kinds`: nodes per kind; layers with no node left out)."""
    return ", ".join(f"{kinds[kind]} {name}" for kind, name in LAYERS.items() if kinds[kind]) or "nothing"


def print_plan(cid: str, states: Iterable[NodeState], nodes: int, output: str, force: bool,
               killed: list[dict[str, Any]]) -> None:
    """`build --dry-run`: each node that would execute and why (`states` in one pass: every node for the JSON, at
    least those that would execute for the text; `nodes`: how many the campaign has; `killed`: the JSON's
    `killed_builds`, `killed_in`)."""
    def executes(s: NodeState) -> bool:
        return s.state != "fresh" or force

    will_run: Counter[str] = Counter()
    if output == "json":
        def listed() -> Iterator[str]:
            for s in states:
                will_run[s.node.kind] += executes(s)
                yield json.dumps({**s.node.address, "kind": s.node.kind, "key": s.node.key, "state": s.state,
                                  "executes": executes(s), "reasons": s.reasons}, sort_keys=True)

        write_json({"campaign": cid, "killed_builds": killed}, {"nodes": listed(), "would_execute": lambda: {
            name: will_run[kind] for kind, name in LAYERS.items()}})
        return
    def lines() -> Iterator[str]:
        for s in states:
            if executes(s):
                will_run[s.node.kind] += 1
                yield f"exec {node_label(s.node)}: " + "; ".join(s.reasons)

    echo_lines(lines())
    count = will_run.total()
    click.echo(f"{count} node(s) would execute ({layer_counts(will_run)}), {nodes - count} fresh ({cid})")


def echo_lines(lines: Iterable[str]) -> None:
    """`click.echo` of each line, ROWS_PER_WRITE lines a call: the same text, without a write and a flush a line (a
    stale campaign's `explain` printed 400,000 lines at 10,000 × 5)."""
    lines = iter(lines)
    while block := list(itertools.islice(lines, ROWS_PER_WRITE)):
        click.echo("\n".join(block))


def write_items(before: list[str], separator: str, items: Iterable[str], after: list[str]) -> None:
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

    write_items([text(headers), "\n", "  ".join("-" * w for w in widths)], "", lines(), ["\n"])


def _money(row: dict[str, Any]) -> str:
    if row["run"] == "skip":
        return "-"  # never sent
    if row["cost_usd"] is None:  # unknown, never 0; what it spent at least when that is known
        return f"≥{usd(float(row['cost_known_usd']), 6)}" if row.get("cost_known_usd") else "?"
    return usd(float(row["cost_usd"]), 6)


ROWS_PER_WRITE = 1_000  # rows written to stdout at once (a build's rows are read back from its files: builder/rows.py)


def write_json(doc: dict[str, Any], streamed: dict[str, Iterable[str] | Callable[[], Any]]) -> None:
    """The line `json.dumps(doc | values, sort_keys=True)`, written as it is made: each field of `streamed` a list
    of the items' JSON texts (written ROWS_PER_WRITE at a time as they are read), or a value asked for when its
    turn comes (after the lists before it in the key order: a count made while they are written)."""
    mark = json.dumps(f"streamed-{os.urandom(16).hex()}")  # where a streamed field goes (a value no field holds)
    text = json.dumps(doc | dict.fromkeys(streamed, json.loads(mark)), sort_keys=True)
    pieces = text.split(mark)
    for piece, name in zip(pieces, sorted(streamed), strict=False):
        value = streamed[name]
        if callable(value):
            click.echo(piece + json.dumps(value(), sort_keys=True), nl=False)
        else:
            write_items([piece, "["], ", ", value, ["]"])
    click.echo(pieces[-1])


def _tokens_text(metrics: dict[str, Any]) -> str:
    """"tokens in 864 out 168", or with unknown parts as cost says them: "tokens in ≥14 out ≥6 (2 of 4 unknown)"."""
    unknown, paid = int(metrics.get(TOKENS_UNKNOWN) or 0), CostSum.of_build(metrics).count
    return (f"tokens in {token_cell(metrics.get('input_tokens') or 0, unknown, paid)} "
            f"out {token_cell(metrics.get('output_tokens') or 0, unknown, paid)}{token_notes(unknown, paid)}")


def _tokens_json(metrics: dict[str, Any]) -> dict[str, Any]:
    """A build's token totals as JSON: null when a part is unknown (the known part beside it), as its cost."""
    if not metrics.get(TOKENS_UNKNOWN):
        return {}
    known = {f"{name}_known": metrics.get(name) for name in UNKNOWN_WHEN_PART_IS}
    return {**known, **dict.fromkeys(UNKNOWN_WHEN_PART_IS)}


FAILED_KINDS = {"run": "run", "check": "check", "judge": "judgement", "result": "result"}


def _failed_text(failed: int, failures: list[tuple[str, str]]) -> str:
    """"24 failed (18 judgements, 6 results)": which layers failed, so that "0 executed, 24 failed" beside a cost
    spent says judgements ran (and were paid for) and failed, not that nothing ran."""
    kinds = Counter(node.partition("/")[0] for node, _ in failures)
    if not failed or sum(kinds.values()) != failed or not kinds.keys() <= FAILED_KINDS.keys():
        return f"{failed} failed"
    parts = [f"{kinds[kind]} {name}{'s' if kinds[kind] > 1 else ''}" for kind, name in FAILED_KINDS.items()
             if kinds[kind]]
    return f"{failed} failed ({', '.join(parts)})"


def print_built(built: Built, output: str) -> None:
    """The build's rows and totals (one JSON object with --output json), the rows written a thousand at a time (the
    same text as `json.dumps` and `format_table` of them all)."""
    metrics = built.metrics
    if output == "json":
        spent = CostSum.of_build(metrics)  # (the log keeps the known part; JSON says null when any is unknown)
        metrics = {**metrics, "cost_usd": spent.shown, "cost_known_usd": spent.shown_known,
                   **_tokens_json(metrics)}
        failures = [{"node": node, "reason": reason} for node, reason in built.failures]
        warned = [{"node": node, "warning": warning} for node, warning in built.warnings]
        write_json({"campaign": built.campaign_id, "build_id": built.build_id, "counts": built.counts,
                    "metrics": metrics, "failures": failures, "stopped": built.stopped,
                    "exit_code": built.exit_code, "pending_in_batches": built.pending,
                    "killed_builds": [k.to_json() for k in built.killed], "warnings": warned},
                   {"rows": (json.dumps(row, sort_keys=True) for row in built.rows)})
        return
    _print_table(built.rows)
    counts = built.counts
    click.echo(f"\nbuild {built.build_id} ({built.campaign_id}): {counts.get('executed', 0)} executed, "
               f"{counts.get('reused', 0)} reused, {_failed_text(counts.get('failed', 0), built.failures)}, "
               f"{counts.get('skipped', 0)} skipped; {_tokens_text(metrics)}; "
               f"cost spent {CostSum.of_build(metrics).usd_text()}")
    if built.stopped:
        click.echo(f"stopped: {built.stopped}")
    if built.pending:
        click.echo(f"pending: {built.pending} request(s) in provider batches; the next `claw build` (or "
                   "`claw batch status`) collects what has finished")
    if built.failures:
        click.echo(f"\nfailed nodes ({len(built.failures)}):")
        for node, reason in built.failures:
            click.echo(f"  {node}: {reason}")
    if built.warnings:
        click.echo(f"\nwarnings ({len(built.warnings)}):")
        for node, warning in built.warnings:
            click.echo(f"  {node}: {warning}")
