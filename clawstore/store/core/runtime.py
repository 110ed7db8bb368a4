"""One process's live state for one store: its index view, its pack writer, its read handles.

Shared by every `Store` opened on the same directory in this process (a process writes one pack at a
time, whatever the number of Store objects), recreated after a fork, closed when the last of those
Stores is closed or dropped (`release`: its pack sealed, its files closed).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path

from clawstore.errors import MissingObjectError
from clawstore.host.durable import fsync_path
from clawstore.host.process_end import at_exit
from clawstore.store.core.batch import Batch, GroupCommitter, SharedCommit
from clawstore.store.core.index import (
    IndexView,
    Loc,
    Segment,
    index_lock,
    list_segments,
    new_segment_name,
    remove_segments,
    write_segment,
)
from clawstore.store.core.layout import StoreLayout
from clawstore.store.core.packfile import PackWriter, pack_path

# A pack is sealed and a new one started past this size ("a few MiB to tens of MiB").
PACK_TARGET = 32 << 20
# ... or once its objects name this many ids, sealed as soon as a write passes it rather than at the batch's commit:
# the pack's edge log holds 32 bytes an id named and its seal as much again (the edges file's other ids), so a batch
# naming many (a campaign head's parts name every node's record and outputs: 544,279 ids at 10,000 x 5, one batch)
# held them all until the build's end, more the bigger the campaign. A pack of a build's records and documents names
# ~150,000 ids by PACK_TARGET: each seal now holds about what such a pack's did. (docs/scale/building.md, Session 50)
EDGES_TARGET = 1 << 17
# A dedup hit refreshes its pack's mtime when older than this, so gc's grace period (which looks at
# pack mtimes) also covers objects a running build reused rather than wrote.
TOUCH_AFTER_S = 600.0
_MAX_OPEN_PACKS = 64


def _names_many(writer: PackWriter) -> bool:
    return writer.edge_log is not None and writer.edge_log.named() >= EDGES_TARGET


def pack_full(writer: PackWriter) -> bool:
    """Whether `writer`'s pack is due to be sealed (PACK_TARGET bytes, or its objects name EDGES_TARGET ids)."""
    return writer.size >= PACK_TARGET or _names_many(writer)


class _ThreadState(threading.local):
    """Each thread's open batch (None: none). A class default, not getattr's: a thread without one
    asks on every lookup and put, and a missing attribute costs an exception each time."""

    batch: Batch | None = None


class Runtime:
    def __init__(self, root: Path):
        self.root = root
        self.pid = os.getpid()  # (a forked child never closes its parent's pack: it has a runtime of its own)
        self.users = 0  # the Stores open on it (runtime_for, release)
        self.layout = StoreLayout(root)
        self.packs_dir = self.layout.packs
        self.index_dir = self.layout.index
        self.tmp_dir = self.layout.tmp
        self.index = IndexView(self.index_dir, self.tmp_dir, self.layout.locks)
        self.pack_lock = threading.RLock()
        self.sync_lock = threading.RLock()  # taken before pack_lock: a commit's fsyncs, sealing, closing
        self.local = _ThreadState()
        self.group: GroupCommitter | None = None
        self.shared = SharedCommit(self)  # concurrent batches outside group mode share a barrier
        self.group_depth = 0
        self.group_lock = threading.Lock()
        self._writer: PackWriter | None = None
        self._dir_dirty = False
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._fd_lock = threading.Lock()
        self._touched: dict[str, float] = {}
        self._index_started = False
        self._starter: str | None = None  # the empty segment this process started the index with

    # --- writing --------------------------------------------------------------------------------
    def writer(self) -> PackWriter:
        """This process's current pack (call with pack_lock held)."""
        if self._writer is None or self._writer.sealed:
            self.start_index()
            self.packs_dir.mkdir(exist_ok=True)  # removed by hand: a write brings it back
            self._writer = PackWriter(self.packs_dir, edges_root=self.root)
            self._dir_dirty = True
        return self._writer

    def own_pack(self) -> PackWriter:
        """A pack of its own for one large object."""
        self.start_index()
        self.packs_dir.mkdir(exist_ok=True)
        writer = PackWriter(self.packs_dir)
        with self.pack_lock:
            self._dir_dirty = True
        return writer

    def take_new_packs(self) -> bool:
        """Were pack files made since the last call? (call with pack_lock held)"""
        made, self._dir_dirty = self._dir_dirty, False
        return made

    def sync_packs_dir(self, new_packs: bool) -> None:
        """Make new pack files' directory entries durable (call with sync_lock held)."""
        if new_packs:
            try:
                fsync_path(self.packs_dir)
            except BaseException:
                with self.pack_lock:
                    self._dir_dirty = True  # the next commit tries again
                raise

    def seal_if_full(self) -> None:
        writer = self._writer
        if writer is not None and not writer.sealed and pack_full(writer):
            writer.seal()
            writer.close()

    def seal_if_names_many(self, writer: PackWriter) -> None:
        """Seal `writer` now if its objects name EDGES_TARGET ids (call without pack_lock: a seal takes sync_lock
        first). Its batches' commits find it sealed, durable: they sync only the packs still open."""
        if _names_many(writer):
            with self.sync_lock, self.pack_lock:
                if writer is self._writer:
                    self.seal_if_full()

    def publish(self, segment: Segment) -> None:
        starter, self._starter = self._starter, None
        if starter is not None:  # this process's first segment takes the place of its empty starter
            segment.replaces, segment.pure = [*segment.replaces, starter], True  # (a pure merge of it)
        with self.index.publishing(segment):
            write_segment(self.index_dir, self.tmp_dir, segment)
        self.index.add_own(segment)
        if starter is not None:
            with index_lock(self.layout.locks, wait=False) as held:
                if held:  # (else a merge or gc is at work: it takes the starter along)
                    remove_segments(self.index_dir, [starter])
        self.index.maybe_compact()

    def start_index(self) -> None:
        """Before a pack is made: the index has a segment (an empty one in a new store, which this
        process's first segment replaces). A writer killed before naming its blobs then leaves a pack
        nobody names (gc's to remove), never an empty index beside packs holding blobs, which is what a
        lost index looks like (fsck)."""
        if not self._index_started:
            if not list_segments(self.index_dir):
                starter = Segment(new_segment_name())
                self.publish(starter)
                self._starter = starter.name
            self._index_started = True

    def close_writer(self) -> None:
        """Seal this process's pack (at exit), so its trailer lists its blobs."""
        with self.sync_lock, self.pack_lock:
            writer, self._writer = self._writer, None
            if writer is not None and writer.fd >= 0:
                with contextlib.suppress(OSError):
                    if writer.size > len(b"CLAWPACK") + 8:
                        writer.seal()
                    else:  # never written to: leave no empty pack behind
                        os.unlink(writer.path)
                writer.close()

    def close(self) -> None:
        """Let go of what this process holds for the store: a group still open commits, the pack is sealed,
        read handles and the index's mapped segments are closed. Used again, it opens what it needs anew."""
        group, self.group = self.group, None
        if group is not None:
            group.close()
        self.close_writer()
        with self._fd_lock:
            fds, self._fds = list(self._fds.values()), OrderedDict()
        for fd in fds:
            os.close(fd)
        self.index = IndexView(self.index_dir, self.tmp_dir, self.layout.locks)  # (its maps go with the old)

    def batch(self) -> Batch | None:
        return self.local.batch

    # --- reading --------------------------------------------------------------------------------
    def pread(self, loc: Loc, size: int | None = None, start: int = 0) -> bytes:
        """Bytes of a blob's payload (all of it, or `size` bytes from `start`): one pread."""
        pack, offset, length = loc
        want = length - start if size is None else min(size, length - start)
        fd = self.fd(pack)
        data = os.pread(fd, want, offset + start)
        if len(data) != want:
            raise MissingObjectError(f"pack {pack} is shorter than the index says")
        return data

    def fd(self, pack: str) -> int:
        with self._fd_lock:
            fd = self._fds.get(pack)
            if fd is not None:
                self._fds.move_to_end(pack)
                return fd
        fd = os.open(pack_path(self.packs_dir, pack), os.O_RDONLY | os.O_CLOEXEC)
        with self._fd_lock:
            if pack in self._fds:
                os.close(fd)
                return self._fds[pack]
            self._fds[pack] = fd
            while len(self._fds) > _MAX_OPEN_PACKS:
                _, old = self._fds.popitem(last=False)
                os.close(old)
        return fd

    def forget_pack(self, pack: str) -> None:
        with self._fd_lock:
            fd = self._fds.pop(pack, None)
        if fd is not None:
            os.close(fd)

    def touch(self, pack: str) -> bool:
        """Refresh an old pack's mtime (a dedup hit); False if the pack is gone (gc removed it)."""
        now = time.monotonic()
        if now - self._touched.get(pack, -TOUCH_AFTER_S) < TOUCH_AFTER_S / 2:
            return True
        path = pack_path(self.packs_dir, pack)
        try:
            if os.stat(path).st_mtime < time.time() - TOUCH_AFTER_S:
                os.utime(path)
        except FileNotFoundError:
            return False
        except OSError:
            pass
        self._touched[pack] = now
        return True


_RUNTIMES: dict[tuple[int, int, int, str], Runtime] = {}
# Reentrant: `release` runs when a Store is dropped, which the cyclic collector may do inside runtime_for.
_RUNTIMES_LOCK = threading.RLock()


def runtime_for(root: Path) -> Runtime:
    """The runtime of the store at `root` in this process (same directory -> same runtime), with one more
    user: each call is matched by one `release`."""
    stat = os.stat(root)
    key = (os.getpid(), stat.st_dev, stat.st_ino, os.path.abspath(root))
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            runtime = _RUNTIMES[key] = Runtime(root)
        runtime.users += 1
        return runtime


def release(runtime: Runtime) -> None:
    """One user fewer (a Store closed or dropped); the last one closes the runtime (not in a forked child)."""
    if runtime.pid != os.getpid():
        return
    with _RUNTIMES_LOCK:
        runtime.users -= 1
        if runtime.users > 0:
            return
        for key, held in list(_RUNTIMES.items()):
            if held is runtime:
                del _RUNTIMES[key]
    runtime.close()


@at_exit
def _seal_all() -> None:
    for (pid, _, _, _), runtime in list(_RUNTIMES.items()):
        if pid == os.getpid():
            if runtime.group is not None:
                with contextlib.suppress(Exception):
                    runtime.group.close()
            runtime.close_writer()


def drop_runtime(root: Path) -> None:
    """Forget this process's state for `root` (its directory was rewritten behind the store's back)."""
    stat = os.stat(root)
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.pop((os.getpid(), stat.st_dev, stat.st_ino, os.path.abspath(root)), None)
    if runtime is not None:
        runtime.close()
