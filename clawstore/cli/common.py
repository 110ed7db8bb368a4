"""Options and helpers shared by several commands (build, status, explain and plan share the campaign's)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import click

from clawstore.project.places import (  # noqa: F401 - the commands' helpers, here with the options
    open_store,
    refuse_read_only,
    require_built,
    resolve_store_dir,
    workspace_store_dir,
)

if TYPE_CHECKING:
    from clawstore.project.front import Project
    from clawstore.store.store import Store



class _Closable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


def closed_with_command(opened: _C) -> _C:
    """`opened` (a Store, a Project), closed when the running command ends: a command run in a process that
    goes on (a test's, a library user's) leaves no file of the store open."""
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(opened.close)
    return opened


store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $CLAW_STORE, else store/ in the workspace root).",
)


def campaign_options(func):
    """--suite/--run-profile/--evaluation-profile (+ --case/--model filters) and --root."""
    options = [
        click.option("--suite", "suite", required=True, help="Suite ID or path to its YAML."),
        click.option("--run-profile", "run_profile", required=True, help="Run profile ID or path."),
        click.option("--evaluation-profile", "evaluation_profile", default=None,
                     help="Evaluation profile ID or path."),
        click.option("--case", "cases", multiple=True, help="Only this case (repeatable)."),
        click.option("--model", "models", multiple=True, help="Only this model_id (repeatable)."),
        store_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


# JSON output is compact (one line): with `indent`, Python's encoder falls back to its slow pure-Python
# path, which costs more than the whole no-op build of a large campaign. Pipe through `jq` to read it.
OUTPUT = click.option("--output", "output", type=click.Choice(["text", "json"]), default="text",
                      show_default=True)


def say(line: str) -> None:
    """A note or warning of the command, on stderr (where the front's `say` goes: clawstore/project/front.py)."""
    click.echo(line, err=True)


def campaign_project(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                     models: tuple[str, ...], store_dir: Path | None, create_store: bool = True,
                     quiet: bool = False, reads_only: bool = False) -> Project:
    """The front over the campaign the flags name (`quiet`: the configs' warnings unsaid; `reads_only`: an absent
    store is read as empty, not made)."""
    from clawstore.builder.request import CampaignRequest
    from clawstore.project.front import Project

    request = CampaignRequest(Path.cwd(), suite, run_profile, evaluation_profile, tuple(cases), tuple(models))
    return closed_with_command(Project(store_dir, _unsaid if quiet else say, request, create_store=create_store,
                                       absent_empty=reads_only))


def store_project(store_dir: Path | None) -> Project:
    """The front over a store outside a campaign (--store, $CLAW_STORE, else the cwd's workspace's)."""
    from clawstore.project.front import Project

    return closed_with_command(Project(store_dir, say))


def _unsaid(_line: str) -> None:
    pass


def existing_store_root(store_dir: Path | None) -> Path:
    """The store a reading command uses; StoreError "no store at ..." (exit 3) when there is none: never made."""
    from clawstore.store.services.migrate import open_layout

    root = workspace_store_dir(store_dir, must_exist=True)
    open_layout(root, create=False)
    return root


def open_existing(root: Path) -> Store:
    from clawstore.store import Store

    return closed_with_command(Store(root, create=False))


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def size_text(count: int) -> str:
    """A size as gc, archives and `claw store stats` say it: `512 B`, `1.5 KiB` … `2.0 TiB`."""
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"

