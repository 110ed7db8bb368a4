"""`claw query`: SQL over the manifest of every stored result."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawstore.cli.common import existing_store_root, open_existing, store_option
from clawstore.errors import UsageError, one_line, utf8_argument
from clawstore.host.durable import atomic_file, output_problem
from clawstore.project.places import is_read_only, workspace_root

if TYPE_CHECKING:
    from clawstore.query.engine import QueryRows

TERMINAL_ROWS = 10_000  # drawn by rich on a terminal, which holds the whole table: past them a note, not rows
_EXPORTS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".md": "markdown"}


def _params(values: tuple[str, ...]) -> dict[str, str]:
    params = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {item!r}: expected NAME=VALUE")
        params[name.strip()] = utf8_argument(value, f"--param {name.strip()!r}")
    return params


class _SqlMayOpenWithAComment(click.Command):
    """SQL that opens with a comment (`-- …`, or `--…` with no space, as DuckDB allows) is the SQL, not an unknown
    option: no option name holds a space, and an option's `=` form names one of ours."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        options = [p for p in self.params if isinstance(p, click.Option)]
        names = {o for p in options for o in p.opts + p.secondary_opts}
        valued = {o for p in options if not p.is_flag for o in p.opts}
        sql = [i for i, arg in enumerate(args) if arg[:2] == "--" and arg.partition("=")[0] not in names
               and any(c.isspace() for c in arg) and (i == 0 or args[i - 1] not in valued)]
        if sql and "--" not in args:
            args = [a for i, a in enumerate(args) if i not in sql] + ["--"] + [args[i] for i in sql]
        return super().parse_args(ctx, args)


@click.command("query", cls=_SqlMayOpenWithAComment)
@click.argument("sql_or_name", required=False)
# (`--output`: the name report, compare and build give their format; it suggested `--out`, a file, instead)
@click.option("--format", "--output", "fmt", type=click.Choice(["table", "csv", "json", "markdown"]),
              default="table", show_default=True, help="Output format on stdout.")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result to FILE instead (.parquet, .csv, .json or .md by extension).")
@click.option("--param", "-p", "params", multiple=True, metavar="NAME=VALUE",
              help="Set a variable the SQL reads with getvariable('NAME') (repeatable).")
@click.option("--schema", "schema", is_flag=True, help="List every view and column with its meaning, then exit.")
@store_option
def query_command(sql_or_name: str | None, fmt: str, out: Path | None, params: tuple[str, ...],
                  store_dir: Path | None, schema: bool) -> None:
    """Run SQL (or the saved query NAME from queries/NAME.sql) over every stored result.

    Views: runs, checks, judgements, results, nodes (each campaign's current head), run_history, check_history,
    judgement_history, result_history, build_nodes (every build), builds, objects. See docs/query.md.
    """
    from clawstore.builder.cyclic_gc import collector_paused
    from clawstore.query.engine import reads_history
    from clawstore.query.manifest import index_current, index_pending, temporary_manifest
    from clawstore.query.saved import resolve_sql

    if schema:
        _print_schema(fmt)
        return
    if sql_or_name is None:
        raise UsageError("claw query: give SQL or a saved query NAME (or --schema to list the views)")
    export = None  # (the output checked before the index is brought up to date: a refusal costs nothing)
    if out is not None:
        export = _EXPORTS.get(out.suffix.lower())
        if export is None:
            raise UsageError(f"--out {out}: unknown extension (use {', '.join(_EXPORTS)})")
        problem = output_problem("--out", out)
        if problem is not None:
            raise UsageError(problem)
    root = existing_store_root(store_dir)
    # (the workspace's queries/, found as its store is: from any folder inside it; outside one, the cwd's)
    sql, saved_in = resolve_sql(utf8_argument(sql_or_name, "SQL"),  # (DuckDB: UTF-8 only)
                                workspace_root(Path.cwd()) or Path.cwd())
    with contextlib.ExitStack() as elsewhere:
        # The campaigns' current heads are brought up to date; the builds finished since the last query join
        # the manifest only for SQL that reads their history (a damaged build log is then named and skipped).
        index = index_pending if reads_history(sql) else index_current
        with collector_paused():  # (indexing makes acyclic rows: the collector's passes over them were a twelfth)
            try:
                index(open_existing(root), warn=_warn)
            except OSError:  # (a store it may not write, its manifest behind: a temporary one, outside it)
                if not is_read_only(root):
                    raise
                place = elsewhere.enter_context(temporary_manifest(root))
                click.echo(f"claw: note: store {root} is read-only and its query manifest is behind its builds: "
                           f"answered from a temporary manifest made from its records in {place.parent} (removed "
                           "after; a query of a large store takes as long as its first one)", err=True)
                index(open_existing(root), warn=_warn)
        _query(root, sql, saved_in, export, fmt, out, params)


def _warn(line: str) -> None:
    click.echo(f"claw: warning: {line}", err=True)


def _query(root: Path, sql: str, saved_in: Path | None, export: str | None, fmt: str, out: Path | None,
           params: tuple[str, ...]) -> None:
    """The query itself, its manifest up to date."""
    from clawstore.query.engine import export_parquet, reads_history, stream_query
    from clawstore.query.saved import is_packaged

    _note_untrusted(root)
    confined = saved_in is not None and not is_packaged(saved_in)
    try:
        if out is not None and export == "parquet":  # (DuckDB writes a temp file beside, renamed into place)
            count = export_parquet(root, sql, out, _params(params), store=lambda: open_existing(root),
                                   confined=confined)
        else:
            count = stream_query(root, sql, lambda rows: _write(rows, export or fmt, out), _params(params),
                                 store=lambda: open_existing(root), confined=confined)
    except UsageError as exc:  # a saved query's SQL error names its file (it read as the command line's SQL)
        if saved_in is None or not str(exc).startswith("query failed:"):
            raise
        raise UsageError(f"{one_line(str(saved_in))}: {exc}") from None
    if out is not None:
        click.echo(f"wrote {count} rows to {one_line(str(out))}", err=True)
    if count == 0:
        given = _params(params)
        _note_unknown_campaigns(root, [given[name] for name in CAMPAIGN_PARAMS if name in given])
        _note_unknown_ids(root, {name: given[name] for name in ID_PARAMS if name in given}, reads_history(sql))


def _note_unknown_campaigns(root: Path, campaigns: list[str]) -> None:
    """An empty answer to `--param campaign=X` (or paired_compare's `a=X`, `b=X`) where the store has no campaign X:
    said (a misspelt id, or a pin name `claw compare` would take, was an empty table and nothing else, read as "no
    results"); the answer stays the query's."""
    if not campaigns:
        return
    heads = sorted(name.removeprefix("campaigns/") for name in open_existing(root).list_refs("campaigns/"))
    named = "; ".join(heads[:NAMED_CAMPAIGNS]) + (f"; {len(heads) - NAMED_CAMPAIGNS} more"
                                                  if len(heads) > NAMED_CAMPAIGNS else "")
    for campaign in dict.fromkeys(c for c in campaigns if c not in heads):
        click.echo(f"claw: note: no campaign {one_line(campaign)} in this store (its campaigns: {named or 'none'}; "
                   "`claw refs` lists them)", err=True)


def _note_unknown_ids(root: Path, asked: dict[str, str], history: bool) -> None:
    """An empty answer to `--param case=X` or `--param model=X` (history's) where no row of the views the query read
    has X: said, as for a campaign, naming a few of the ids there are (one DuckDB query, only after an empty answer)."""
    from clawstore.query.engine import run_query

    if not asked:
        return
    views = ("nodes", "build_nodes") if history else ("nodes",)  # (the history is indexed only for SQL that reads it)
    sql = " UNION ".join(f"SELECT DISTINCT '{name}' AS param, {ID_PARAMS[name]} AS id FROM {view}"
                         for name in asked for view in views)
    found = run_query(root, sql, store=lambda: open_existing(root)).rows
    for name, value in asked.items():
        known = sorted(str(i) for param, i in found if param == name and i is not None)
        if value in known:
            continue
        named = "; ".join(known[:NAMED_CAMPAIGNS]) + (f"; {len(known) - NAMED_CAMPAIGNS} more"
                                                      if len(known) > NAMED_CAMPAIGNS else "")
        click.echo(f"claw: note: no {name} {one_line(value)} in this store (its {name}s: {one_line(named) or 'none'})",
                   err=True)


NAMED_CAMPAIGNS = 10  # in that note (a store of hundreds: the rest counted)
CAMPAIGN_PARAMS = ("campaign", "a", "b")  # the saved queries' parameters that name a campaign id
ID_PARAMS = {"case": "case_id", "model": "model_id"}  # those that name a case or a model (history's), and its column


def _write(rows: QueryRows, fmt: str, out: Path | None) -> int:
    """Write the rows as they come (a batch at a time: memory does not grow with the result); how many."""
    from clawstore.query.formats import WRITERS
    from clawstore.report.terminal import stdout_is_terminal

    if out is None:
        if fmt == "table" and stdout_is_terminal():
            return _draw(rows)
        # (click.echo: piped, it drops terminal escapes from the text, as it did from the whole result)
        return WRITERS[fmt](rows.columns, rows.batches(), lambda text: click.echo(text, nl=False))
    try:
        # (beside and renamed: a full disk, or an SQL error, mid-write leaves no torn file under the name)
        with atomic_file(out) as handle:
            return WRITERS[fmt](rows.columns, rows.batches(), lambda text: handle.write(text.encode("utf-8")))
    except OSError as exc:
        raise UsageError(f"--out {one_line(str(out))}: {exc.strerror or exc}") from None


def _draw(rows: QueryRows) -> int:
    """On a terminal, rich draws the first TERMINAL_ROWS rows (it holds a whole table to measure it); the rows past
    them are counted and said to be left out."""
    from clawstore.query.formats import cell, numeric_columns
    from clawstore.report.terminal import print_tables
    from clawstore.report.terminal import table as rich_table

    shown: list[tuple[Any, ...]] = []
    count = 0
    for batch in rows.batches():
        shown.extend(batch[:TERMINAL_ROWS - len(shown)])
        count += len(batch)
    print_tables(rich_table(rows.columns, [[cell(v) for v in row] for row in shown],
                            numeric_columns(rows.columns, shown)))
    if count > len(shown):
        click.echo(f"claw: note: {count - len(shown)} more rows not shown (a terminal shows the first {TERMINAL_ROWS});"
                   " `--format csv`, `--out FILE` or a pipe gives them all", err=True)
    return count


def _note_untrusted(root: Path) -> None:
    """Rows of campaigns kept apart as untrusted are in the current views: say so on every query."""
    from clawstore.query.heads import read_untrusted
    from clawstore.query.manifest import manifest_dir

    kept = read_untrusted(manifest_dir(root))
    if kept:
        signers = ", ".join(sorted({signer for _, signer in kept.values()}))
        click.echo(f"claw: note: {len(kept)} campaign(s) kept apart as untrusted (signed by {signers}) are in the "
                   "current views with trusted = false; add `where trusted` to leave them out", err=True)


def _print_schema(fmt: str) -> None:
    """Every view and column with its one-line meaning: a table per view on a terminal, rows otherwise."""
    from clawstore.query.formats import render
    from clawstore.query.schema import VIEW_DOCS, schema_rows, view_columns
    from clawstore.report.terminal import print_tables, stdout_is_terminal
    from clawstore.report.terminal import table as rich_table

    if fmt == "table" and stdout_is_terminal():
        print_tables(*(rich_table(["column", "type", "meaning"], [[c.name, c.type, c.doc] for c in cols],
                                  [False, False, False], title=f"{view} — {VIEW_DOCS.get(view, '')}")
                       for view, cols in view_columns().items()))
        return
    if fmt == "table":
        for view, cols in view_columns().items():
            click.echo(f"{view}: {VIEW_DOCS.get(view, '')}")
            width = max(len(c.name) for c in cols)
            for c in cols:
                click.echo(f"  {c.name.ljust(width)}  {c.type:<10} {c.doc}")
        return
    click.echo(render(fmt, ["view", "column", "type", "meaning"], schema_rows()), nl=False)


def register(group: click.Group) -> None:
    group.add_command(query_command)
