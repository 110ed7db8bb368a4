"""`claw build`'s no-op path: a plain rebuild whose inputs did not change is answered from its stamp
(builder/stamp.py), and a build that completed its campaign leaves one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from clawstore.project.places import resolve_store_dir, workspace_root

if TYPE_CHECKING:
    from clawstore.builder.engine import BuildReport
    from clawstore.builder.stamp import Layers, Recorder
    from clawstore.config.catalog import CaseEntry
    from clawstore.remote.live import RemoteView
    from clawstore.store.documents import Stamp

# The layers in the order `claw status` lists them, and their names in counts.
LAYERS = {"run": "runs", "checks": "checks", "judge": "judgements", "result": "results"}


class Stamping(NamedTuple):
    store_root: Path
    digest: str  # of the request: the flags, the directory, the store (and the remote's state)
    workspace: Path
    remote: RemoteView | None  # --remote: the remote as it was when the digest was taken


class Fresh(NamedTuple):
    """A campaign whose stamp still matches: every node of it is fresh."""

    campaign_id: str
    layers: Layers

    @property
    def nodes(self) -> int:
        return sum(n for _, kinds in self.layers for n in kinds.values())


def stamping(cwd: Path, flags: tuple[str | None, ...], store_dir: Path | None, remote: str | None = None
             ) -> Stamping | None:
    """Where a build may find or leave its stamp; None outside a workspace, or when the remote cannot
    be listed (the full path says what is wrong)."""
    from clawstore.builder import stamp

    root = workspace_root(cwd)
    if root is None:
        return None
    store_root = resolve_store_dir(store_dir, root).absolute()
    view = None
    if remote is not None:
        from clawstore.remote.live import view_remote

        view = view_remote(root, remote)
        if view is None:
            return None
        flags += ("--remote", *view.state)
    return Stamping(store_root, stamp.request_digest(cwd, store_root, flags), root, view)


def matching_stamp(found: Stamping) -> Stamp | None:
    """The stamp under `found`'s digest if it still holds (with --remote: if the head this build last
    pushed is still the remote's)."""
    from clawstore.builder import stamp

    doc = stamp.match(found.store_root, found.digest)
    if doc is None:
        return None
    if found.remote is not None and found.remote.head(doc.campaign_id) != doc.head:
        return None
    return doc


class Stamped(NamedTuple):
    """The stamp of the campaign's last plain build when all but its reads still holds: the reads changed since."""

    doc: Stamp
    changed: list[str]
    rows_sized: bool  # its rows file there, of its size (builder/stamp.py `match`)


def stamped(found: Stamping | None) -> Stamped | None:
    from clawstore.builder import stamp

    differs = None if found is None else stamp.differing(found.store_root, found.digest)
    if found is None or differs is None:
        return None
    return Stamped(*differs, stamp.rows_sized(found.store_root, found.digest, differs[0]))


def fresh(found: Stamped | None) -> Fresh | None:
    """The campaign's layers when the stamp of its last plain build still matches: nothing it depends on
    changed since that build completed it, so every node is fresh. None: plan (or per case: builder/casestamp.py)."""
    from clawstore.builder import stamp

    if found is None or found.changed or not found.rows_sized:
        return None
    layers = stamp.layers_of(found.doc)
    return None if layers is None else Fresh(found.doc.campaign_id, layers)


@contextlib.contextmanager
def recording(found: Stamping | None) -> Iterator[Recorder | None]:
    """What the build reads while it loads and plans (the stamp's `reads`); nothing without a stamping."""
    if found is None:
        yield None
        return
    from clawstore.builder import stamp

    with stamp.recording(found.workspace, found.store_root) as reads:
        yield reads


def leave_stamp(before: Stamping, after: Stamping | None, reads: Recorder, report: BuildReport,
                cases: Sequence[CaseEntry]) -> None:
    """Leave a stamp after a build that completed its campaign (`cases`: its cases, for the stamp per case);
    forget an older one otherwise. With --remote, `after` is the stamping under the remote's state as this build's
    push left it (the one taken before is stale)."""
    from clawstore.builder import stamp
    from clawstore.builder.casestamp import cases_of, imports_hooks

    target: Stamping | None = before
    if before.remote is not None:
        target = after
        if target is None or target.digest != before.digest:
            stamp.forget(before.store_root, before.digest)
        if target is None:
            return
    complete = report.exit_code == 0 and report.build_id is not None and not report.stopped and not report.pending
    layers = _layers(report)
    if not (complete and not report.openclaw and not imports_hooks(cases)
            and stamp.write(target.store_root, target.digest, reads, report.campaign, report.rows, report.counts,
                            layers, cases_of(cases, layers))):
        stamp.forget(target.store_root, target.digest)


def _layers(report: BuildReport) -> Layers:
    """Nodes per model and layer, in the order `claw status` lists them (its runs' order, then run,
    checks, judge, result)."""
    return [(model, {kind: kinds[kind] for kind in LAYERS if kinds[kind]}) for model, kinds in report.layers.items()]
