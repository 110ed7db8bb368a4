"""Options and helpers shared by several commands (build, status, explain and plan share the campaign's)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from clawstore.errors import UsageError

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign
    from clawstore.store.store import Store

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


def resolve_store_dir(store_dir: Path | None, workspace_root: Path | None = None) -> Path:
    """--store wins, then $CLAW_STORE, then store/ in the workspace root (or the cwd)."""
    if store_dir is not None:
        return store_dir
    env = os.environ.get("CLAW_STORE")
    if env:
        return Path(env)
    return (workspace_root or Path.cwd()) / "store"


def workspace_store_dir(store_dir: Path | None, must_exist: bool = False) -> Path:
    """The store a command outside a campaign uses: --store, $CLAW_STORE, else store/ of the cwd's workspace.

    `must_exist`: a command that reads a store, run with neither a workspace nor a store here, says what
    claw looked for and where (as build and validate do: config/references.py) instead of "no store"."""
    from clawstore.config import find_workspace_root
    from clawstore.config.references import no_workspace_message
    from clawstore.errors import StoreError
    from clawstore.store.layout import FORMAT_FILE

    try:
        root: Path | None = find_workspace_root(Path.cwd())
    except UsageError:  # no configs/ above: the store still defaults to ./store
        root = None
    path = resolve_store_dir(store_dir, root)
    if must_exist and root is None and store_dir is None and not os.environ.get("CLAW_STORE") \
            and not (path / FORMAT_FILE).is_file():
        raise StoreError(no_workspace_message(Path.cwd().absolute(), path.absolute()))
    return path


def never_built_message(store: Store, campaign_id: str) -> str | None:
    """None when the campaign has a head; else why not, with the evaluated campaigns of the same runs.

    A campaign named without --evaluation-profile is the runs-only one (`…__none`); users who built
    with an evaluation profile and left it off later are told which flag they meant.
    """
    from clawstore.builder.buildlog import head_ref

    if store.get_ref(head_ref(campaign_id)) is not None:
        return None
    message = f"campaign {campaign_id} has never been built in store {store.root}"
    if campaign_id.endswith("__none"):
        prefix = head_ref(campaign_id[: -len("none")])
        evaluated = sorted(name[len(prefix):] for name in store.list_refs(prefix))
        if evaluated:
            return message + "; did you mean " + " or ".join(f"--evaluation-profile {e}" for e in evaluated) + "?"
    return message + " (run claw build)"


def require_built(store: Store, campaign_id: str, kept_apart_ok: bool = False) -> None:
    """UsageError unless the campaign has a head (or, with `kept_apart_ok`, one imported --untrusted)."""
    message = never_built_message(store, campaign_id)
    if message is None:
        return
    if kept_apart_ok:
        from clawstore.store.apart import kept_apart_head

        if kept_apart_head(store, campaign_id) is not None:
            return
    raise UsageError(message)


# JSON output is compact (one line): with `indent`, Python's encoder falls back to its slow pure-Python
# path, which costs more than the whole no-op build of a large campaign. Pipe through `jq` to read it.
OUTPUT = click.option("--output", "output", type=click.Choice(["text", "json"]), default="text",
                      show_default=True)


def campaign_request(suite: str, run_profile: str, evaluation_profile: str | None, cases: tuple[str, ...],
                     models: tuple[str, ...]) -> Any:
    from clawstore.builder.api import CampaignRequest

    return CampaignRequest(Path.cwd(), suite, run_profile, evaluation_profile, tuple(cases), tuple(models))


class Stores:
    """The store of the campaign's workspace (or --store / $CLAW_STORE), opened after the configs load."""

    def __init__(self, store_dir: Path | None):
        self.store_dir = store_dir
        self.store: Store | None = None

    def exists(self, root: Path) -> bool:
        from clawstore.store.layout import FORMAT_FILE

        return (resolve_store_dir(self.store_dir, root) / FORMAT_FILE).is_file()

    def open(self, root: Path) -> Any:
        from clawstore.store import Store

        if self.store is None:
            self.store = Store(resolve_store_dir(self.store_dir, root))
        return self.store


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def loaded_campaign(request: Any) -> Any:
    """The campaign the request names, its configs loaded (the cyclic collector paused: builder/gcpause.py)."""
    from clawstore.builder.api import load_campaign
    from clawstore.builder.gcpause import collector_paused

    with collector_paused():
        return load_campaign(request)


def remote_pull_parts(name: str, campaign: Campaign, stores: Stores) -> tuple[Any, Any, str, Callable[[], set[str]]]:
    """What the pull before a `--remote NAME` build or plan needs: the store, the remote, the campaign's
    head ref, and the keys the build would execute (remote/live.py, pull_before)."""
    from clawstore.builder.api import unbuilt_keys
    from clawstore.builder.buildlog import head_ref
    from clawstore.remote.config import resolve_remote

    target = resolve_remote(campaign.root, name)  # (a bad name or location is refused before a store is made)
    store = stores.open(campaign.root)
    return store, target, head_ref(campaign.campaign_id), lambda: unbuilt_keys(campaign, store)
