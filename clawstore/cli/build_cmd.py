"""`claw build`, `claw status`, `claw explain`."""

from __future__ import annotations

import contextlib
import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from clawstore.cli.common import (
    OUTPUT,
    Stores,
    campaign_options,
    campaign_request,
    format_table,
    loaded_campaign,
    never_built_message,
    remote_pull_parts,
    resolve_store_dir,
)
from clawstore.costs import CostSum, source_of
from clawstore.errors import UsageError
from clawstore.machine_settings import check_build_settings
from clawstore.report.terminal import print_tables, stdout_is_terminal
from clawstore.report.terminal import table as rich_table

if TYPE_CHECKING:
    from clawstore.builder.stamp import Layers
    from clawstore.config.campaign import Campaign
    from clawstore.remote.live import RemoteView
    from clawstore.store.store import Store

def node_label(node: Any) -> str:
    a = node.address
    label = f"{node.kind} {a['model_id']} {a['case_id']} rep {a['repetition']}"
    if "judge_run_id" in a:
        label += f" {a['judge_run_id']} #{a['judge_repetition']}"
    return label


def _money(row: dict[str, Any]) -> str:
    if row["run"] == "skip":
        return "-"  # never sent
    return "?" if row["cost_usd"] is None else f"{float(row['cost_usd']):.6f}"  # None: unknown, never 0


def _run_row(node: Any) -> dict[str, Any]:
    # A skipped run may hold an earlier record (a --force build that stopped): this build used none of it.
    record = {} if node.action == "skip" else node.record or {}
    metrics = record.get("metrics") or {}
    pending = bool(node.batch)  # in a provider batch: the next build collects it
    return {
        **node.address,
        "run": "pending" if pending else node.action,
        "status": record.get("status") or ("skip" if node.action == "skip" else "pending" if pending else "failed"),
        "latency_s": metrics.get("latency_s"),
        "cost_usd": metrics.get("cost_usd"),
        "cost_source": source_of(metrics) if record else None,
        "key": node.key,
        "error": (record.get("error") or {}).get("message") or node.error,
    }


def _build_rows(report: Any) -> list[dict[str, Any]]:
    """One row per run, with its evaluation's columns when the campaign has an evaluation profile."""
    rows = [_run_row(n) for n in report.runs]
    evals = {e.run_address: e for e in report.evals}
    for row in rows:
        ev = evals.get((row["model_id"], row["case_id"], row["repetition"]))
        if ev is not None:
            row.update(ev.row())
        if row["run"] == "skip" and "eval" in row:  # nothing of it was built, or evaluated, by this build
            row.update(eval="skip", eval_status="skip", score=None, passed=None)
    return rows


def _print_build(report: Any, output: str, rows: list[dict[str, Any]]) -> None:
    _print_rows(rows, output, campaign_id=report.campaign_id, build_id=report.build_id, counts=report.counts,
                metrics=report.metrics, failures=[(f.node, f.reason) for f in report.failures],
                stopped=report.stopped, exit_code=report.exit_code, pending=report.pending)


def _print_rows(rows: list[dict[str, Any]], output: str, *, campaign_id: str, build_id: str | None,
                counts: dict[str, int], metrics: dict[str, Any], failures: list[tuple[str, str]],
                stopped: str | None, exit_code: int, pending: int = 0) -> None:
    if output == "json":
        spent = CostSum.of_build(metrics)  # (the log keeps the known part; JSON says null when any is unknown)
        metrics = {**metrics, "cost_usd": spent.usd, "cost_known_usd": spent.known_usd}
        click.echo(json.dumps({"campaign": campaign_id, "build_id": build_id, "rows": rows,
                               "counts": counts, "metrics": metrics,
                               "failures": [{"node": node, "reason": reason} for node, reason in failures],
                               "stopped": stopped, "exit_code": exit_code, "pending_in_batches": pending},
                              sort_keys=True))
        return
    evals = any("eval" in row for row in rows)
    headers = ["MODEL", "CASE", "REP", "RUN", "STATUS", "LATENCY_S", "COST"]
    if evals:
        headers += ["EVAL", "SCORE"]
    table = []
    for row in rows:
        line = [row["model_id"], row["case_id"], str(row["repetition"]), row["run"], row["status"],
                "-" if row["latency_s"] is None else f"{row['latency_s']:.2f}", _money(row)]
        if evals:
            score = row.get("score")
            line += [row.get("eval") or "-", "-" if score is None else f"{score:.2f}"]
        table.append(line)
    click.echo(format_table(headers, table))
    click.echo(f"\nbuild {build_id} ({campaign_id}): {counts.get('executed', 0)} executed, "
               f"{counts.get('reused', 0)} reused, {counts.get('failed', 0)} failed, "
               f"{counts.get('skipped', 0)} skipped; tokens in {metrics.get('input_tokens', 0)} "
               f"out {metrics.get('output_tokens', 0)}; cost spent {CostSum.of_build(metrics).usd_text()}")
    if stopped:
        click.echo(f"stopped: {stopped}")
    if pending:
        click.echo(f"pending: {pending} judgement(s) in provider batches; the next `claw build` (or "
                   "`claw batch status`) collects what has finished")
    if failures:
        click.echo(f"\nfailed nodes ({len(failures)}):")
        for node, reason in failures:
            click.echo(f"  {node}: {reason}")


@click.command()
@campaign_options
@click.option("--dry-run", is_flag=True, help="Print what would execute and why; no provider call.")
@click.option("--force", is_flag=True, help="Execute every node even if a fresh result is stored.")
@click.option("--max-concurrency", type=click.IntRange(min=1), default=None,
              help="Override execution_policy.max_concurrency.")
@click.option("--max-cost", "max_cost", type=click.FloatRange(min=0), default=None, metavar="USD",
              callback=lambda _ctx, _param, value: _finite_usd(value),
              help="Refuse to start when `claw plan` estimates more; stop starting new requests once spent.")
@click.option("--executor", "executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where provider requests run: this process, or an existing Ray cluster.")
@click.option("--ray-address", "ray_address", default=None, metavar="ADDR",
              help="Ray cluster to use with --executor ray (default: $RAY_ADDRESS, else the local one).")
@click.option("--remote", "remote", default=None, metavar="NAME",
              help="Pull from this remote first, push committed results while building and the head at the end.")
@click.option("--batch", "batch", is_flag=True,
              help="Send judgements through the provider's Batch API (half price, results within 24 h; docs/batch.md).")
@click.option("--wait", "wait", is_flag=True,
              help="With batches pending: poll until they are collected (default: return at once, saying what is "
                   "pending; any later build or `claw batch status` collects them).")
@OUTPUT
@click.option("--progress", "progress", type=click.Choice(["auto", "live", "plain", "json", "none"]), default=None,
              help="Progress on stderr: live on a terminal, plain lines otherwise (auto), one JSON event per line "
                   "(json), or none. Default: auto, none with --output json.")
def build(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
          models: tuple[str, ...], store_dir: Path | None, dry_run: bool, force: bool,
          max_concurrency: int | None, max_cost: float | None, executor: str, ray_address: str | None,
          remote: str | None, batch: bool, wait: bool, output: str, progress: str | None) -> None:
    """Build a campaign: reuse what is fresh, execute only what is stale."""
    from clawstore.builder.api import build as run_build
    from clawstore.builder.api import inspect
    from clawstore.builder.engine import BuildOptions

    check_build_settings(remote=remote is not None)
    request = campaign_request(suite, run_profile, evaluation_profile, cases, models)
    stores = Stores(store_dir)
    if dry_run:
        fresh = None if force or output == "json" else _all_fresh(request, store_dir, cases, models)
        if fresh is not None:  # (the JSON plan lists every node: planned in full)
            click.echo(f"0 node(s) would execute (nothing), {fresh.nodes} fresh ({fresh.campaign_id})")
            return
        cid, states = inspect(request, stores, force=force)
        _print_plan(cid, states, output, force)
        _note_never_built(stores.store, cid)
        return
    planned = None
    mode = progress or ("none" if output == "json" else "auto")
    # A plain rebuild whose inputs did not change is answered from its stamp (builder/stamp.py); with
    # --remote, when the remote did not change either.
    plain = not (force or cases or models or max_cost is not None or executor != "local" or batch or wait)
    stamping = _stamping(request, store_dir, remote) if plain else None
    if stamping is not None and _answer_from_stamp(stamping, output):
        return
    with _recording(stamping) as reads:
        campaign = loaded_campaign(request) if remote is not None else None  # its pull asks the plan what to fetch
        with _remote(remote, campaign, stores):
            if campaign is None and (max_cost is not None or _shows_live(mode)):  # an estimate first: the
                campaign = loaded_campaign(request)  # configs load once, for both
            if max_cost is not None:
                planned = _check_budget(request, stores, force, max_concurrency, max_cost, output, campaign, batch)
            if planned is None and _shows_live(mode):
                planned = _estimate(request, stores, force, max_concurrency, campaign, batch)
            options = BuildOptions(force=force, max_concurrency=max_concurrency, quiet=output == "json",
                                   max_cost_usd=max_cost, progress=mode, planned_cost_usd=planned,
                                   executor=executor, ray_address=ray_address, batch=batch, wait=wait)
            report = run_build(request, stores, options, campaign)
    if report.orphans:
        click.echo(f"claw: note: stopped {len(report.orphans)} OpenClaw container(s) that killed builds left "
                   f"running: {', '.join(report.orphans)}", err=True)
    rows = _build_rows(report)
    if stamping is not None and reads is not None:
        _stamp(stamping, reads, report, rows, request, store_dir, remote)
    _print_build(report, output, rows)
    raise SystemExit(report.exit_code)


class _Stamping(NamedTuple):
    store_root: Path
    digest: str  # of the request: the flags, the directory, the store (and the remote's state)
    workspace: Path
    remote: RemoteView | None  # --remote: the remote as it was when the digest was taken


def _stamping(request: Any, store_dir: Path | None, remote: str | None = None) -> _Stamping | None:
    """Where a build may find or leave its stamp; None outside a workspace, or when the remote cannot
    be listed (the full path says what is wrong)."""
    from clawstore.builder import stamp
    from clawstore.config import find_workspace_root

    try:
        root = find_workspace_root(Path.cwd())
    except UsageError:
        return None
    store_root = resolve_store_dir(store_dir, root).absolute()
    flags: tuple[str | None, ...] = (request.suite, request.run_profile, request.evaluation_profile)
    view = None
    if remote is not None:
        from clawstore.remote.live import view_remote

        view = view_remote(root, remote)
        if view is None:
            return None
        flags += ("--remote", *view.state)
    return _Stamping(store_root, stamp.request_digest(Path.cwd(), store_root, flags), root, view)


def _answer_from_stamp(stamping: _Stamping, output: str) -> bool:
    from clawstore.builder import stamp
    from clawstore.store.documents import TOKEN_METRICS

    found = stamp.match(stamping.store_root, stamping.digest)
    if found is None:
        return False
    if stamping.remote is not None:  # the head this build last pushed must still be the remote's
        if stamping.remote.head(found.campaign_id) != found.head:
            return False
        click.echo(f"remote {stamping.remote.name}: unchanged since the last build with it: nothing to pull or "
                   "push", err=True)
    build_id = stamp.log_noop(stamping.store_root, found)
    _print_rows(found.rows, output, campaign_id=found.campaign_id, build_id=build_id, counts=found.counts,
                metrics={**{name: 0 for name in TOKEN_METRICS}, "cost_usd": 0.0}, failures=[], stopped=None,
                exit_code=0)
    return True


@contextlib.contextmanager
def _recording(stamping: _Stamping | None) -> Iterator[Any]:
    if stamping is None:
        yield None
        return
    from clawstore.builder import stamp

    with stamp.recording(stamping.workspace, stamping.store_root) as reads:
        yield reads


def _stamp(stamping: _Stamping, reads: Any, report: Any, rows: list[dict[str, Any]], request: Any,
           store_dir: Path | None, remote: str | None) -> None:
    """Leave a stamp after a build that completed its campaign; forget an older one otherwise. With
    --remote, under the remote's state as this build's push left it (the stamp taken before is stale)."""
    from clawstore.builder import stamp

    target: _Stamping | None = stamping
    if stamping.remote is not None:
        target = _stamping(request, store_dir, remote)
        if target is None or target.digest != stamping.digest:
            stamp.forget(stamping.store_root, stamping.digest)
        if target is None:
            return
    complete = report.exit_code == 0 and report.build_id is not None and not report.stopped and not report.pending
    openclaw = any(getattr(n.item, "runner_type", None) == "openclaw" for n in report.runs)
    if not (complete and not openclaw
            and stamp.write(target.store_root, target.digest, reads, report.build_id, rows, report.counts,
                            _layers(report))):
        stamp.forget(target.store_root, target.digest)


def _layers(report: Any) -> Layers:
    """Nodes per model and layer, in the order `claw status` lists them (its runs' order, then run,
    checks, judge, result)."""
    per_model: dict[str, Counter[str]] = {}
    for node in [*report.runs, *(n for ev in report.evals for n in ev.nodes())]:
        per_model.setdefault(node.address["model_id"], Counter())[node.kind] += 1
    return [(model, {kind: kinds[kind] for kind in LAYERS if kinds[kind]}) for model, kinds in per_model.items()]


class _Fresh(NamedTuple):
    campaign_id: str
    layers: Layers

    @property
    def nodes(self) -> int:
        return sum(n for _, kinds in self.layers for n in kinds.values())


def _all_fresh(request: Any, store_dir: Path | None, cases: tuple[str, ...], models: tuple[str, ...]
               ) -> _Fresh | None:
    """The campaign's layers when the stamp of its last plain build still matches (builder/stamp.py):
    nothing it depends on changed since that build completed it, so every node is fresh. None: plan."""
    from clawstore.builder import stamp

    stamping = None if cases or models else _stamping(request, store_dir)
    found = None if stamping is None else stamp.match(stamping.store_root, stamping.digest)
    layers = None if found is None else stamp.layers_of(found)
    return None if layers is None else _Fresh(found.campaign_id, layers)  # type: ignore[union-attr]


@contextlib.contextmanager
def _remote(name: str | None, campaign: Campaign | None, stores: Stores) -> Iterator[None]:
    """`--remote NAME`: the build between a pull of what its plan needs and a push (clawstore/remote/live.py)."""
    if name is None:
        yield
        return
    from clawstore.remote.live import remote_session

    with remote_session(*remote_pull_parts(name, campaign, stores)):
        yield


def _shows_live(mode: str) -> bool:
    """Will the build show the live display (which wants the plan's cost estimate)?"""
    from clawstore.builder.progress_choice import display_mode

    return display_mode(mode) == "live"


def _estimate(request: Any, store: Store, force: bool, max_concurrency: int | None, campaign: Campaign,
              batch: bool = False) -> float | None:
    """The plan's cost estimate for the live display; none is fine (the display then shows spend only)."""
    from clawstore.spend.estimate import plan_spend

    try:
        return plan_spend(request, store, force, max_concurrency, campaign, batch).estimated_cost_usd
    except Exception:  # noqa: BLE001 - an estimate is a nicety; the build reports real errors itself
        return None


def _check_budget(request: Any, stores: Any, force: bool, max_concurrency: int | None, max_cost: float,
                  output: str, campaign: Campaign, batch: bool = False) -> float:
    """Refuse (exit 2, printing the plan) when the estimate exceeds --max-cost or cannot be made."""
    from clawstore.cli.plan_cmd import render_plan
    from clawstore.spend.estimate import plan_spend

    plan = plan_spend(request, stores, force, max_concurrency, campaign, batch)
    estimate = plan.estimated_cost_usd
    if estimate is not None and estimate <= max_cost:
        return estimate
    click.echo(render_plan(plan, output))
    if estimate is None:
        unknown = ", ".join(f"{line.kind} {line.name}" for line in plan.lines if line.cost.unknown)
        why = (f"the cost of {unknown} cannot be estimated (no cost reported in the store's history and no "
               "`pricing` declared: declare `pricing` on the model or judge)")
    else:
        why = f"the plan's estimated cost {estimate:.6f} USD exceeds --max-cost {max_cost:g} USD"
    click.echo(f"claw: error: {why}; nothing was sent", err=True)
    raise SystemExit(2)


LAYERS = {"run": "runs", "checks": "checks", "judge": "judgements", "result": "results"}


def _note_never_built(store: Store, cid: str) -> None:
    message = never_built_message(store, cid)
    if message is not None:
        click.echo(f"claw: note: {message}", err=True)


def layer_counts(states: list[Any], executes: Any) -> str:
    """'2 runs, 2 checks, 6 judgements, 2 results' (layers with no node left out)."""
    counts = Counter(s.node.kind for s in states if executes(s))
    return ", ".join(f"{counts[kind]} {name}" for kind, name in LAYERS.items() if counts[kind]) or "nothing"


def _print_plan(cid: str, states: list[Any], output: str, force: bool) -> None:
    def executes(s: Any) -> bool:
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


@click.command()
@campaign_options
@OUTPUT
def status(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
           models: tuple[str, ...], store_dir: Path | None, output: str) -> None:
    """Counts of fresh / stale / failed / never-built nodes, per model."""

    request = campaign_request(suite, run_profile, evaluation_profile, cases, models)
    per_model: dict[str, dict[str, Counter[str]]] = {}
    fresh = _all_fresh(request, store_dir, cases, models)
    if fresh is not None:
        cid = fresh.campaign_id
        per_model = {m: {k: Counter({"fresh": n}) for k, n in kinds.items()} for m, kinds in fresh.layers}
    else:
        from clawstore.builder.api import inspect_campaign
        from clawstore.builder.batch_collect import collect

        stores = Stores(store_dir)
        campaign = loaded_campaign(request)
        collected = collect(request, stores, campaign=campaign)  # what provider batches finished is recorded first
        _, cid, states = inspect_campaign(request, stores, campaign=campaign)
        _note_never_built(stores.store, cid)
        pending = sum(len(d.covered) for d in collected.batches if d.campaign_id == cid)
        if pending:
            click.echo(f"claw: note: {pending} request(s) pending in provider batches "
                       f"({collected.recorded} recorded now); see `claw batch status`", err=True)
        for s in states:
            kinds = per_model.setdefault(s.node.address["model_id"], {})
            kinds.setdefault(s.node.kind, Counter())[s.state] += 1
    columns = ["fresh", "stale", "failed", "never-built"]
    if output == "json":
        models_json = {m: {c: kinds["run"][c] for c in columns} | {
            "layers": {k: {c: n[c] for c in columns} for k, n in kinds.items()}} for m, kinds in per_model.items()}
        click.echo(json.dumps({"campaign": cid, "models": models_json}, sort_keys=True))
        return
    rows = [[m, k, *(str(n[c]) for c in columns)] for m, kinds in per_model.items() for k, n in kinds.items()]
    headers = ["MODEL", "NODE", "FRESH", "STALE", "FAILED", "NEVER_BUILT"]
    if stdout_is_terminal():
        print_tables(rich_table(headers, rows, [False, False, True, True, True, True], title=f"status of {cid}",
                                zero_dim=True, nonzero_styles=[None, None, "green", "yellow", "bold red", "yellow"]))
        return
    click.echo(format_table(headers, rows))


@click.command()
@campaign_options
@OUTPUT
def explain(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
            models: tuple[str, ...], store_dir: Path | None, output: str) -> None:
    """For each stale node, the inputs that changed since the last build at its address."""
    from clawstore.builder.api import inspect

    request = campaign_request(suite, run_profile, evaluation_profile, cases, models)
    fresh = _all_fresh(request, store_dir, cases, models)
    if fresh is not None:
        cid, stale = fresh.campaign_id, []
    else:
        stores = Stores(store_dir)
        cid, states = inspect(request, stores)
        _note_never_built(stores.store, cid)
        stale = [s for s in states if s.state != "fresh"]
    if output == "json":
        click.echo(json.dumps({"campaign": cid, "stale": [
            {**s.node.address, "kind": s.node.kind, "state": s.state, "reasons": s.reasons} for s in stale]},
            sort_keys=True))
        return
    if not stale:
        click.echo(f"everything is fresh ({cid})")
    elif stdout_is_terminal():
        print_tables(rich_table(["NODE", "STATE", "WHAT CHANGED"],
                                [[node_label(s.node), s.state, "\n".join(s.reasons)] for s in stale],
                                [False, False, False], title=f"why {len(stale)} node(s) of {cid} would execute"))
        return
    for s in stale:
        click.echo(f"{node_label(s.node)} ({s.state}):")
        for reason in s.reasons:
            click.echo(f"  {reason}")


def register(group: click.Group) -> None:
    for command in (build, status, explain):
        group.add_command(command)


def _finite_usd(value: float | None) -> float | None:
    """A budget is an amount: `nan` passes `min=0` (every comparison with it is false), `inf` is none."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite amount of USD, got {value}")
    return value
