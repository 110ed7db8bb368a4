"""Build logs: one JSON document per `claw build` under `builds/` (the history). While a build runs, its nodes go to an
append-only journal beside it (`<id>.jsonl`) and its document (format 3) holds the rest, rewritten whole (it is small);
at its end the document is written once with its nodes inline (format 2) and the journal removed. Layouts and the
meaning of each field: docs/store.md (Details by module)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Collection, Iterable, Iterator
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from clawstore.errors import StoreError
from clawstore.host.durable import atomic_file, fsync_path, write_file_atomic
from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.core.layout import StoreLayout
from clawstore.store.core.names import check_name
from clawstore.store.documents import BUILD_LOG_FORMAT, JOURNALED_FORMAT, BuildLogDoc, read_build_log_doc

if TYPE_CHECKING:
    from clawstore.store.face import StoreReader
    from clawstore.store.store import Store

FIX = b'{"fix":'  # a journal line saying the node at that index failed after all (its record was not stored)
TOLD_BY = "told_by"  # a killed build's log: the build that named it after it was killed, and ended (spend/killed.py)


def builds_dir(store_root: Path | str) -> Path:
    return StoreLayout(store_root).builds


def live_builds(store: StoreReader) -> set[str]:
    """Build ids whose process still holds its lease: their logs are not final yet."""
    return {lease.purpose.split(" ", 1)[1] for lease in store.list_leases()
            if lease.alive and lease.purpose.startswith("build ")}


class JournalsRead:
    """The killed builds' journals one gc has read (`unadopted_records`), each by its file, size and mtime, with how
    many records it named; `skipped`: the records of those the last call skipped, read already and unchanged (gc
    counts them among its roots still)."""

    def __init__(self) -> None:
        self.records: dict[tuple[object, ...], int] = {}
        self.skipped = 0


def unadopted_records(store: StoreReader, read: JournalsRead | None = None) -> Iterator[tuple[str, str]]:
    """(build id, record id) of every node a killed build recorded: its journal beside a log still `running` (or none
    readable yet), no live lease, no `told_by` (a build of its campaign that found it killed at its start has ended
    since, its head naming what it reused). gc's roots until then: before session 76 a gc after the grace period
    deleted them, and the next build paid for them again (tests/faults/test_killed_gc.py). A journal that cannot be
    read is a StoreError: gc cannot know what it keeps. `read` (one gc's, across its two marks): the journals read
    already, skipped while they are the same file of the same size and mtime (their records are marked), noted as
    they are read (before session 77 gc's second mark, for builds killed meanwhile, read every journal again)."""
    if read is not None:
        read.skipped = 0
    for journal, _ in untold_killed(store):
        build_id = journal.stem
        if read is None:
            yield from ((build_id, record) for record in _journal_records(journal))
            continue
        try:
            found = journal.stat()
        except FileNotFoundError:
            continue  # (gone since it was listed: removed with its build's log, as _journal_lines skips it)
        except OSError as exc:
            raise StoreError(f"{journal}: unreadable build log journal ({exc.strerror or exc})") from None
        seen = (journal.name, found.st_ino, found.st_size, found.st_mtime_ns)
        if seen in read.records:
            read.skipped += read.records[seen]
            continue
        count = 0
        for record in _journal_records(journal):
            count += 1
            yield build_id, record
        read.records[seen] = count


# Seconds either side of a killed build's last log write within which gc keeps the entries it may have written
# unjournaled: builder/execute.py writes its log when a node ends LOG_WRITE_INTERVAL_S (2 s) or more after the last
# write, so what it finished and never journaled was stored before the kill and within 2 s of that write; the rest
# is slack for the clocks of the writer and of the file system (an entry's time is the writer's, a file's mtime the
# kernel's).
UNJOURNALED_WINDOW_S = 60.0


def unadopted_windows(store: StoreReader) -> list[tuple[float, float]]:
    """(from, to) epoch seconds around each untold killed build's last log write: gc keeps every action-cache entry
    written within one, whatever its grace period. What such a build finished after its last write is in no journal
    and has no other keeper until a build adopts it (tests/gc/test_archive_elsewhere.py: a run answered 1 s before the
    kill). A window, not everything since the build began: a killed build of a campaign nobody builds again would
    keep every later entry of the store from gc."""
    return _windows(untold_killed(store))


def _windows(killed: list[tuple[Path, dict[str, Any] | None]]) -> list[tuple[float, float]]:
    windows = []
    for journal, _ in killed:
        last = 0.0
        for path in (journal, journal.with_suffix(".json")):
            with contextlib.suppress(OSError):
                last = max(last, path.stat().st_mtime)
        windows.append((last - UNJOURNALED_WINDOW_S, last + UNJOURNALED_WINDOW_S))
    return windows


def unadopted_entries(store: Store) -> dict[bytes, bytes]:
    """{key digest: record digest} of the entries gc keeps as what a killed build finished and no build adopted yet:
    those whose record its journal names (`unadopted_records`), and those written within one of its windows
    (`unadopted_windows`: what its journal may lack). What a `claw push` marks for the pulling store to keep
    (remote/push.py `_unadopted_packs`, by campaign: `pushed_unadopted`). Empty at once when no build was killed."""
    if not journals(store.root):
        return {}
    return _unadopted(store, untold_killed(store))[0]


def _unadopted(store: Store, killed: list[tuple[Path, dict[str, Any] | None]]
               ) -> tuple[dict[bytes, bytes], dict[str, set[bytes]]]:
    """`killed`'s entries as `unadopted_entries` finds them (the action index read once), and {build id: the records
    its journal names}."""
    named = {journal.stem: {bytes.fromhex(record[len(PREFIX):]) for record in _journal_records(journal)
                            if is_oid(record)} for journal, _ in killed}
    records = set().union(*named.values())
    windows = [(int(low * 1e9), int(high * 1e9)) for low, high in _windows(killed)]
    if not records and not windows:
        return {}, named
    index = store.runtime.index
    index.refresh()
    found = {key: entry.record for key, entry in index.actions.items() if entry.record is not None
             and (entry.record in records or any(low <= entry.time_ns <= high for low, high in windows))}
    return found, named


# campaign -> the entries its killed builds finished (None: what no killed build of a campaign wrote, in their windows)
Unadopted = dict[str | None, dict[bytes, bytes]]


def pushed_unadopted(store: Store, names: Collection[str] | None) -> Unadopted:
    """What the killed builds of the campaigns a push sends (`names`: its refs; None: the whole store) finished
    (`unadopted_entries`), which it marks (remote/push.py), by campaign, so that a pull narrowed to one takes its own:
    a whole push's, every campaign's, and under None what the windows hold that no killed build of a campaign wrote
    (which whole pulls alone take); a narrowed one's, those of the campaigns its refs name (a pin: its head's). A
    campaign's are the entries whose record one of its killed builds' journals names or, within the windows, one of
    them wrote (another campaign's build, killed or running beside it, writes in the same window); a killed build
    whose log cannot be read names no campaign. Nothing is read when no build was killed; the journals and the action
    index are read once."""
    if not journals(store.root):
        return {}
    killed = untold_killed(store)
    campaign_of = {journal.stem: _campaign_of(data) for journal, data in killed}
    campaigns = set()
    if names is None:
        campaigns = {c for c in campaign_of.values() if c is not None}
    for name in names or ():
        if name.startswith(CAMPAIGNS):
            campaigns.add(name[len(CAMPAIGNS):])
        elif (head := store.get_ref(name)) is not None:
            campaign = _campaign_of_head(store, head)
            if campaign is not None:
                campaigns.add(campaign)
    selected = killed if names is None else [(j, d) for j, d in killed if campaign_of[j.stem] in campaigns]
    found, named = _unadopted(store, selected)
    grouped: Unadopted = {}
    for key, record in found.items():
        builds = [build for build, records in named.items() if record in records]
        if not builds:  # (a window's entry its journal lacks: the build the record names as its writer)
            writer = _written_by(store, record)
            builds = [writer] if writer in named else []
        owners = {campaign_of[build] for build in builds} & campaigns
        for campaign in owners:
            grouped.setdefault(campaign, {})[key] = record
        if not owners and names is None:
            grouped.setdefault(None, {})[key] = record
    return {campaign: grouped[campaign] for campaign in sorted(grouped, key=lambda c: (c is None, c or ""))}


CAMPAIGNS = "campaigns/"


def _campaign_of_head(store: Store, head: str) -> str | None:
    try:
        doc = store.get_json(head)
    except (StoreError, ValueError):
        return None  # (the push says what is wrong with it)
    return _campaign_of(doc if isinstance(doc, dict) else None)


def _campaign_of(log: dict[str, Any] | None) -> str | None:
    campaign = log.get("campaign") if log is not None else None
    value = campaign.get("id") if isinstance(campaign, dict) else None
    return value if isinstance(value, str) else None


def _written_by(store: Store, record: bytes) -> str | None:
    """The build a record names as its writer (None: unreadable, or not a record)."""
    try:
        doc = store.get_json(PREFIX + record.hex())
    except (StoreError, ValueError):
        return None
    value = doc.get("build_id") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def journals(store_root: Path | str) -> list[Path]:
    """The build logs' journals, what a running or killed build leaves (none: no build was killed, and no Store need
    be opened to say so)."""
    directory = builds_dir(store_root)
    return sorted(directory.glob("*.jsonl")) if directory.is_dir() else []


def untold_killed(store: StoreReader) -> list[tuple[Path, dict[str, Any] | None]]:
    """The journals of killed builds no later build has told of (no live lease, the log still `running`, no
    `told_by`), each with its log's document as JSON (None: unreadable). What gc keeps (`unadopted_records`,
    `unadopted_windows`) and what spend/killed.py names."""
    found_journals = journals(store.root)
    if not found_journals:
        return []
    live = live_builds(store)
    found = []
    for journal in found_journals:
        if journal.stem in live:
            continue  # (a running build: gc keeps everything while one runs)
        data: Any = None
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(journal.with_suffix(".json").read_bytes())
        if isinstance(data, dict) and (data.get("state") != "running" or data.get(TOLD_BY)):
            continue
        found.append((journal, data if isinstance(data, dict) else None))
    return found


def _journal_records(journal: Path) -> Iterator[str]:
    """The record ids of a journal's nodes (those a fix line failed after all left out), streamed: a line at a time,
    the fixed indexes (few) held, never its nodes (a killed build of 200,000 nodes held them all as dicts in gc)."""
    fixed: set[int] = set()
    for number, line in enumerate(_journal_lines(journal), 1):
        if line.startswith(FIX):
            fix = _json_line(journal, number, line).get("fix")
            if type(fix) is int:
                fixed.add(fix)
    index = 0
    for number, line in enumerate(_journal_lines(journal), 1):
        if line.startswith(FIX):
            continue
        try:  # (its record alone, the rest skipped: a third of json.loads's time, 200,000 lines read twice a gc)
            record = _RECORD.decode(line).record
        except msgspec.MsgspecError:  # (not an object, a record not a string, not JSON msgspec reads: as json reads it)
            node = _json_line(journal, number, line)
            record = node.get("record") if isinstance(node, dict) else None
        if index not in fixed and isinstance(record, str):
            yield record
        index += 1


class _Recorded(msgspec.Struct):
    """A journal line's record (its other fields skipped; the last "record" when named twice, as json.loads)."""

    record: str | None = None


_RECORD = msgspec.json.Decoder(_Recorded)


def _json_line(journal: Path, number: int, line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise StoreError(f"{journal}: line {number}: not a JSON node") from None


def build_log_path(store_root: Path | str, build_id: str) -> Path:
    """The one place a build log's path is made (the id passes the store's naming rule first)."""
    return builds_dir(store_root) / f"{check_name(build_id, 'build id')}.json"


def write_build_log(store_root: Path | str, doc: BuildLogDoc) -> Path:
    path = build_log_path(store_root, doc.build_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file_atomic(path, doc.encode(), StoreLayout(store_root).tmp)
    except OSError as exc:
        raise StoreError(f"cannot write build log {path}: {exc.strerror or exc}") from exc
    return path


def set_build_log_field(store_root: Path | str, build_id: str, name: str, value: Any) -> None:
    """Add a field to a build's log as it stands (its other fields kept as they are, those this claw does not read
    too): what a later build writes into a killed one's (spend/killed.py). OSError, ValueError: not done."""
    path = build_log_path(store_root, build_id)
    data = json.loads(path.read_bytes())
    if isinstance(data, dict):
        data[name] = value
        write_file_atomic(path, json.dumps(data, sort_keys=True, separators=(",", ":")).encode(),
                          StoreLayout(store_root).tmp)


def journal_path(log_path: Path) -> Path:
    return log_path.with_suffix(".jsonl")


# json.dumps(node, sort_keys=True, separators=(",", ":"))'s C encoder, made once instead of once a node (a journal
# line per node executed): the same bytes.
_ENCODE_NODE = (c_make_encoder(None, json.JSONEncoder().default, encode_basestring_ascii, None, ":", ",",
                               True, False, True) if c_make_encoder is not None else None)


# A node of strings, ints and None (and its address: one dict of them), as msgspec writes it with its keys sorted, is
# those same bytes when they are printable ASCII, in a fifth of the time (its floats and non-ASCII text would differ).
_SORTED = msgspec.json.Encoder(order="sorted")
_PLAIN = frozenset((str, int, bool, type(None)))


def _plain(node: dict[str, Any]) -> bool:
    for name, value in node.items():
        if type(value) is dict:
            for inner, item in value.items():
                if type(inner) is not str or type(item) not in _PLAIN:
                    return False
        elif type(value) not in _PLAIN:
            return False
        if type(name) is not str:
            return False
    return True


def encode_node(node: dict[str, Any]) -> bytes:
    """One node as a journal line and as it stands in a format-2 log (keys sorted, no whitespace)."""
    if _plain(node):
        line = _SORTED.encode(node)
        if line.isascii() and b"\x7f" not in line:
            return line
    if _ENCODE_NODE is None:
        return json.dumps(node, sort_keys=True, separators=(",", ":")).encode()
    return "".join(_ENCODE_NODE(node, 0)).encode()


def append_journal(store_root: Path | str, build_id: str, lines: Iterable[bytes], create: bool = False) -> None:
    """Append encoded node (or fix) lines to a running build's journal, durably: the summary counting them is written
    after. A failed append is cut off again, so that a later one does not follow half a line. `create`: make it, empty,
    when there is none (a killed build is found by its journal: spend/killed.py)."""
    path = journal_path(build_log_path(store_root, build_id))
    data = b"".join(line + b"\n" for line in lines)
    if not data and not (create and not path.exists()):
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        with open(path, "ab") as fh:
            size = fh.tell()
            try:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            except OSError:
                with contextlib.suppress(OSError):
                    fh.truncate(size)
                raise
        if new:
            fsync_path(path.parent)
    except OSError as exc:
        raise StoreError(f"cannot write build log journal {path}: {exc.strerror or exc}") from exc


def _journal_lines(path: Path) -> Iterable[bytes]:
    """A journal's complete lines (a torn last one, left by a killed writer, is not one)."""
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line.endswith(b"\n"):
                    yield line[:-1]
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"{path}: unreadable build log journal ({exc.strerror or exc})") from None


def journal_entries(path: Path) -> Iterator[Any]:
    """A journal's lines as JSON, in order (nodes and fix lines); StoreError naming the line that is not JSON."""
    for number, line in enumerate(_journal_lines(path), 1):
        try:
            yield json.loads(line)
        except ValueError:
            raise StoreError(f"{path}: line {number}: not a JSON node") from None


def read_journal(path: Path) -> list[Any]:
    """The nodes of a journal, in order, each fix applied (its node failed: no record)."""
    nodes: list[Any] = []
    for entry in journal_entries(path):
        fix = entry.get("fix") if isinstance(entry, dict) else None
        if type(fix) is int and 0 <= fix < len(nodes) and isinstance(nodes[fix], dict):
            nodes[fix] = {**nodes[fix], "action": "fail", "record": None}
        elif fix is None:
            nodes.append(entry)
    return nodes


def seal_build_log(store_root: Path | str, doc: BuildLogDoc, fixed: set[int]) -> Path:
    """Write a build's final log (format 2): its nodes streamed from its journal (those at the indexes in `fixed` as
    failed, without a record), then remove the journal. Its memory is one line, whatever the build's size."""
    path = build_log_path(store_root, doc.build_id)
    journal = journal_path(path)
    fields = {name: value for name, value in doc.to_json().items() if name != "nodes"}
    fields["format"] = BUILD_LOG_FORMAT
    before = {name: value for name, value in fields.items() if name < "nodes"}
    after = {name: value for name, value in fields.items() if name > "nodes"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(path, StoreLayout(store_root).tmp) as out:
            out.write(json.dumps(before, sort_keys=True, separators=(",", ":"))[:-1].encode() + b',"nodes":[')
            index = 0
            for line in _journal_lines(journal):
                if line.startswith(FIX):
                    continue
                if index:
                    out.write(b",")
                if index in fixed:
                    line = encode_node({**json.loads(line), "action": "fail", "record": None})
                out.write(line)
                index += 1
            out.write(b"]," + json.dumps(after, sort_keys=True, separators=(",", ":"))[1:].encode())
        journal.unlink(missing_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot write build log {path}: {exc.strerror or exc}") from exc
    return path


def read_build_log(path: Path) -> BuildLogDoc:
    """A build log (format 1 or 2; format 3 read with its journal's nodes as the format-2 log it would be sealed as);
    StoreError naming the file and what is wrong."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise StoreError(f"no build log {path}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: unreadable build log ({exc})") from None
    doc = read_build_log_doc(data, str(path))
    if doc.format == JOURNALED_FORMAT:  # with its journal's nodes, what the sealed log would be
        doc.nodes, doc.format = read_journal(journal_path(path)), BUILD_LOG_FORMAT
    return doc
