"""`claw plan`: what `claw build` would send, and its estimated tokens, cost and time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from clawstore.cli.common import OUTPUT, campaign_options, campaign_project, format_table


def _sources(counter: dict[str, int]) -> str:
    return ",".join(f"{name}:{n}" for name, n in sorted(counter.items())) or "-"


AT_LEAST = " (at least: a run with tools sends one per turn of its tool loop, an agent as many as it needs)"


def _requests(count: int, minimum: bool) -> str:
    """A request count; `≥ n` when runs with tools (or agents) may send more."""
    return f"≥ {count}" if minimum else str(count)


def _at_least(cell: str, floor: bool) -> str:
    """A figure of a lower bound `≥`, as a total with unknown parts reads (`?` and `≥` already say as much)."""
    return f"≥{cell}" if floor and not cell.startswith(("≥", "?")) else cell


def _cost_text(plan: Any) -> str:
    """The plan's estimated cost as its total line says it: `≥` and why when it is a floor."""
    from clawstore.spend.estimate import FLOOR

    text = plan.estimated_cost.usd_text()
    return f"{_at_least(text, True)} ({FLOOR})" if plan.floor and not plan.estimated_cost.all_unknown else text


def render_plan(plan: Any, output: str) -> str:
    """The plan as `claw plan` prints it (also what `claw build --max-cost` prints when it refuses)."""
    if output == "json":
        return json.dumps(plan.to_json(), sort_keys=True)
    from clawstore.spend.estimate import FLOOR  # (when a plan is printed: `claw` starts without it)

    rows = [[line.kind, line.name, line.model, _requests(line.requests, bool(line.open_ended)), str(line.reused),
             *(_at_least(str(round(n)), bool(line.floor)) for n in (line.input_tokens, line.output_tokens)),
             _at_least(line.cost.cell(6), bool(line.floor)),
             *([line.batch_cost.cell(6) if line.batch_factor is not None else "-"] if plan.batch else []),
             _sources(dict(line.token_sources)) + (f", {FLOOR}" if line.floor else ""),
             _sources(dict(line.cost_sources))] for line in plan.lines]
    table = format_table(["KIND", "NAME", "MODEL", "REQUESTS", "REUSED", "EST_IN_TOK", "EST_OUT_TOK", "EST_COST_USD",
                          *(["EST_BATCH_USD"] if plan.batch else []), "TOKENS_FROM", "COST_FROM"], rows)
    layers = ", ".join(f"{kind} {c['execute']} execute / {c['reuse']} reuse" for kind, c in plan.layers.items())
    wall = plan.estimated_wall_s
    by_batch = f" with judgements by batch ({plan.one_by_one_cost.cell(6)} USD one by one)" if plan.batch else ""
    pending = (f" ({plan.pending} pending in provider batches: the build collects them, sending nothing)"
               if plan.pending else "")
    total = (f"\nplan {plan.campaign_id}: {_requests(plan.requests, plan.minimum)} request(s){pending}"
             f"{AT_LEAST if plan.minimum else ''}"
             f"{'' if plan.exact else ' (at most: some judgements wait for new check results)'}; "
             f"estimated cost {_cost_text(plan)}{by_batch}; estimated wall time "
             f"{'?' if wall is None else f'{wall:.1f}'} s at concurrency {plan.concurrency}\nnodes: {layers}")
    return table + total


@click.command("plan")
@campaign_options
@click.option("--force", is_flag=True, help="Plan as if every node were stale (what build --force sends).")
@click.option("--max-concurrency", type=click.IntRange(min=1), default=None,
              help="Override execution_policy.max_concurrency for the time estimate.")
@click.option("--remote", "remote", default=None, metavar="NAME",
              help="First fetch from this remote what `build --remote NAME` would (nothing is paid for): "
                   "the plan then counts only what the build would send.")
@click.option("--batch", is_flag=True, help="Price the judgements as `build --batch` sends them (docs/batch.md).")
@OUTPUT
def plan(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
         models: tuple[str, ...], store_dir: Path | None, force: bool, max_concurrency: int | None,
         remote: str | None, batch: bool, output: str) -> None:
    """What a build would send (requests per model and judge) and its estimated tokens, cost and time."""
    project = campaign_project(suite, run_profile, evaluation_profile, cases, models, store_dir,
                               reads_only=remote is None)  # (--remote pulls into the store first)
    click.echo(render_plan(project.plan(force, max_concurrency, batch, remote), output))


def register(group: click.Group) -> None:
    group.add_command(plan)
