"""`claw build`: parse its flags, ask the project's front to build (clawstore/project/front.py), show what it did."""

from __future__ import annotations

import math
from pathlib import Path

import click

from clawstore.cli.build_view import killed_in, note, print_built, print_plan
from clawstore.cli.common import OUTPUT, campaign_options, campaign_project


def _finite_usd(value: float | None) -> float | None:
    """A budget is an amount: `nan` passes `min=0` (every comparison with it is false), `inf` is none."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite amount of USD, got {value}")
    return value


@click.command()
@campaign_options
@click.option("--dry-run", is_flag=True, help="Print what would execute and why; no provider call.")
@click.option("--force", is_flag=True, help="Execute every node even if a fresh result is stored.")
@click.option("--max-concurrency", type=click.IntRange(min=1), default=None,
              help="Override execution_policy.max_concurrency.")
@click.option("--fixed-concurrency", "fixed_concurrency", is_flag=True,
              help="Keep max_concurrency requests in flight (default: up to it, as many as make the build faster; "
                   "docs/building.md, Concurrency).")
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
          max_concurrency: int | None, fixed_concurrency: bool, max_cost: float | None, executor: str,
          ray_address: str | None, remote: str | None, batch: bool, wait: bool, output: str,
          progress: str | None) -> None:
    """Build a campaign: reuse what is fresh, execute only what is stale."""
    from clawstore.project.front import BudgetRefused, BuildSettings, Inspection

    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir, reads_only=dry_run)
    if dry_run:
        planned = project.dry_run(force, output != "json", remote)  # (the JSON plan lists every node)
        killed, killed_note = killed_in(store_dir, planned.campaign_id)  # (as the build would name them at its end)
        if not isinstance(planned, Inspection):
            click.echo(f"0 node(s) would execute (nothing), {planned.nodes} fresh ({planned.campaign_id})")
            note(killed_note)
            return
        print_plan(planned.campaign_id, planned.states, planned.nodes, output, force, killed)
        note(planned.never_built)
        note(killed_note)
        return
    settings = BuildSettings(force=force, max_concurrency=max_concurrency, fixed_concurrency=fixed_concurrency,
                             max_cost=max_cost, executor=executor, ray_address=ray_address, remote=remote, batch=batch,
                             wait=wait, quiet=output == "json",
                             progress=progress or ("none" if output == "json" else "auto"))
    try:
        built = project.build(settings)
    except BudgetRefused as refused:  # the plan it refused, then the error (exit 2)
        from clawstore.cli.plan_cmd import render_plan

        click.echo(render_plan(refused.plan, output))
        raise
    try:
        for line in built.notes:
            click.echo(line, err=True)
        if built.orphans:
            click.echo(f"claw: note: stopped {len(built.orphans)} OpenClaw container(s) that killed builds left "
                       f"running: {', '.join(built.orphans)}", err=True)
        print_built(built, output)
    finally:
        built.close()
    if not built.from_stamp:
        raise SystemExit(built.exit_code)


def register(group: click.Group) -> None:
    group.add_command(build)
