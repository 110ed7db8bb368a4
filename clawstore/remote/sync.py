"""`claw push` / `claw pull`: move what the other side lacks as verified bundles, then refs by CAS.

Remote layout (under the remote's prefix):

    packs/<hex>.claw      a bundle: a campaign-archive file (store/archive.py) holding objects and
                          action-cache entries, never refs; named by the BLAKE3 of its bytes
    packs/<hex>.ids       what that bundle holds: {"objects": [hex, ...], "actions": {key: record}};
                          written after the bundle, so a listing always names a complete bundle
    refs/<name>           campaign heads and pins, moved only by compare-and-swap
    refsigs/<name>/<hex>  the pusher's signed statement that ref <name> was set to <hex> (refsign.py)

Push lists the remote's bundles, sends one or more new bundles with exactly the objects and entries
the remote lacks (in parallel), then moves each ref: created if absent, replaced only if the remote
still holds the value this store last saw there (`remotes/<remote>/<name>`, a tracking ref), else the
push stops with "pull first". Pull checks who signed each ref's value and each bundle before importing
anything, downloads the bundles it lacks, imports each (every object hashed before anything becomes
visible; a bundle is all or nothing), then fast-forwards each local ref that did not move since the
last sync. A killed push or pull is resumed by running it again: bundles are
immutable and named by content, and what is already there is skipped.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import UsageError
from clawstore.remote import refsign
from clawstore.remote.backends import Backend, RemoteRefConflict, open_backend
from clawstore.remote.config import Remote
from clawstore.store.archive import archive_signer, import_archive, untrusted_why, user_trusts, write_archive
from clawstore.store.durable import temp_name
from clawstore.store.ids import PREFIX, is_hex64, is_oid
from clawstore.store.reach import Reach

if TYPE_CHECKING:
    from clawstore.store.store import Store

PACKS = "packs/"
REFS = "refs/"
SHARED_REFS = ("campaigns/", "pins/")
BUNDLE_OBJECTS = 20_000  # objects per bundle: bounded files, parallel transfers, fine-grained resume
WORKERS = 8
TRACKING = "remotes/"


@dataclass
class SyncReport:
    verb: str
    remote: str
    bundles: int = 0
    objects: int = 0
    bytes: int = 0
    refs_moved: list[str] = field(default_factory=list)
    refs_kept: dict[str, str] = field(default_factory=dict)  # name -> why it did not move
    kept_apart: set[str] = field(default_factory=set)  # signers of bundles kept apart (pull --untrusted)

    def summary(self) -> str:
        lines = [f"{self.verb} {self.remote}: {self.bundles} bundle(s), {self.objects} object(s), "
                 f"{self.bytes} bytes; {len(self.refs_moved)} ref(s) moved"]
        lines += [f"  {name}: {why}" for name, why in sorted(self.refs_kept.items())]
        if self.kept_apart:
            lines.append(f"  kept apart (signed by {', '.join(sorted(self.kept_apart))}, not trusted): no build "
                         "reuses it until you claw trust add the signer; refs not moved")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------ listings

def _listing_name(bundle: str) -> str:
    return f"{PACKS}{bundle}.ids"


def _bundle_name(bundle: str) -> str:
    return f"{PACKS}{bundle}.claw"


def remote_bundles(backend: Backend) -> list[str]:
    """Bundles whose listing exists (a bundle without a listing is an interrupted push: ignored)."""
    return sorted(name[len(PACKS):-len(".ids")] for name in backend.list(PACKS)
                  if name.endswith(".ids") and is_hex64(name[len(PACKS):-len(".ids")]))


def _cache_dir(store: Store, remote: Remote) -> Path:
    path = store.root / "remotes" / remote.name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _read_listing(store: Store, remote: Remote, backend: Backend, bundle: str) -> dict[str, Any]:
    """A bundle's listing, from the local cache when it was seen before (listings never change)."""
    cached = _cache_dir(store, remote) / f"{bundle}.ids"
    if not cached.exists():
        tmp = cached.with_name(cached.name + f".{os.getpid()}.tmp")
        backend.download(_listing_name(bundle), tmp)
        os.replace(tmp, cached)
    try:
        doc = json.loads(cached.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached.unlink(missing_ok=True)
        raise UsageError(f"remote {remote.url}: listing of bundle {bundle} is not JSON") from None
    objects, actions = doc.get("objects"), doc.get("actions")
    if (not isinstance(objects, list) or not all(isinstance(h, str) and is_hex64(h) for h in objects)
            or not isinstance(actions, dict)
            or not all(is_oid(k) and is_oid(v) for k, v in actions.items())):
        cached.unlink(missing_ok=True)
        raise UsageError(f"remote {remote.url}: listing of bundle {bundle} is malformed")
    return doc


def _remote_content(store: Store, remote: Remote, backend: Backend) -> tuple[set[str], dict[str, str], list[str]]:
    objects: set[str] = set()
    actions: dict[str, str] = {}
    bundles = remote_bundles(backend)
    for bundle in bundles:
        doc = _read_listing(store, remote, backend, bundle)
        objects.update(doc["objects"])
        actions.update(doc["actions"])
    return objects, actions, bundles


# ------------------------------------------------------------------------------------------ push

def _local_content(store: Store, refs: dict[str, str] | None) -> tuple[set[str], dict[str, str]]:
    """Every object and action entry (whole store), or the closure of the given refs."""
    if refs is None:
        objects = {oid[len(PREFIX):] for oid in store.iter_objects()}
        actions = {key: record for key, record in store.iter_actions() if record is not None}
        return objects, actions
    from clawstore.builder.closure import head_closure

    objects, actions = set(), {}
    for target in refs.values():
        closure = head_closure(store, target)
        objects.update(closure.objects)  # hex digests already
        actions.update(closure.actions)
    return objects, actions


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@dataclass
class _Bundle:
    path: Path
    listing: Path
    name: str  # hex BLAKE3 of its bytes
    objects: int
    size: int


def _make_bundle(store: Store, objects: list[str], actions: dict[str, str], work: Path) -> _Bundle:
    # Each entry travels with its record and its input document (the key's id), so the receiving side
    # can verify it from this bundle alone, whatever order bundles arrive in.
    with_entries = {oid[len(PREFIX):] for oid in (*actions.values(), *actions) if store.has(oid)}
    ids = sorted(set(objects) | with_entries)
    out = work / f"bundle-{temp_name('.claw')}"
    summary = write_archive(store, out, {"refs": {}, "actions": actions, "kind": "remote-bundle"},
                            (PREFIX + h for h in ids))
    bundle = summary.digest[len(PREFIX):]
    listing = work / f"{bundle}.ids"
    listing.write_text(json.dumps({"objects": ids, "actions": actions}, sort_keys=True), encoding="utf-8")
    return _Bundle(out, listing, bundle, len(ids), summary.size)


def _upload_bundle(backend: Backend, bundle: _Bundle) -> _Bundle:
    backend.upload(bundle.path, _bundle_name(bundle.name))
    backend.upload(bundle.listing, _listing_name(bundle.name))  # last: the listing publishes the bundle
    bundle.path.unlink()
    bundle.listing.unlink()
    return bundle


def _send_bundles(store: Store, backend: Backend, batches: list[tuple[list[str], dict[str, str]]], work: Path,
                  report: SyncReport) -> None:
    """Bundles are made one after the other in this thread and uploaded by a pool as each is ready.
    (Made by several threads at once, they were slower: each read of a frame releases the GIL, and
    getting it back from the other CPU-bound makers waited out the interpreter's switch interval.)
    At most WORKERS bundles wait on disk for their upload."""
    def sent(future: Future[_Bundle]) -> None:
        bundle = future.result()
        report.bundles += 1
        report.objects += bundle.objects
        report.bytes += bundle.size

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        uploads: deque[Future[_Bundle]] = deque()
        for objects, actions in batches:
            while len(uploads) >= WORKERS:
                sent(uploads.popleft())
            uploads.append(pool.submit(_upload_bundle, backend, _make_bundle(store, objects, actions, work)))
        while uploads:
            sent(uploads.popleft())


def push(store: Store, remote: Remote, ref_names: Iterable[str] | None = None, move_refs: bool = True) -> SyncReport:
    """Send what the remote lacks; `move_refs=False` sends objects and action entries only (the
    periodic push of a running build: another machine can reuse them before the head moves)."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pushed to", backend.description)
    with store.lease(f"push {remote.name}"):
        refs = _selected_refs(store, ref_names)
        have_objects, have_actions, _ = _remote_content(store, remote, backend)
        objects, actions = _local_content(store, None if ref_names is None else refs)
        new_objects = sorted(objects - have_objects)
        new_actions = {k: v for k, v in actions.items() if have_actions.get(k) != v}
        batches: list[tuple[list[str], dict[str, str]]] = []
        action_keys = sorted(new_actions)
        object_chunks = list(_chunks(new_objects, BUNDLE_OBJECTS)) or ([[]] if new_actions else [])
        per_chunk = -(-len(action_keys) // max(1, len(object_chunks))) if action_keys else 0
        for index, chunk in enumerate(object_chunks):
            keys = action_keys[index * per_chunk:(index + 1) * per_chunk] if per_chunk else []
            batches.append((chunk, {k: new_actions[k] for k in keys}))
        with tempfile.TemporaryDirectory(dir=store.tmp_dir, prefix="push-") as tmp:
            _send_bundles(store, backend, batches, Path(tmp), report)
        for name, value in sorted(refs.items() if move_refs else ()):
            _push_ref(store, backend, remote, name, value, report)
    return report


def _selected_refs(store: Store, ref_names: Iterable[str] | None) -> dict[str, str]:
    if ref_names is None:
        return {name: value for prefix in SHARED_REFS for name, value in store.list_refs(prefix).items()}
    refs = {}
    for name in ref_names:
        value = store.get_ref(name)
        if value is None:
            raise UsageError(f"no ref {name} in this store (build or pin it first)")
        refs[name] = value
    return refs


def _tracking(remote: Remote, name: str) -> str:
    return f"{TRACKING}{remote.name}/{name}"


def _push_ref(store: Store, backend: Backend, remote: Remote, name: str, value: str, report: SyncReport) -> None:
    current = backend.read_ref(REFS + name)
    seen = store.get_ref(_tracking(remote, name))
    if current is not None and current.value == value:
        pass
    elif current is not None and current.value != seen:
        raise RemoteRefConflict(REFS + name)
    else:
        refsign.publish(backend, name, value, store.tmp_dir)  # first: a pull checks it before moving
        backend.swap_ref(REFS + name, value, current)
        report.refs_moved.append(name)
    store.set_ref(_tracking(remote, name), value)


# ------------------------------------------------------------------------------------------ pull

def _download_bundle(backend: Backend, bundle: str, work: Path, untrusted: bool) -> Path:
    """Download one bundle and check its signer (its manifest only); refused here, nothing is imported."""
    target = work / f"{bundle}.claw"
    backend.download(_bundle_name(bundle), target)
    signer = archive_signer(target)
    if not untrusted and not user_trusts(signer):
        raise UsageError(f"remote bundle {bundle}: {untrusted_why(signer, 'pull')}")
    return target


def _import_bundle(store: Store, bundle: str, target: Path, untrusted: bool) -> tuple[int, int, str | None]:
    """Import one downloaded bundle; (new objects, bytes, the signer if it was kept apart as untrusted)."""
    try:
        imported = import_archive(store, target, untrusted=untrusted)
        if imported.summary.digest != PREFIX + bundle:
            raise UsageError(f"bundle {bundle}: its bytes hash to {imported.summary.digest}, not its name")
    finally:
        target.unlink(missing_ok=True)
    apart = None if imported.kept_apart is None else (imported.signer or "unsigned")
    return imported.new_objects, imported.summary.size, apart


def _check_ref_signers(store: Store, backend: Backend, refs: dict[str, str], untrusted: bool) -> set[str]:
    """Who signed each remote ref's value; refused (before anything is fetched) when one is not trusted,
    unless `untrusted`: then returns those signers, and the refs are kept apart."""
    apart = set()
    for name, signer in refsign.signers(backend, refs, store.tmp_dir).items():
        if user_trusts(signer):
            continue
        if not untrusted:
            raise UsageError(f"remote ref {name}: {untrusted_why(signer, 'pull')}")
        apart.add(signer or "unsigned")
    return apart


def pull(store: Store, remote: Remote, ref_names: Iterable[str] | None = None, untrusted: bool = False
         ) -> SyncReport:
    """Fetch the bundles this store lacks (verified, signed by a trusted key), then move the refs.

    `untrusted`: bundles signed by a key the user does not trust are kept apart (trust/apart.py) and,
    if any was, so are the remote's refs; such bundles are not remembered as fetched, so a later pull
    without --untrusted refuses them again instead of moving refs onto them."""
    backend = open_backend(remote.url, remote.endpoint_url)
    report = SyncReport("pulled from", backend.description)
    with store.lease(f"pull {remote.name}"):
        wanted = None if ref_names is None else set(ref_names)
        remote_refs = _remote_refs(backend, wanted)
        report.kept_apart |= _check_ref_signers(store, backend, remote_refs, untrusted)
        _, _, bundles = _remote_content(store, remote, backend)
        fetched = _cache_dir(store, remote) / "fetched"
        done = set(fetched.read_text().split()) if fetched.exists() else set()

        def fetch(todo: list[str]) -> None:
            # Every bundle of the round is downloaded and its signer checked before any is imported, so
            # a refused pull writes nothing of the round.
            # Imports run one after the other: they are CPU work under one GIL, and in parallel they
            # only fought over it and over the pack writer's lock.
            with tempfile.TemporaryDirectory(dir=store.tmp_dir, prefix="pull-") as tmp:
                with ThreadPoolExecutor(max_workers=WORKERS) as pool:
                    targets = list(pool.map(lambda b: _download_bundle(backend, b, Path(tmp), untrusted), todo))
                for bundle, target in zip(todo, targets, strict=True):
                    new, size, apart = _import_bundle(store, bundle, target, untrusted)
                    report.bundles += 1
                    report.objects += new
                    report.bytes += size
                    done.add(bundle)
                    if apart is not None:
                        report.kept_apart.add(apart)
                        continue
                    with open(fetched, "a", encoding="ascii") as fh:
                        fh.write(bundle + "\n")

        if wanted is None:
            fetch([b for b in bundles if b not in done])
        else:
            _fetch_closure(store, remote, backend, [b for b in bundles if b not in done], remote_refs, fetch)
        if report.kept_apart:
            _keep_refs_apart(store, remote_refs, sorted(report.kept_apart))
            return report
        for name, value in sorted(remote_refs.items()):
            _pull_ref(store, remote, name, value, report)
    return report


def _keep_refs_apart(store: Store, refs: dict[str, str], signers: list[str]) -> None:
    """The remote's refs, when some of what they name came from untrusted signers: kept apart with the
    entries, moved in by the first build after every one of those signers is trusted."""
    doc = {"kind": "untrusted-import", "signer": signers[0] if len(signers) == 1 else None, "signers": signers,
           "actions": {}, "refs": {name: value for name, value in refs.items() if store.has(value)}}
    oid = store.put_json(doc)
    store.set_ref(f"untrusted/{oid[len(PREFIX):]}", oid)


def _fetch_closure(store: Store, remote: Remote, backend: Backend, bundles: list[str], refs: dict[str, str],
                   fetch: Callable[[list[str]], None]) -> None:
    """A pull narrowed to some refs fetches only the bundles holding what their heads reach: walk the
    closure in the store, fetch the bundles listing what is missing, walk again (a head names its
    records, records their outputs, trees their files: a few rounds)."""
    listed = {bundle: set(_read_listing(store, remote, backend, bundle)["objects"]) for bundle in bundles}
    while listed:
        reach = Reach(store)
        reach.mark(refs.values())
        missing = set(reach.missing)
        todo = sorted(bundle for bundle, ids in listed.items() if ids & missing)
        if not todo:
            return  # what is still missing is in no bundle (an interrupted push): _pull_ref says so
        fetch(todo)
        for bundle in todo:
            del listed[bundle]


def _remote_refs(backend: Backend, wanted: set[str] | None) -> dict[str, str]:
    refs = {}
    for path in backend.list(REFS):
        name = path[len(REFS):]
        if not name.startswith(SHARED_REFS) or (wanted is not None and name not in wanted):
            continue
        current = backend.read_ref(path)
        if current is not None and is_oid(current.value):
            refs[name] = current.value
    if wanted:
        missing = sorted(wanted - set(refs))
        if missing:
            raise UsageError(f"the remote has no {', '.join(missing)}")
    return refs


def _pull_ref(store: Store, remote: Remote, name: str, value: str, report: SyncReport) -> None:
    if not store.has(value):
        report.refs_kept[name] = f"remote head {value} was not in any bundle (an interrupted push?)"
        return
    local = store.get_ref(name)
    seen = store.get_ref(_tracking(remote, name))
    if local == value:
        pass
    elif local is None or local == seen:
        store.set_ref(name, value, expected=local)
        report.refs_moved.append(name)
    else:
        report.refs_kept[name] = ("both sides changed it: kept this store's head; the remote's results are "
                                  "here now, so `claw build` reuses them, then push")
    store.set_ref(_tracking(remote, name), value)
