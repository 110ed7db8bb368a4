"""Where a command's store is (--store, $CLAW_STORE, else store/ of the workspace) and whether a campaign has
been built in it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import StoreError, UsageError

if TYPE_CHECKING:
    from clawstore.store.store import Store


def resolve_store_dir(store_dir: Path | None, workspace_root: Path | None = None) -> Path:
    """--store wins, then $CLAW_STORE, then store/ in the workspace root (or the cwd). A leading `~` is the home
    directory (a quoted `CLAW_STORE="~/runs"` made a directory named `~`)."""
    if store_dir is not None:
        return store_dir.expanduser()
    env = os.environ.get("CLAW_STORE")
    if env:
        return Path(env).expanduser()
    return (workspace_root or Path.cwd()) / "store"


def workspace_root(cwd: Path) -> Path | None:
    """The workspace above `cwd` (the nearest directory holding configs/), None outside one."""
    from clawstore.config import find_workspace_root

    try:
        return find_workspace_root(cwd)
    except UsageError:
        return None


def workspace_store_dir(store_dir: Path | None, must_exist: bool = False) -> Path:
    """The store a command outside a campaign uses: --store, $CLAW_STORE, else store/ of the cwd's workspace.

    `must_exist`: a command that reads a store, run with neither a workspace nor a store here, says what
    claw looked for and where (as build and validate do: config/references.py) instead of "no store"."""
    from clawstore.config.references import no_workspace_message
    from clawstore.errors import StoreError
    from clawstore.store.core.layout import FORMAT_FILE

    root = workspace_root(Path.cwd())  # (no configs/ above: the store still defaults to ./store)
    path = resolve_store_dir(store_dir, root)
    if must_exist and root is None and store_dir is None and not os.environ.get("CLAW_STORE") \
            and not (path / FORMAT_FILE).is_file():
        raise StoreError(no_workspace_message(Path.cwd().absolute(), path.absolute()))
    return path


def open_store(store_dir: Path | None, create: bool = False, root: Path | None = None) -> Store:
    """The store of --store/$CLAW_STORE, else of workspace `root` (or the cwd's): made only with `create`."""
    from clawstore.store import Store

    path = resolve_store_dir(store_dir, root) if root is not None else workspace_store_dir(store_dir, not create)
    return Store(path, create=create)


def never_built_message(store: Store, campaign_id: str, kept: int | None = None) -> str | None:
    """None when the campaign has a head; else why not, with the evaluated campaigns of the same runs.

    A campaign named without --evaluation-profile is the runs-only one (`…__none`); users who built
    with an evaluation profile and left it off later are told which flag they meant. A build of it killed before it
    wrote its head is named (`kept`: the finished runs `claw status` counts fresh): "has never been built" beside
    fresh nodes, and its log's count of 0 (written every ~2 s), read as paid work lost.
    """
    from clawstore.builder.buildlog import head_ref

    if store.get_ref(head_ref(campaign_id)) is not None:
        return None
    from clawstore.project.absent import shown_root

    killed = _killed_message(store, campaign_id, kept)
    if killed is not None:
        return f"campaign {campaign_id} has no head in store {shown_root(store)}: {killed}"
    message = f"campaign {campaign_id} has never been built in store {shown_root(store)}"
    if campaign_id.endswith("__none"):
        prefix = head_ref(campaign_id[: -len("none")])
        evaluated = sorted(name[len(prefix):] for name in store.list_refs(prefix))
        if evaluated:
            return message + "; did you mean " + " or ".join(f"--evaluation-profile {e}" for e in evaluated) + "?"
    return message + " (run claw build)"


def head_stopped(store: Store, campaign_id: str) -> dict[str, Any] | None:
    """The campaign head's `stopped` with its build's id (`{"build_id": …, "by": …, "nodes_not_started": N}`), None
    when it has no head or its build was not stopped: a node not started is STALE or NEVER_BUILT in `claw status`'s
    table, and this says why. (The head's first object only: its nodes are in parts.)"""
    from clawstore.builder.buildlog import head_ref
    from clawstore.store.documents import read_stopped

    head_id = store.get_ref(head_ref(campaign_id))
    if head_id is None:
        return None
    data = store.get_json(head_id)
    stopped = read_stopped(data, f"campaign head {head_id}") if isinstance(data, dict) else None
    if stopped is None:
        return None
    build_id = data.get("build_id")
    return {"build_id": build_id if isinstance(build_id, str) else None, **stopped}


def _killed_message(store: Store, campaign_id: str, kept: int | None) -> str | None:
    """What the builds of `campaign_id` killed before they wrote its head left (None: none was)."""
    from clawstore.spend.killed import killed_builds

    killed = killed_builds(store, campaign_id)
    if not killed:
        return None
    ids = [k.build_id for k in killed]
    named = f"build {ids[0]} was" if len(ids) == 1 else f"builds {', '.join(ids)} were"
    if kept is None:
        finished = "what finished is kept in the store, and the next claw build reuses it without requesting it again"
    elif kept:
        logged = sum(k.executed for k in killed)  # (its log, written every ~2 s, may count fewer)
        finished = (f"{kept} finished run(s) are kept in the store (FRESH), and the next claw build reuses them "
                    "without requesting them again" + (f" (its log's last write had recorded {logged})"
                                                       if logged < kept else ""))
    else:
        finished = "no run finished; the next claw build sends them"
    return f"{named} killed before it wrote its head; {finished}"


def require_built(store: Store, campaign_id: str, kept_apart_ok: bool = False) -> None:
    """UsageError unless the campaign has a head (or, with `kept_apart_ok`, one imported --untrusted)."""
    message = never_built_message(store, campaign_id)
    if message is None:
        return
    if kept_apart_ok:
        from clawstore.store.untrusted import kept_apart_head

        if kept_apart_head(store, campaign_id) is not None:
            return
    raise UsageError(message)


def is_read_only(root: Path) -> bool:
    """Whether the store at `root` cannot be written (a shared store mounted read-only, or another user's)."""
    from clawstore.store.core.layout import StoreLayout

    tmp = StoreLayout(root).tmp
    return os.path.isdir(tmp) and not os.access(tmp, os.W_OK)


def refuse_read_only(root: Path, needs: str) -> None:
    """StoreError (exit 3) when the store at `root` cannot be written (a shared store mounted read-only, or another
    user's) by a command that must write it: `needs` says what it writes (`push keeps what it pushed under remotes/`).
    Before session 73 each named the first file it failed to write (`tmp/….json: Read-only file system`)."""
    if is_read_only(root):
        raise StoreError(f"store {root} is read-only: {needs}")
