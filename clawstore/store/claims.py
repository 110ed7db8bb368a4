"""Work claims: which build is executing which node, so that two builds on one store never pay twice.

A claim is a small JSON file taken by a hard link, kept alive by heartbeats and released or taken over when its owner
dies. The file, the protocol and its races: docs/store.md (Details by module). See also docs/design/decisions.md (Builds
at once)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from clawstore.host.durable import process_alive, process_identity, temp_name, write_file_atomic
from clawstore.host.machine_settings import claim_ttl
from clawstore.store.core.ids import oid_from_hex, oid_hex
from clawstore.store.core.layout import CLAIMS, LEASES, TMP
from clawstore.store.core.locks import exclusive

CLAIM_FORMAT = 1
CLAIMS_LOCK = "claims"
# A spare whose body was written less than this share of the ttl ago is linked as it is (its expiry is at least
# 29/30 of a ttl away, and the heartbeat counts the claim from that write): no write a claim in a busy build.
REUSE_BODY_TTL_SHARE = 1 / 30


class _File:
    """One of a board's files in tmp/ (linked as a claim, or spare): what was last written in it, and when."""

    __slots__ = ("path", "fd", "written", "size")

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd
        self.written = float("-inf")  # time.time() of the body in it (never: none yet)
        self.size = 0

@dataclass(frozen=True)
class Claim:
    """One claim file's contents (`owner` None: unreadable, judged by the file's age)."""

    key: str
    owner: str | None
    host: str
    pid: int
    start_ticks: int
    acquired_at: float
    expires_at: float

    def live(self, now: float, host: str) -> bool:
        """Still honoured: not expired, and not held by a process of this host that is gone."""
        if now >= self.expires_at:
            return False
        if self.owner is not None and self.host == host and self.pid:
            return process_alive(self.pid, self.start_ticks)
        return True


class Neighbours:
    """Can another process have written to the store since we last asked? Every writer of action-cache entries (a
    build, a pull, an import) holds a lease while it writes, and commits before letting it go. So: yes while a lease
    not this process's is there, and once whenever `leases/` changed (someone came or went: what a writer that came
    and went meanwhile committed is still to be seen). One `stat` a question: the directory is listed again only when
    it changed, or had changed less than a second before it was listed (a directory's time is coarse: a change in the
    same tick would not move it). A lease file is read once, for its holder (pid, host)."""

    def __init__(self, root: Path):
        self.dir = str(Path(root) / LEASES)
        self.me = (process_identity()[0], socket.gethostname())
        self._mtime_ns: int | None = None  # of leases/ when last listed
        self._listed_ns = 0  # when it was last listed (time.time_ns, taken before the listing)
        self._present = True
        self._holders: dict[str, tuple[int, str] | None] = {}  # lease file -> its holder (None: unreadable)

    def present(self) -> bool:
        try:
            mtime = os.stat(self.dir).st_mtime_ns
        except OSError:
            return True  # (no leases/ at all: a store this build did not lease; look as before)
        if mtime == self._mtime_ns and self._listed_ns - mtime >= 1_000_000_000:
            return self._present
        listed = time.time_ns()
        try:
            names = [name for name in os.listdir(self.dir) if name.endswith(".json")]
        except OSError:
            return True
        self._holders = {name: self._holders[name] if name in self._holders else self._holder(name)
                         for name in names}
        self._present = any(holder != self.me for holder in self._holders.values())
        self._mtime_ns, self._listed_ns = mtime, listed
        return True  # changed since the last look

    def _holder(self, name: str) -> tuple[int, str] | None:
        try:
            with open(os.path.join(self.dir, name), "rb") as handle:
                doc = json.loads(handle.read(65536))
            return int(doc["pid"]), str(doc.get("host", ""))
        except FileNotFoundError:  # released while listed: not a neighbour
            return self.me
        except (OSError, ValueError, KeyError, TypeError):
            return None


class ClaimBoard:
    """The claims of one owner (a build) on one store: take, heartbeat, release, look up.

    Thread-safe. A key this board already holds counts as busy for a second taker in the same build
    (two addresses of one campaign can share a key: the second waits and reuses the first's record).
    """

    def __init__(self, root: Path, owner: str, ttl_s: float | None = None):
        self.root = Path(root)
        self.dir = self.root / CLAIMS
        self._dir_name = str(self.dir)
        self.owner = owner
        self.ttl = ttl_s if ttl_s is not None else claim_ttl()
        self.host = socket.gethostname()
        self._pid, self._ticks = process_identity()
        self._held: dict[str, float] = {}  # key -> when we last wrote its claim (time.time())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.lost: set[str] = set()  # claims another builder took over (we stalled past the ttl)
        self._taken_over: set[str] = set()  # claims this board took over from a holder gone or stalled (took_over)
        # The board's own files (path, descriptor) in tmp/: free ones, and those linked as a claim.
        self._spares: list[_File] = []
        self._linked: dict[str, _File] = {}
        self._rest: str | None = None  # the body after its times (_body)
        self.neighbours = Neighbours(self.root)  # other processes using the store (claimed.py: whether to look again)

    # ---- paths and documents --------------------------------------------------------------------
    def path(self, key: str) -> Path:
        return Path(self._name(key))

    def _name(self, key: str) -> str:
        """path() as a string: taking and releasing a claim per node skip pathlib's parsing."""
        return f"{self._dir_name}/{oid_hex(key)}.json"

    def _body(self, now: float) -> bytes:
        """The claim's JSON (keys sorted): its two times, then the rest, encoded once per board."""
        if self._rest is None:
            self._rest = json.dumps({"format": CLAIM_FORMAT, "owner": self.owner, "host": self.host,
                                     "pid": self._pid, "start_ticks": self._ticks}, sort_keys=True)[1:]
        # (float repr is what json.dumps writes for a finite float: the same bytes, without an encoder per claim)
        return f'{{"acquired_at": {float(now)!r}, "expires_at": {float(now + self.ttl)!r}, {self._rest}'.encode()

    def read(self, key: str) -> Claim | None:
        """The claim on `key`, or None when nobody claims it."""
        path = self.path(key)
        try:
            with open(path, "rb") as handle:
                raw = handle.read(4096)
                mtime = os.fstat(handle.fileno()).st_mtime
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            return Claim(key, str(doc["owner"]), str(doc["host"]), int(doc["pid"]), int(doc["start_ticks"]),
                         float(doc["acquired_at"]), float(doc["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return Claim(key, None, "", 0, 0, mtime, mtime + self.ttl)

    def holder(self, key: str) -> Claim | None:
        """Someone else's live claim on `key` (None: free, expired, or ours)."""
        claim = self.read(key)
        if claim is None or claim.owner == self.owner or not claim.live(time.time(), self.host):
            return None
        return claim

    # ---- take, release --------------------------------------------------------------------------
    def take(self, key: str) -> bool:
        """Claim `key` for this owner. False when another live claim holds it (or this board already
        does, for another node of the same build)."""
        with self._lock:
            if key in self._held:
                return False
        written = self._create(key)
        if written is None:
            written = self._take_over(key)
        if written is None:
            return False
        with self._lock:
            self._held[key] = written
        self._start_heartbeat()
        return True

    def _create(self, key: str) -> float | None:
        """Link a spare as `key`'s claim if nobody claims it: when its body was written (None: claimed already)."""
        spare = self._spare()
        try:
            self._fill(spare)
        except OSError:
            self._drop(spare)
            raise
        try:
            try:
                os.link(spare.path, self._name(key))
            except FileNotFoundError:  # first claim on this store: make the directory
                self.dir.mkdir(parents=True, exist_ok=True)
                os.link(spare.path, self._name(key))
        except FileExistsError:
            with self._lock:
                self._spares.append(spare)
            return None
        except OSError:
            self._drop(spare)
            raise
        with self._lock:
            self._linked[key] = spare
        return spare.written

    def _fill(self, spare: _File) -> None:
        """Give the spare a claim's body, unless the one it holds was written a moment ago (its owner and expiry
        are as good: a claim counts from when its body was written). One write: a shorter body is padded with
        spaces to the file's size (JSON allows them) instead of a truncate."""
        now = time.time()
        if now - spare.written < self.ttl * REUSE_BODY_TTL_SHARE:
            return
        body = self._body(now)
        if len(body) < spare.size:
            body += b" " * (spare.size - len(body))
        os.pwrite(spare.fd, body, 0)
        spare.written, spare.size = now, len(body)

    def _spare(self) -> _File:
        """A file of this board's, not linked as any claim (made when none is free)."""
        with self._lock:
            if self._spares:
                return self._spares.pop()
        path = self.root / TMP / temp_name(".claim")  # a killed board's files are swept as leftovers
        return _File(path, os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))

    def _unlinked(self, key: str) -> None:
        """`key`'s claim name is gone (or is another builder's file now): its file is free again."""
        with self._lock:
            spare = self._linked.pop(key, None)
            if spare is not None:
                self._spares.append(spare)

    @staticmethod
    def _drop(spare: _File) -> None:
        os.close(spare.fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spare.path)

    def _take_over(self, key: str) -> float | None:
        """Replace an expired claim (or create one that vanished meanwhile), under the claims lock: when its body was
        written (None: another's live claim holds it)."""
        claim = self.read(key)
        if claim is not None and claim.live(time.time(), self.host):
            return None  # the common case, decided without the lock
        with self._locked():
            claim = self.read(key)
            if claim is None:
                return self._create(key)
            if claim.live(time.time(), self.host):
                return None
            written = time.time()  # (no later than the body's own time: the claim lives at least a ttl from it)
            self._replace(key)
        with self._lock:
            self._taken_over.add(key)
        return written

    def took_over(self, key: str) -> bool:
        """Was the claim on `key` just taken over from another holder (a killed build's, or one stalled past its
        expiry)? Asked once: the answer is forgotten."""
        with self._lock:
            if key not in self._taken_over:
                return False
            self._taken_over.discard(key)
            return True

    def release(self, key: str) -> None:
        """Give `key` up (its record is stored, or the node failed). Never deletes another's claim."""
        with self._lock:  # (the heartbeat renews a claim under this lock too, only while it is held)
            written = self._held.pop(key, None)
            if written is None:
                return
            # Written by us less than half a ttl ago: nobody may take it over yet, so it is still ours.
            recent = time.time() - written < self.ttl / 2
            spare = self._linked.pop(key, None) if recent else None  # (before a new claim of `key` can link one)
        if recent:
            # Unlinked outside the lock the workers' takes share: no longer held, so no heartbeat renews it.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._name(key))
            if spare is not None:
                with self._lock:
                    self._spares.append(spare)
            return
        with self._locked():
            claim = self.read(key)
            if claim is not None and claim.owner == self.owner:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._name(key))
        self._unlinked(key)  # ours unlinked, or replaced by a take-over: either way not our file

    # ---- heartbeat ------------------------------------------------------------------------------
    def heartbeat(self) -> None:
        """Push back the expiry of every claim held; note those another builder took over. A claim written less than
        `ttl / 6` ago is left as it is (it lives at least `ttl / 2` past the next beat; no one may take it over yet):
        most of a build's claims live well under a second, held until their node's commit window ends."""
        young = time.time() - self.ttl / 6
        with self._lock:
            keys = sorted(key for key, written in self._held.items() if written < young)
        if not keys:
            return
        with self._locked():
            for key in keys:
                claim = self.read(key)
                if claim is None or claim.owner != self.owner:
                    self.lost.add(key)
                    with self._lock:
                        self._held.pop(key, None)  # no longer ours: never delete it on release
                    continue
                now = time.time()
                with self._lock:  # released since it was read: written again, nobody would hold it
                    if key in self._held:
                        self._replace(key)
                        self._held[key] = now

    def _start_heartbeat(self) -> None:
        if self._beat is not None:
            return
        with self._lock:
            if self._beat is not None:
                return
            self._beat = threading.Thread(target=self._beat_loop, name="claim-heartbeat", daemon=True)
            self._beat.start()

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            with contextlib.suppress(OSError):  # a missed beat only shortens the claim's life
                self.heartbeat()

    def close(self) -> None:
        """Stop the heartbeat and release whatever is still held."""
        self._stop.set()
        with self._lock:
            keys = sorted(self._held)
        for key in keys:
            with contextlib.suppress(OSError):
                self.release(key)
        with self._lock:
            files = self._spares + list(self._linked.values())  # linked: a claim another builder lost
            self._spares, self._linked = [], {}
        for spare in files:
            self._drop(spare)

    def __enter__(self) -> ClaimBoard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- helpers --------------------------------------------------------------------------------
    def _replace(self, key: str) -> None:
        # Claims are advisory and never made durable (module docstring).
        write_file_atomic(self.path(key), self._body(time.time()), self.root / TMP, durable=False)

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return exclusive(self.root, CLAIMS_LOCK)


def list_claims(root: Path) -> list[Claim]:
    """Every claim file under `root` (for `claw store` views and tests)."""
    board = ClaimBoard(root, owner="")
    found = []
    directory = Path(root) / CLAIMS
    if not directory.is_dir():
        return []
    for path in sorted(directory.glob("*.json")):
        claim = board.read(oid_from_hex(path.stem))
        if claim is not None:
            found.append(claim)
    return found
