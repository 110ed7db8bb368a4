"""`claw report`: one campaign's last build, from the store alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from clawstore.cli.common import campaign_options, existing_store_root, open_existing, require_built
from clawstore.errors import UsageError
from clawstore.host.durable import output_problem

if TYPE_CHECKING:
    from clawstore.report.chart_beside import ChartBeside
    from clawstore.report.data import CampaignReport
    from clawstore.store import Store


@click.command("report")
@campaign_options
@click.option("--output", "output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--chart", "chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the score-vs-cost PNG here (default outputs/charts/<evaluation profile>/score_cost.png).")
@click.option("--no-chart", "no_chart", is_flag=True, help="Do not draw the chart.")
def report_command(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                   models: tuple[str, ...], store_dir: Path | None, output: str, chart: Path | None,
                   no_chart: bool) -> None:
    """Report a campaign's last build from the store alone (no provider call; configs may have changed)."""
    from clawstore.host import process_end
    from clawstore.report.chart_beside import ChartBeside

    if chart is not None and no_chart:
        raise UsageError("--chart and --no-chart exclude each other")
    # A folder that is not there is a typo, refused before the report is built, as every other output path is (only
    # the default's folders under outputs/ are made).
    problem = None if chart is None else output_problem("--chart", chart)
    if problem is not None:
        raise UsageError(problem)
    # First: forked before the store starts a thread; only in the `claw` program (a process running many commands,
    # as the tests do, imports matplotlib once and keeps it), and for a campaign with an evaluation profile: without
    # one no model has a score (no result node), the chart is refused before matplotlib is imported, and the fork's
    # import was ~0.5 s of CPU spent for nothing.
    drawer = None if no_chart else ChartBeside(fork=process_end.is_program() and evaluation_profile is not None)
    try:
        _report(drawer, suite, run_profile, evaluation_profile, cases, models, store_dir, output, chart)
    finally:
        if drawer is not None:
            drawer.close()


def _report(drawer: ChartBeside | None, suite: str, run_profile: str, evaluation_profile: str | None,
            cases: tuple[str, ...], models: tuple[str, ...], store_dir: Path | None, output: str,
            chart: Path | None) -> None:
    from clawstore.builder.cyclic_gc import collector_paused
    from clawstore.cli.build_view import note, pending_note
    from clawstore.config.names import campaign_ids
    from clawstore.report.data import build_report
    from clawstore.report.terminal import stdout_is_terminal
    from clawstore.report.text import JsonRows, json_chunks, print_terminal, render_text
    from clawstore.spend.killed import killed_builds, killed_notes

    ids = campaign_ids(Path.cwd(), suite, run_profile, evaluation_profile)
    root = existing_store_root(store_dir)
    store = open_existing(root)
    killed = killed_builds(store, ids.campaign_id)
    note("; ".join(killed_notes(store, killed)) or None)  # (before the head it shows, or its absence: it spent too)
    require_built(store, ids.campaign_id, kept_apart_ok=True)  # shown, marked UNTRUSTED
    note(pending_note(store, ids.campaign_id))  # (what its figures leave out: never read as 0 spent on them)
    # The report's rows and their parts are acyclic: the collector's passes over them (50,000 rows at 10,000 x 5)
    # cost a fifth of building them.
    # The head read under a lease naming it: a build beside moving the ref on, then a gc, would delete it mid-read
    # (tests/gc/test_head_readers.py).
    with collector_paused(), store.reading_ref(f"campaigns/{ids.campaign_id}") as head_id:
        report = build_report(store, ids.campaign_id, cases, models, manifest=_indexed(store, root, ids.campaign_id),
                              sink=JsonRows if output == "json" else None, read=head_id)  # (JSON rows spilled)
        try:
            report.killed_builds = [k.to_json() for k in killed]
            _check_filters(ids.campaign_id, report, cases, models)
            if output == "json":
                for chunk in json_chunks(report):
                    click.echo(chunk, nl=False)
                click.echo()
            elif stdout_is_terminal():
                print_terminal(report)
            else:
                click.echo(render_text(report), nl=False)
        finally:  # (the JSON rows' file: shown, or a filter refused, it goes; else it waited for the collector)
            if isinstance(report.spilled, JsonRows):
                report.spilled.close()
    if drawer is None:
        return
    from clawstore.report.chart import NoScoresError

    path = chart or Path("outputs") / "charts" / (ids.evaluation_profile_id or "report") / "score_cost.png"
    try:
        drawer.draw(report, path)
    except NoScoresError as exc:  # a report without a chart is still a report
        click.echo(f"claw: warning: {exc}", err=True)
        return
    click.echo(f"chart written to: {path}", err=True)


def _check_filters(campaign: str, report: CampaignReport, cases: tuple[str, ...], models: tuple[str, ...]) -> None:
    """A misspelt filter value is an error naming it, not a report quietly without it (`--model ok --model typo`
    showed `ok` alone and exited 0); values each matching rows but none together: no row, not an empty report."""
    missed = [*(f"--case {c}" for c in cases if c not in report.head_cases),
              *(f"--model {m}" for m in models if m not in report.head_models)]
    if missed:
        hints = [f"{name}: {_some(ids)}" for name, ids, asked in (("its cases", report.head_cases, cases),
                                                                  ("its models", report.head_models, models))
                 if any(a not in ids for a in asked)]
        raise UsageError(f"no row of campaign {campaign}'s last build matches {' '.join(missed)} ({'; '.join(hints)})")
    if (cases or models) and not report.models:
        asked = " ".join([*(f"--case {c}" for c in cases), *(f"--model {m}" for m in models)])
        raise UsageError(f"no row of campaign {campaign}'s last build matches {asked} together")


def _some(ids: frozenset[str], shown: int = 10) -> str:
    """The first ids in order, and how many more (a campaign of 10,000 cases is not listed whole)."""
    first = sorted(ids)[:shown]
    return ", ".join(first) + (f" and {len(ids) - shown:,} more" if len(ids) > shown else "")


def _indexed(store: Store, root: Path, campaign: str) -> Path | None:
    """The manifest with the campaign's current head materialised (the report then reads its head's rows
    instead of flattening every record; the builds' history and the other campaigns are left to `claw
    query`), or None when it cannot be written (a store shared read-only): the report flattens, as it
    did before."""
    import duckdb

    from clawstore.errors import StoreError
    from clawstore.query.manifest import index_heads, manifest_dir

    try:
        index_heads(store, campaign, warn=lambda line: click.echo(f"claw: warning: {line}", err=True))
    except (OSError, StoreError, duckdb.Error) as exc:
        click.echo(f"claw: note: the query manifest was not updated ({exc}); reading the records instead", err=True)
        return None
    return manifest_dir(root)


def register(group: click.Group) -> None:
    group.add_command(report_command)
