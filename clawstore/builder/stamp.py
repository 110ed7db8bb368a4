"""A no-op build without loading a config: skip planning when nothing a key depends on has changed (planning a large
campaign parses thousands of files only to find every node fresh). What the stamp records and when it is trusted:
docs/building.md (Details by module)."""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3

if TYPE_CHECKING:
    from clawstore.store.documents import Stamp

STAMPS_DIR = "stamps"
RACY_NS = 2_000_000_000
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
_SHELL_NOISE = {"_", "OLDPWD", "SHLVL", "COLUMNS", "LINES", "PS1", "PS2", "PROMPT_COMMAND", "TERM_SESSION_ID"}
_AUDITED = {"open", "os.listdir", "os.scandir"}
Layers = list[tuple[str, dict[str, int]]]  # [(model id, {layer: nodes})], in plan order

_recorders: list[Recorder] = []
_hook_lock = threading.Lock()
_hooked = False


@dataclass
class Recorder:
    """Paths under `root` (but not under `skip`) opened or listed while recording."""

    root: str
    skip: str
    paths: set[str] = field(default_factory=set)
    # Each path's stat data when it was first opened or listed: a file changed after (an edit while the build runs)
    # is not the one the build read, and `write` leaves no stamp (session 74's races audit).
    first: dict[str, list[int] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._inside_skip = self.skip + os.sep
        # The store's own staging directory, made beside it by a build that creates the store and renamed into place
        # (store/core/layout.py): read as it is made, gone at the end. Recorded, it made a cold build into a new store
        # leave no stamp ("changed since the build read it"), and the next no-op planned the whole campaign.
        self._staging = os.path.join(os.path.dirname(self.skip), f".{os.path.basename(self.skip)}.new-")

    def add(self, raw: Any) -> None:
        if isinstance(raw, int):
            return
        if isinstance(raw, str) and raw.startswith(self._inside_skip) and "/." not in raw:
            return  # a store file by its absolute, normal path: most of a build's events, skipped without abspath
        path = os.path.abspath(os.fsdecode(raw))
        if path.startswith(self.root + os.sep) and not (path == self.skip or path.startswith(self.skip + os.sep)
                                                        or path.startswith(self._staging)):
            if path not in self.paths:
                self.first[path] = _stat(path)
            self.paths.add(path)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _recorders and event in _AUDITED and args:
        for recorder in list(_recorders):
            recorder.add(args[0])


@contextlib.contextmanager
def recording(root: Path, store_root: Path) -> Iterator[Recorder]:
    """Record what the block reads inside the workspace `root` (the store excluded)."""
    global _hooked
    with _hook_lock:
        if not _hooked:
            sys.addaudithook(_audit)  # process-wide and permanent: idle unless a recorder is active
            _hooked = True
    recorder = Recorder(str(Path(root).absolute()), str(Path(store_root).absolute()))
    _recorders.append(recorder)
    try:
        yield recorder
    finally:
        _recorders.remove(recorder)


# ---------------------------------------------------------------------------------------- digests

def request_digest(cwd: Path, store_root: Path, flags: tuple[str | None, ...]) -> str:
    text = json.dumps([str(Path(cwd).absolute()), str(Path(store_root).absolute()), list(flags)])
    return blake3.blake3(text.encode()).hexdigest()[:32]


def env_digest() -> str:
    items = sorted((k, v) for k, v in os.environ.items()
                   if k not in _SHELL_NOISE and not any(word in k.upper() for word in _SECRET_WORDS))
    return blake3.blake3(json.dumps(items).encode()).hexdigest()


@functools.cache
def code_digest() -> str:
    """The stat data of claw's code files, digested once per process: the code a process runs is the code it started
    with (a build stats the ~300 files once, not at each of its stamp and parsed-cases reads and writes; an edit made
    while it runs is not vouched for by the stamp it writes)."""
    import clawstore

    package = os.path.dirname(clawstore.__file__)
    stats = []
    for parts in _code_parts(package):
        st = os.stat(os.path.join(package, *parts))
        stats.append([os.path.join(*parts), st.st_size, st.st_mtime_ns])
    return blake3.blake3(json.dumps(stats).encode()).hexdigest()


def code_files(package: Path) -> list[Path]:
    """The files of claw's own code a stamp vouches for by their stat data (an edit of one, even undone, and
    no stamp written before it matches)."""
    return [package.joinpath(*parts) for parts in _code_parts(str(package))]


def _code_parts(package: str) -> list[tuple[str, ...]]:
    """code_files' paths as their parts below `package`, in the order Paths sort in (by parts). By os.walk and
    strs, not Path.rglob and Paths: a third of the CPU, in every command that writes or checks a stamp."""
    found: list[tuple[str, ...]] = []
    for directory, subdirectories, names in os.walk(package):
        subdirectories[:] = [name for name in subdirectories if name != "__pycache__"]
        below = os.path.relpath(directory, package)
        parts = () if below == os.curdir else tuple(below.split(os.sep))
        found.extend((*parts, name) for name in names if os.path.splitext(name)[1] in (".py", ".md", ".json"))
    found.sort()
    return found


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size if not os.path.isdir(path) else 0, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _with_parents(paths: set[str], root: str) -> set[str]:
    """`paths` and their directories below the workspace root (not the root itself: `claw report` and
    `claw view` write beside configs/, and no build lists the root; Recorder leaves it out too)."""
    found = set(paths)
    for path in paths:
        parent = os.path.dirname(path)
        while parent.startswith(root + os.sep) and parent not in found:
            found.add(parent)
            parent = os.path.dirname(parent)
    return found


def store_state(store_root: Path) -> list[list[str]]:
    from clawstore.store.core.layout import StoreLayout

    layout = StoreLayout(store_root)
    return [sorted(os.listdir(path)) if path.is_dir() else [] for path in (layout.index, layout.packs)]


def _read_ref(store_root: Path, name: str) -> str | None:
    """The ref, or None when absent, damaged or misnamed (then the full path says what is wrong)."""
    from clawstore.errors import ClawError
    from clawstore.store.refs import read_ref

    try:
        return read_ref(store_root, name)
    except ClawError:
        return None


def _marker_ok(store_root: Path) -> bool:
    from clawstore.errors import ClawError
    from clawstore.store.core.layout import FORMAT_VERSION, read_format

    try:
        return read_format(store_root) == FORMAT_VERSION
    except ClawError:
        return False


def _stamp_path(store_root: Path, digest: str) -> Path:
    return Path(store_root) / STAMPS_DIR / f"{digest}.json"


# ------------------------------------------------------------------------------------ write, match

def _kept_apart(store_root: Path) -> bool:
    """Imports kept apart as untrusted: a build may move them in first (store/untrusted.py)."""
    from clawstore.store.core.layout import StoreLayout

    directory = StoreLayout(store_root).refs / "untrusted"
    return directory.is_dir() and any(directory.iterdir())


def write(store_root: Path, digest: str, recorder: Recorder, campaign: dict[str, Any], rows: Iterable[dict[str, Any]],
          counts: dict[str, int], layers: Layers, cases: dict[str, Any] | None = None) -> bool:
    """Write the stamp of a build that left its campaign complete (`campaign`: its build log's, given by the build
    rather than read back from a log of every node; `cases`: builder/casestamp.py `cases_of`). False (nothing
    written) when a file it read changed too recently to be trusted by its stat data, or since it read it (an edit
    while it ran: the stamp would vouch for what it never planned), or the store has no head."""
    from clawstore.store.documents import Stamp

    if not campaign:
        return False
    campaign_id = str(campaign.get("id"))
    head = _read_ref(store_root, f"campaigns/{campaign_id}")
    if head is None or _kept_apart(store_root):
        return False
    now = time.time_ns()
    reads = {}
    for path in sorted(_with_parents(recorder.paths, recorder.root)):
        stat = _stat(path)
        if stat is not None and now - max(stat[1], stat[2]) < RACY_NS:
            return False  # racy: a change within the mtime granularity could go unseen
        if path in recorder.first and recorder.first[path] != stat:
            return False  # changed since the build read it
        reads[path] = stat
    from clawstore.host.durable import write_file_atomic
    from clawstore.store.core.layout import StoreLayout

    path = _stamp_path(store_root, digest)
    tmp = StoreLayout(store_root).tmp
    digest_of_rows = blake3.blake3()
    size = 0

    def hashed(chunks: Iterator[bytes]) -> Iterator[bytes]:
        nonlocal size
        for chunk in chunks:
            digest_of_rows.update(chunk)
            size += len(chunk)
            yield chunk

    total = sum(counts.values())
    try:
        path.parent.mkdir(exist_ok=True)
        # Derived data: no fsync (a lost stamp only costs one full plan). The rows first, then the stamp naming their
        # digest: a stamp and a rows file of different builds (a crash between the two) do not match.
        write_file_atomic(_rows_path(store_root, digest), hashed(_encoded(rows)), tmp, durable=False)
        doc = Stamp(campaign=campaign, campaign_id=campaign_id, head=head, reads=reads, env=env_digest(),
                    code=code_digest(), store=store_state(store_root),
                    rows={"bytes": size, "blake3": digest_of_rows.hexdigest()},
                    counts={"executed": 0, "reused": total, "failed": 0, "skipped": 0}, layers=layers, cases=cases)
        write_file_atomic(path, json.dumps(doc.to_json(), separators=(",", ":")).encode(), tmp, durable=False)
    except OSError:
        return False
    return True


ROWS_PER_CHUNK = 1000  # rows encoded at once into the rows file


def _encoded(rows: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """`rows`, each as a no-op rebuild prints it, one JSON line each, in chunks: neither the rows' copies nor their
    text (about 2 KB a run) are held whole."""
    rows = iter(rows)
    while block := list(itertools.islice(rows, ROWS_PER_CHUNK)):
        yield "".join(json.dumps({**row, "run": "reuse", **({"eval": "reuse"} if row.get("eval") == "exec" else {})},
                                 separators=(",", ":")) + "\n" for row in block).encode()


def _rows_path(store_root: Path, digest: str) -> Path:
    return Path(store_root) / STAMPS_DIR / f"{digest}.rows"


@dataclass(frozen=True)
class StampRows:
    """The rows a stamp's build printed, read a line at a time from the rows file each time they are iterated (never
    held whole: `claw build` prints them as a table in two passes). The file is the one opened and checked, even if a
    build replaces it meanwhile."""

    file: BinaryIO

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.file.seek(0)
        for line in self.file:
            yield json.loads(line)


def rows_of(store_root: Path, digest: str, stamp: Stamp) -> StampRows | None:
    """The stamp's rows if its rows file is the one it names (read once, in blocks, for its digest); None when
    missing, damaged or another build's: then plan as usual."""
    try:
        file = _rows_path(store_root, digest).open("rb")
    except OSError:
        return None
    found = blake3.blake3()
    size = 0
    try:
        while block := file.read(1 << 20):
            found.update(block)
            size += len(block)
    except OSError:
        file.close()
        return None
    if size != stamp.rows["bytes"] or found.hexdigest() != stamp.rows["blake3"]:
        file.close()
        return None
    return StampRows(file)  # (closed when the process ends, or the rows are dropped)


def forget(store_root: Path, digest: str) -> None:
    _stamp_path(store_root, digest).unlink(missing_ok=True)
    _rows_path(store_root, digest).unlink(missing_ok=True)


def match(store_root: Path, digest: str) -> Stamp | None:
    """The stamp, if everything it recorded still holds; else None (then: plan as usual, as for a
    damaged or hand-edited stamp). Its rows are not read: rows_of."""
    found = differing(store_root, digest, stop_at_first=True)
    if found is None or found[1] or not rows_sized(store_root, digest, found[0]):
        return None
    return found[0]


def rows_sized(store_root: Path, digest: str, doc: Stamp) -> bool:
    """Is the stamp's rows file there, of the size it names (its digest: rows_of, when they are printed)?"""
    rows = _stat(str(_rows_path(store_root, digest)))
    return rows is not None and rows[0] == doc.rows["bytes"]


def differing(store_root: Path, digest: str, stop_at_first: bool = False) -> tuple[Stamp, list[str]] | None:
    """The stamp and the reads whose stat data changed since (only the first with `stop_at_first`), if everything
    else it recorded still holds (store, head, environment, code); else None. Its rows are not looked at."""
    from clawstore.errors import StoreError
    from clawstore.store.documents import read_stamp

    path = _stamp_path(store_root, digest)
    try:
        doc = read_stamp(json.loads(path.read_bytes()), str(path))
    except (OSError, ValueError, StoreError):
        return None
    if _read_ref(store_root, f"campaigns/{doc.campaign_id}") != doc.head or _kept_apart(store_root):
        return None
    if not _marker_ok(store_root):  # (the full path opens the store, and says what is wrong with it)
        return None
    if doc.store != store_state(store_root) or doc.env != env_digest():
        return None
    changed = []
    for read, stat in doc.reads.items():
        if _stat(read) != stat:
            changed.append(read)
            if stop_at_first:
                return doc, changed
    if doc.code != code_digest():
        return None
    return doc, changed


def layers_of(stamp: Stamp) -> Layers | None:
    """The stamp's node counts per model and layer (in plan order), None in a stamp without them (an
    older claw's, or damaged): then `claw status` and its kin plan in full."""
    return valid_layers(stamp.layers)


def valid_layers(layers: Any) -> Layers | None:
    """`layers` as written by `write` (nodes per model and layer), None if damaged."""
    if not (isinstance(layers, list) and all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict)
            and all(isinstance(k, str) and type(n) is int and n >= 0 for k, n in item[1].items())
            for item in layers)):
        return None
    return [(model, dict(kinds)) for model, kinds in layers]


def log_noop(store_root: Path, stamp: Stamp) -> str:
    """Write the build log of a no-op build confirmed by `stamp` (what a planned no-op writes: its
    counts and the head it confirmed, no node); returns its build id."""
    from clawstore.builder.buildlog import new_build_id
    from clawstore.store.buildlogs import write_build_log
    from clawstore.store.documents import BuildLogDoc
    from clawstore.values.clock import utc_now

    started = utc_now()
    doc = BuildLogDoc(build_id=new_build_id(), started_at=started, campaign=stamp.campaign,
                      finished_at=utc_now(), state="complete", head=stamp.head, head_written=False)
    doc.counts.update(stamp.counts)
    write_build_log(store_root, doc)
    return doc.build_id
