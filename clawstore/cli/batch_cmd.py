"""`claw batch status` and `claw batch cancel`: the provider batches a store records (docs/batch.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from clawstore.cli.common import (
    OUTPUT,
    campaign_options,
    campaign_project,
    closed_with_command,
    format_table,
    open_store,
    store_option,
)
from clawstore.cli.summaries import SummaryGroup
from clawstore.values.urls import shown_url


@click.group(cls=SummaryGroup)
def batch() -> None:
    """Provider batches (`claw build --batch`): `status` collects and lists them, `cancel` cancels."""


def _rows(docs: list[Any]) -> list[dict[str, Any]]:
    return [{"name": d.name, "batch_id": d.batch_id, "kind": d.kind, "model": d.model,
             "provider": shown_url(d.base_url), "status": d.status, "requests": len(d.keys),
             "pending": len(d.covered), "campaign": d.campaign_id,
             "submitted_at": d.submitted_at, "expires_at": d.expires_at, "estimate_usd": d.estimate_usd}
            for d in docs]


def _print(rows: list[dict[str, Any]], output: str, header: dict[str, Any]) -> None:
    if output == "json":
        click.echo(json.dumps({**header, "batches": rows}, sort_keys=True))
        return
    table = [[r["name"], r["batch_id"] or "(being created)", r["model"], r["status"], str(r["pending"]),
              str(r["requests"]), _when(r["expires_at"])] for r in rows]
    click.echo(format_table(["NAME", "BATCH_ID", "MODEL", "STATUS", "PENDING", "REQUESTS", "EXPIRES"], table))


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch))


@batch.command("status")
@campaign_options
@click.option("--wait", is_flag=True, help="Poll until no batch of the campaign is pending.")
@OUTPUT
def status(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
           models: tuple[str, ...], store_dir: Path | None, wait: bool, output: str) -> None:
    """Poll the campaign's batches, record every finished line, list what is still pending."""
    # (reads_only: no store there is read as an empty one, never made — a mistyped --store made one, exit 0, as `claw
    # status` never did; one that is there is written as before: the finished lines are recorded)
    collected = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir,
                                 reads_only=True).collect(wait)
    rows = _rows([d for d in collected.batches if d.campaign_id == collected.campaign_id])
    spent = collected.spent  # (JSON: null when a part is unknown, as a build's `cost_usd`)
    header = {"campaign": collected.campaign_id, "recorded": collected.recorded,
              "pending": sum(r["pending"] for r in rows), "stopped": collected.stopped,
              "cost_usd": spent.shown, "cost_known_usd": spent.shown_known}
    _print(rows, output, header)
    if output != "json":
        cost = f", cost spent {spent.usd_text()}" if collected.recorded else ""
        click.echo(f"\n{collected.recorded} line(s) recorded now{cost}; {header['pending']} request(s) pending in "
                   f"{len(rows)} batch(es) ({collected.campaign_id})")
        if collected.stopped:  # (out of credit: what the build's summary says, builder/refused.py)
            click.echo(collected.stopped)
    raise SystemExit(1 if header["pending"] or collected.stopped else 0)


@batch.command("cancel")
@click.argument("names", nargs=-1)
@click.option("--all", "every", is_flag=True,
              help="Cancel every batch this store's builds submitted (not a colleague's, pulled).")
@store_option
@OUTPUT
def cancel(names: tuple[str, ...], every: bool, store_dir: Path | None, output: str) -> None:
    """Cancel batches (by NAME, from `claw batch status`) and release their nodes: the next build runs them."""
    from clawstore.builder.batch_doc import pending
    from clawstore.builder.batching import cancel as cancel_one
    from clawstore.errors import UsageError

    store = closed_with_command(open_store(store_dir))
    known = {d.name: d for d in pending(store)}
    if every:  # this store's builds' batches: a colleague's, pulled, is theirs to cancel (by name here, if need be)
        names = tuple(n for n, d in known.items() if _submitted_here(store.root, d.build_id))
        if len(names) < len(known):
            click.echo(f"claw: note: {len(known) - len(names)} batch(es) submitted by another store's builds (pulled) "
                       "left alone: cancelling them would make that store send their requests again one by one; "
                       "`claw batch cancel NAME` cancels one", err=True)
    elif not names:
        raise UsageError("name the batches to cancel (see `claw batch status`), or give --all")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"no batch named {unknown[0]} in store {store.root}")
    done = [cancel_one(store, name) for name in names]
    rows = _rows([d for d in done if d is not None])
    _print(rows, output, {"cancelled": len(rows)})
    if output != "json":
        click.echo(f"\n{len(rows)} batch(es) cancelled; their nodes are released")


def _submitted_here(store_root: Path, build_id: str) -> bool:
    """Whether a build of this store submitted the batch: its log or journal is here (build logs do not travel)."""
    from clawstore.errors import ClawError
    from clawstore.store.buildlogs import build_log_path, journal_path

    try:
        log = build_log_path(store_root, build_id)
    except ClawError:  # (a pulled document's id that names no file: no build of this store's)
        return False
    return log.exists() or journal_path(log).exists()


def register(group: click.Group) -> None:
    group.add_command(batch)
