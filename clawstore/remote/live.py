"""`claw build --remote NAME`: pull before the build, push what it commits while it runs and at the end, so that a
machine that dies mid-campaign loses only what was in flight. Details: docs/remote.md (Details by module)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from clawstore.errors import ClawError
from clawstore.host.machine_settings import remote_push_interval
from clawstore.remote.backends import Backend, open_backend
from clawstore.remote.config import Remote, resolve_remote
from clawstore.remote.pull import pull_for_plan
from clawstore.remote.push import RemoteKnowledge, push, push_new
from clawstore.remote.sync import PACKS, REFS, SyncReport, remote_packs

if TYPE_CHECKING:
    from clawstore.store.store import Store

# What the killed builds of the campaigns a push sends finished (store/buildlogs.py pushed_unadopted: its refs' names,
# None for the whole store), which it marks, by campaign; handed in by the front (the remote reads no build log itself).
Unadopted = Callable[["Store", Collection[str] | None], Mapping[str | None, Mapping[bytes, bytes]]]


def _nothing_unadopted(store: Store, names: Collection[str] | None) -> Mapping[str | None, Mapping[bytes, bytes]]:
    return {}

def pull_before(store: Store, remote: Remote, head_ref: str, unbuilt_keys: Callable[[], set[str]],
                say: Callable[[str], None]) -> SyncReport:
    """What a `build --remote` (or `plan --remote`) fetches first: what its plan would otherwise pay for
    (remote/pull.py, pull_for_plan). `unbuilt_keys()`: the action keys the build would execute, as far
    as the store tells them now. Its summary, and a line a remote ref skipped, go to `say`."""
    report = pull_for_plan(store, remote, head_ref, unbuilt_keys)
    say(report.summary())
    for line in report.skipped_lines():  # (the build goes on without that head: it still pulls by action key)
        say(line)
    return report


class InterimPushes:
    """The interim pushes of one `build --remote`: the first sends whatever the remote lacks, each later one what was
    committed since (push.push_new). A failed push is retried by the next and said once, and once more when pushing
    works again."""

    def __init__(self, store: Store, remote: Remote, say: Callable[[str], None],
                 unadopted: Unadopted = _nothing_unadopted):
        self.store, self.remote = store, remote
        self.say, self.unadopted = say, unadopted
        self.known: RemoteKnowledge | None = None  # what the remote holds, once a first push has told
        self.failing = False  # the last push failed (and it was said)

    def push(self) -> None:
        try:
            if self.known is None:
                first = RemoteKnowledge()
                push(self.store, self.remote, move_refs=False, knowledge=first,
                     unadopted=self.unadopted(self.store, None))
                self.known = first
            else:
                push_new(self.store, self.remote, self.known)
        except (ClawError, OSError) as exc:
            if not self.failing:  # (its text names what it was sending: it changes as the build goes)
                self.say(f"claw: warning: interim push to {self.remote.name} failed: {exc} (retried at every "
                         "interval, quietly, and at the end of the build)")
            self.failing = True
            return
        if self.failing:
            self.say(f"claw: interim push to {self.remote.name} works again")
            self.failing = False


@contextmanager
def remote_session(store: Store, remote: Remote, head_ref: str, unbuilt_keys: Callable[[], set[str]],
                   say: Callable[[str], None], interval_s: float | None = None,
                   unadopted: Unadopted = _nothing_unadopted) -> Iterator[None]:
    """The build between `pull_before` and its last push, pushing what it commits meanwhile; the pushes'
    and the pull's summaries and warnings go to `say` (the command's stderr). The first push and the last mark what
    `unadopted` answers, as `claw push` does (before session 77 neither did, and the last, narrowed to the campaign's
    head, sent nothing a killed build of it finished that this build did not adopt: a filtered build's)."""
    interval_s = interval_s or remote_push_interval()
    pull_before(store, remote, head_ref, unbuilt_keys, say)
    stop = threading.Event()
    pushes = InterimPushes(store, remote, say, unadopted)

    def periodic() -> None:
        while not stop.wait(interval_s):
            pushes.push()

    worker = threading.Thread(target=periodic, name="claw-remote-push", daemon=True)
    worker.start()
    try:
        try:
            yield
        finally:
            stop.set()
            worker.join()
    except BaseException:  # the build failed or was stopped: its own ending stays what the user sees
        try:
            say(_last_push(store, remote, head_ref, unadopted).summary())
        except (ClawError, OSError) as exc:
            say(f"claw: warning: last push to {remote.name} failed: {exc} (what the build committed is "
                f"in the store: claw push {remote.name} sends it)")
        raise
    say(_last_push(store, remote, head_ref, unadopted).summary())


def _last_push(store: Store, remote: Remote, head_ref: str, unadopted: Unadopted) -> SyncReport:
    """What the build committed, with the campaign's head if it wrote one."""
    names = [head_ref] if store.get_ref(head_ref) is not None else None
    return push(store, remote, names, move_refs=names is not None, unadopted=unadopted(store, names))


@dataclass
class RemoteView:
    """What a `build --remote` answered from its stamp (builder/stamp.py) depends on besides the
    workspace and the store, read in two requests: the names of the remote's listings (a push by anyone
    adds one) and the value of the campaign's head there (a push or a pull-and-push may move it alone)."""

    name: str
    backend: Backend
    state: tuple[str, ...]  # the remote's URL, endpoint and a digest of its listings' names

    def head(self, campaign_id: str) -> str | None:
        current = self.backend.read_ref(f"{REFS}campaigns/{campaign_id}")
        return None if current is None else current.value


def view_remote(workspace: Path, name: str) -> RemoteView | None:
    """The remote as it is now; None when it cannot be named or listed (the build's full path says why)."""
    try:
        remote = resolve_remote(workspace, name)
        backend = open_backend(remote.url, remote.endpoint_url)
        listings = remote_packs(backend.list(PACKS))
    except ClawError:
        return None
    digest = blake3.blake3("\n".join(listings).encode()).hexdigest()
    return RemoteView(remote.name, backend, (remote.url, remote.endpoint_url or "", digest))
