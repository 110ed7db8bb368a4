"""What a campaign is made of: its head's closure in the store, and the config files that defined it.

`export_campaign` writes both into one archive (clawstore/store/services/archive.py); `adopt_imported_head`
makes an imported campaign visible to `claw query` the way a local build would.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.builder.buildlog import head_ref
from clawstore.config.containment import escapes, real_root
from clawstore.errors import CorruptObjectError, StoreError, UsageError
from clawstore.host.scratch import scratch_dir
from clawstore.store.buildlogs import build_log_path
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.locks import EXPORT_LEASE_PREFIX
from clawstore.store.core.names import is_name, name_problem
from clawstore.store.headdoc import is_parted, iter_nodes, write_inline
from clawstore.store.kept import beyond_heads
from clawstore.store.reach import Reach, head_closure
from clawstore.store.services.archive import ArchiveError, ArchiveSummary, write_archive
from clawstore.store.services.archive_import import ArchiveContents, ContentCheck
from clawstore.store.trees import NotATreeError, UnsafeTreeError, check_entries, parse_tree
from clawstore.values import jsontext

if TYPE_CHECKING:
    from clawstore.config.campaign import Campaign
    from clawstore.config.catalog import LoadedCase
    from clawstore.store import ArchiveManifest
    from clawstore.store.store import Store

_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc",)
_KIND_DIRS = {"suite": "suites", "run_profile": "run_profiles", "evaluation_profile": "evaluation_profiles"}


def campaign_head(store: Store, campaign_id: str) -> str:
    head_id = store.get_ref(head_ref(campaign_id))
    if head_id is None:
        raise UsageError(f"campaign {campaign_id} has never been built in store {store.root} (run claw build)")
    return str(head_id)


# ---------------------------------------------------------------------------------------------- configs

def config_files(campaign: Campaign) -> dict[str, Path]:
    """{path relative to the workspace root (posix): source file} for everything that defines the campaign:
    the suite, run and evaluation profiles (and its judge prompt file), each case directory (without
    nested cases) plus the files it references, and the agents' directories."""
    root = Path(campaign.root).absolute()
    files: dict[str, Path] = {}

    def add(path: Path, fallback: str | None = None, required: bool = True) -> None:
        path = Path(os.path.normpath(Path(path).absolute()))
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            if fallback is None:
                if required:
                    raise UsageError(f"cannot archive {path}: it is outside the workspace {root}") from None
                return
            rel = fallback
        if path.is_dir() and not path.is_symlink():
            _add_dir(path, rel, files)
        elif path.exists() or path.is_symlink():
            files[rel] = path

    add(campaign.suite_path, f"configs/suites/{campaign.suite.suite_id}.yaml")
    add(campaign.run_profile_path, f"configs/run_profiles/{campaign.run_profile.run_profile_id}.yaml")
    if campaign.evaluation_profile is not None:
        profile_id = campaign.evaluation_profile.evaluation_profile_id
        add(campaign.evaluation_profile_path, f"configs/evaluation_profiles/{profile_id}.yaml")
        prompt = _prompt_file(campaign)
        if prompt is not None:
            fallback = None
            if not Path(campaign.evaluation_profile_path).absolute().is_relative_to(root):
                written = os.path.relpath(prompt, Path(campaign.evaluation_profile_path).parent)
                if not written.startswith(".."):
                    fallback = f"configs/evaluation_profiles/{Path(written).as_posix()}"
            add(prompt, fallback)
    seen: set[str] = set()
    for item in campaign.items:
        loaded = item.case
        if loaded.case_id in seen:
            continue
        seen.add(loaded.case_id)
        add(loaded.dir)
        for path in _case_references(loaded):
            add(path)
        for path in _host_files(loaded):
            add(path, required=False)  # a host file outside the workspace is machine state, not config
    for agent in campaign.agents.values():
        add(agent.dir)
    return dict(sorted(files.items()))


def _prompt_file(campaign: Campaign) -> Path | None:
    source = campaign.judge_system_prompt_source or ""
    kind, _, written = source.partition(":")
    if kind not in ("path", "default") or not written:
        return None
    expanded = Path(os.path.expanduser(written))
    return expanded if expanded.is_absolute() else Path(campaign.evaluation_profile_path).parent / expanded


def _case_references(loaded: LoadedCase) -> list[Path]:
    """Files a case needs to be rebuilt: attachments, message sources, hook files."""
    case = loaded.case
    paths = list(loaded.attachment_paths)
    for message in [*case.input.messages, *case.input.turns]:
        if message.source is not None:
            paths.append(loaded.resolve_path(message.source.path))
    for check in case.deterministic_checks:
        if check.python_hook is not None and check.python_hook.path is not None:
            paths.append(loaded.resolve_path(check.python_hook.path))
    return paths


def _host_files(loaded: LoadedCase) -> list[Path]:
    """Relative paths of file checks that exist beside the case (absolute ones target the sandbox)."""
    found = []
    for check in loaded.case.deterministic_checks:
        decl = check.declarative
        if decl is not None and decl.path and not os.path.isabs(os.path.expanduser(decl.path)):
            path = loaded.resolve_path(decl.path)
            if path.exists():
                found.append(path)
    return found


def _add_dir(directory: Path, rel: str, files: dict[str, Path]) -> None:
    """A directory's files, skipping nested case directories (they are cases of their own) and caches."""
    for current, dirnames, filenames in os.walk(directory):
        here = Path(current)
        keep = []
        for name in sorted(dirnames):
            child = here / name
            if name in _SKIP_DIRS:
                continue
            if child.is_symlink():
                filenames.append(name)  # recorded as a link, never followed
                continue
            if (child / "test.yaml").is_file():
                continue  # another case's directory
            keep.append(name)
        dirnames[:] = keep
        base = here.relative_to(directory).as_posix()
        for name in sorted(filenames):
            if name.endswith(_SKIP_SUFFIXES):
                continue
            files[f"{rel}/{name}" if base == "." else f"{rel}/{base}/{name}"] = here / name


def snapshot_configs(store: Store, campaign: Campaign) -> str:
    """Store the campaign's config files as one tree (a workspace with `configs/` at its root)."""
    files = config_files(campaign)
    root_real = real_root(Path(campaign.root))
    for source in files.values():
        outside = None if source.is_symlink() else escapes(source, root_real)  # a link is kept as a link
        if outside is not None:
            raise UsageError(f"cannot archive {source}: it resolves to {outside}, outside the workspace")
    with scratch_dir("claw-configs-") as tmp:
        stage = Path(tmp) / "workspace"
        stage.mkdir()
        for rel, source in files.items():
            target = stage / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
                continue
            try:
                shutil.copyfile(source, target)
            except OSError as exc:
                raise UsageError(f"cannot archive {source}: {exc.strerror}") from None
            executable = os.stat(source).st_mode & stat.S_IXUSR
            os.chmod(target, 0o755 if executable else 0o644)
        return str(store.put_tree(stage))


# ---------------------------------------------------------------------------------------------- export

def export_campaign(store: Store, campaign: Campaign, out: Path,
                    beyond_head: Callable[[Mapping[str, str]], Mapping[str, str]] | None = None) -> ArchiveSummary:
    """Write the campaign's head, everything it reaches, its action-cache entries and its configs. `beyond_head`, given
    the head's entries (key -> record), answers the results a build here would reuse that the head does not name (what
    a killed build finished): their entries and everything their records reach are written too."""
    campaign_id = campaign.campaign_id
    head_id = campaign_head(store, campaign_id)
    # The lease names the head: a gc running meanwhile keeps it even if a build moves the ref on.
    with store.lease(EXPORT_LEASE_PREFIX + head_id):
        if not store.has(head_id):
            raise StoreError(f"campaign {campaign_id}: its head {head_id} vanished (collected during the "
                             "export?); run the export again")
        closure = head_closure(store, head_id, packed=True)
        actions = closure.actions
        beyond = beyond_head(actions) if beyond_head is not None else {}
        if beyond:
            _reach_whole(store, beyond.values())
            actions = dict(sorted({**actions, **beyond}.items()))  # (a build here reuses these, not the head's)
        tree_id = snapshot_configs(store, campaign)
        config_reach = Reach(store)
        config_reach.mark([tree_id, *beyond.values()])
        head = closure.head
        manifest = {
            "campaign": head.get("campaign") or {"id": campaign_id},
            "build_id": head.get("build_id"),
            "head": head_id,
            "refs": {head_ref(campaign_id): head_id},
            "actions": actions,
            "configs": {"tree": tree_id, "files": [e.to_json() for e in store.read_tree(tree_id)]},
        }
        digests = closure.digests + b"".join(bytes.fromhex(h) for h in config_reach.marked)
        del closure, config_reach  # (the closure's digests are sorted into the archive's)
        return write_archive(store, Path(out), manifest, digests)


def _reach_whole(store: Store, records: Iterable[str]) -> None:
    """StoreError when something `records` reach is missing (as head_closure says it of a head's)."""
    reach = Reach(store)
    reach.mark(records)
    if reach.missing:
        hexdigest, parent = sorted(reach.missing.items())[0]
        named = f" (named by {PREFIX}{parent})" if parent else ""
        raise StoreError(f"a result of the campaign is incomplete: object {PREFIX}{hexdigest}{named} is missing; "
                         "run claw fsck")


# ---------------------------------------------------------------------------------------------- import

def campaign_archive_check(where: str, with_configs: bool) -> ContentCheck:
    """What an archive's objects must say before an import publishes anything (archives are hostile
    input): one campaign head, refs naming only it, names that follow the store's naming rule, and a
    config tree that checks out inside its directory (required when `with_configs`)."""

    def check(manifest: ArchiveManifest, contents: ArchiveContents) -> None:
        try:
            _check_campaign_archive(manifest, contents, with_configs)
        except ArchiveError as exc:
            raise ArchiveError(f"{where}: {exc}") from None
        except (UnsafeTreeError, NotATreeError, CorruptObjectError) as exc:
            raise ArchiveError(f"{where}: {exc}") from None

    return check


def _check_campaign_archive(manifest: ArchiveManifest, contents: ArchiveContents, with_configs: bool) -> None:
    head_id = manifest.head
    if head_id is None:
        raise ArchiveError("holds no campaign head (manifest field 'head')")
    campaign_id = manifest.campaign.get("id")
    for name, target in manifest.refs.items():
        if name != head_ref(str(campaign_id)) or target != head_id:
            raise ArchiveError(f"manifest field 'refs' may only point {head_ref(str(campaign_id))} at the head, "
                               f"not {name[:80]!r}")
    def read_part(oid: str) -> Any:
        if not (is_oid(oid) and contents.has(oid)):
            raise ArchiveError(f"head {head_id}: part {oid[:80]} is not in the archive")
        return jsontext.loads(contents.read(oid))

    try:
        head = jsontext.loads(contents.read(head_id))
    except ValueError:
        head = None
    if not isinstance(head, dict) or not (is_parted(head) or isinstance(head.get("nodes"), list)):
        raise ArchiveError(f"head {head_id} is not a campaign head (an object with a nodes list)")
    if why := name_problem(head.get("build_id")):
        raise ArchiveError(f"head {head_id}: build_id {why}")
    campaign = head.get("campaign")
    if not isinstance(campaign, dict) or campaign.get("id") != campaign_id:
        raise ArchiveError(f"head {head_id}: campaign does not match the manifest's ({campaign_id!r})")
    try:  # (a part at a time)
        for index, node in enumerate(iter_nodes(head, read_part)):
            if (not isinstance(node, dict) or not isinstance(node.get("kind"), str)
                    or not isinstance(node.get("address"), dict) or not is_oid(node.get("key"))
                    or not (node.get("record") is None or contents.has(node["record"]))):
                raise ArchiveError(f"head {head_id}: node {index} is not a node naming a record of the archive")
    except ValueError:  # a part that is not JSON
        raise ArchiveError(f"head {head_id} is not a campaign head (an object with a nodes list)") from None
    except StoreError as exc:
        raise ArchiveError(f"head {head_id}: {exc}") from None
    tree_id = configs_of(manifest)
    if tree_id is None:
        if with_configs:
            raise ArchiveError("holds no configs (--configs-to needs them)")
        return
    entries = parse_tree(tree_id, contents.read(tree_id))
    check_entries(tree_id, entries)
    for entry in entries:
        if entry.path != "configs" and not entry.path.startswith("configs/"):
            raise ArchiveError(f"config tree {tree_id}: entry {entry.path[:80]!r} is outside configs/")
        if entry.object is not None and not contents.has(entry.object):
            raise ArchiveError(f"config tree {tree_id}: entry {entry.path[:80]!r} names a missing object")
        if entry.object is None:
            continue
        size, exact = contents.content_size(entry.object, entry.size)
        if size != entry.size:  # (a few KB of zstd can hold GBs: checked here, never written out)
            raise ArchiveError(f"config tree {tree_id}: entry {entry.path[:80]!r} has size {entry.size} but its "
                               f"object holds {size if exact else f'more than {entry.size}'} bytes")


def adopt_imported_head(store: Store, head_id: str) -> str | None:
    """Give an imported head a build log (it has that shape), so `claw query` sees it and indexes it when first
    asked, as it does a local build's. The log is written a part of the head at a time.

    Returns the build id, or None if the store already has that build's log (nothing to do)."""
    head = store.get_json(head_id)
    build_id = head.get("build_id") if isinstance(head, dict) else None
    if not is_name(build_id):  # checked before the import published anything; never a path otherwise
        return None
    path = build_log_path(store.root, build_id)
    if path.exists():
        return None
    from clawstore.host.durable import atomic_file

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, registry=store.tmp_dir) as out:
        write_inline(out, head, store.get_json)  # (its nodes inline, as a log has)
    return build_id


def beyond_head_records(store: Store, manifest: ArchiveManifest) -> list[str]:
    """The records an imported archive's entries name that its head's nodes do not: what the exporting store's build
    would have reused beyond its head (a killed build's results, export_campaign's `beyond_head`), which no head here
    names until a build adopts them. Kept from gc by the import's `imports/archive-<id>` ref (store/kept.py): before
    session 77 only the grace period kept them, and a build after a `claw gc --grace 0` paid for them again
    (tests/gc/test_archive_elsewhere.py). An archive of a head alone has none."""
    if manifest.head is None:
        return []
    return beyond_heads(store, [manifest.head], manifest.actions)


def configs_of(manifest: ArchiveManifest) -> str | None:
    tree = manifest.configs_tree
    return tree if tree is not None and tree.startswith(PREFIX) else None
