"""Action cache: action key -> id of the key's record object, kept in the index (and in packs); an entry never points at
something missing. docs/store.md (Action cache; Details by module)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from clawstore.errors import ClawError, MissingObjectError
from clawstore.store.core.batch import Pending, commit
from clawstore.store.core.ids import PREFIX, check_oid, is_oid
from clawstore.store.documents import RecordDoc, read_record
from clawstore.values import jsontext

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore


def key_digest(key: str) -> bytes:
    return bytes.fromhex(check_oid(key, "action key")[len(PREFIX):])  # (checked once: two calls a node)


def output_ids(outputs: Any, where: str = "record") -> list[str]:
    """Object ids named by a record's `outputs` ({name: id | [id, ...] | null})."""
    if outputs is None:
        return []
    if not isinstance(outputs, dict):
        raise ValueError(f"{where}: outputs must be an object, not {type(outputs).__name__}")
    ids: list[str] = []
    for name, value in outputs.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is None:
                continue
            if not is_oid(item):
                raise ValueError(f"{where}: outputs.{name} is not an object id: {item!r}")
            ids.append(item)
    return ids


def record_input_id(record: dict[str, Any]) -> Any:
    """The id of the input document a record says its key was computed from (record format 2 names it
    as `input`; format 1 kept it among the outputs as `input_document`, or named only the key)."""
    outputs = record.get("outputs")
    named = record.get("input", outputs.get("input_document") if isinstance(outputs, dict) else None)
    return record.get("key") if named is None else named  # a format-1 record naming neither: its key


def reusable(record: Any) -> bool:
    """Does a build reuse this record, or run its node again (`cacheable: false`: an infrastructure
    failure, a provider error or a timeout)? Of two records for one key, whatever brings the second in
    (a pull, an archive import) keeps a reusable one: a failure must never hide a result."""
    return isinstance(record, dict) and bool(record.get("cacheable"))


def record_reusable(read: Callable[[str], bytes], record_id: str) -> bool:
    """`reusable` of the record with this id, read with `read`; an unreadable one is not."""
    try:
        return reusable(jsontext.loads(read(record_id)))
    except (ValueError, ClawError):
        return False


def takes_over(read: Callable[[str], bytes], current: str, incoming: str) -> bool:
    """Does the record `incoming` replace `current` as a key's entry: a result in place of a failure."""
    return incoming != current and not record_reusable(read, current) and record_reusable(read, incoming)


MISSING_INPUT = "the input document its key is computed from is missing"


def entry_problem(key: str, record: Any, has: Callable[[str], bool]) -> str | None:
    """Why the entry `key -> record` cannot be verified (None if it can): the record must be for that key, name that
    document, and the document must be present and verified. A record rewritten to claim this key is what the signature
    is for (docs/trust.md). Details: docs/store.md (Details by module)."""
    why = record_problem(key, record)
    return MISSING_INPUT if why is None and not has(key) else why


def record_problem(key: str, record: Any) -> str | None:
    """`entry_problem` but for its input document's presence: what the record alone says (a pull asks it as each
    record arrives, before the packs that may bring the input document)."""
    if not isinstance(record, dict):
        return "its record is not a record"
    if record.get("key") != key:
        return f"its record is for another key ({str(record.get('key'))[:23]}...)"
    if record_input_id(record) != key:
        return "its record does not name the input document its key is computed from"
    return None


def content_problem(key: str, content: bytes) -> tuple[str | None, list[str] | None]:
    """`record_problem` of a record's content (JSON that does not parse is not a record), and the outputs it names
    (None if it names them wrongly): one parse for both, as a pull vets each record arriving."""
    try:
        record = jsontext.loads(content)
    except ValueError:
        record = None
    return record_problem(key, record), named_outputs(record)


def named_outputs(record: Any) -> list[Any] | None:
    """What a (parsed) record's `outputs` name, unchecked (None if it is no record or they are no object): for a check
    against ids in C, which whatever is not an id fails (output_ids, checking each, cost a pull 40 ms in 20,000)."""
    outputs = record.get("outputs") if isinstance(record, dict) else None
    if not isinstance(outputs, dict):
        return [] if outputs is None and isinstance(record, dict) else None
    named: list[Any] = []
    for value in outputs.values():
        if value.__class__ is list:
            named += value
        elif value is not None:
            named.append(value)
    return named


def record_outputs(record: Any) -> list[str] | None:
    """The object ids a (parsed) record's `outputs` name, None if it is no record or names them wrongly."""
    try:
        return output_ids(record.get("outputs")) if isinstance(record, dict) else None
    except ValueError:
        return None


def put_action(store: ObjectStore, key: str, record: RecordDoc | dict[str, Any]) -> str:
    """Store `record` (a RecordDoc, or its JSON as a dict) and point `key` at it. Returns the record's
    object id."""
    digest = key_digest(key)
    if isinstance(record, RecordDoc):
        record = record.to_json()
    if not isinstance(record, dict):
        raise TypeError("an action record must be a dict")
    if record.get("key", key) != key:
        raise ValueError(f"record key {record.get('key')!r} does not match action key {key}")
    for oid in output_ids(record.get("outputs"), f"record for {key}"):
        if not store.has(oid):  # write order: outputs first, then the record, then the entry
            raise MissingObjectError(f"record for {key} names output {oid}, which is not in the store")
    record_id = store.put_json(record)
    if not reusable(record) and _holds_result(store, digest):
        return record_id  # a failed re-execution never hides a result: the entry keeps it (the log names this one)
    set_entries(store, {digest: (bytes.fromhex(record_id[len(PREFIX):]), time.time_ns())})
    return record_id


def _holds_result(store: ObjectStore, digest: bytes) -> bool:
    """Does the key with this digest point at a reusable record that is still in the store?"""
    current = entry_record(store, digest)
    return current is not None and record_reusable(store.get_bytes, PREFIX + current.hex())


def set_entries(store: ObjectStore, entries: dict[bytes, tuple[bytes | None, int]]) -> None:
    """Point keys at (record, time ns) (record None removes the entry): in the open batch, else now."""
    current = store.runtime.batch()
    pending = current if current is not None else Pending()
    pending.actions.update(entries)
    if current is None:
        commit(store.runtime, pending)


def get_action_record_id(store: ObjectStore, key: str, look_again: bool = True) -> str | None:
    """The record id `key` points at (None: no entry); `look_again`: see IndexView.find_action."""
    record = entry_record(store, key_digest(key), look_again)
    return None if record is None else PREFIX + record.hex()


def entry_record(store: ObjectStore, digest: bytes, look_again: bool = True) -> bytes | None:
    """The record digest the key with this digest points at (None: no entry): for bulk callers."""
    current = store.runtime.batch()
    found = current.actions.get(digest) if current is not None else None
    if found is None and store.runtime.group is not None:
        found = store.runtime.group.find_action(digest)
    if found is not None:
        return found[0]
    entry = store.runtime.index.find_action(digest, look_again)
    return None if entry is None else entry.record


def get_action(store: ObjectStore, key: str) -> RecordDoc | None:
    """The record `key` points at (None: no entry); StoreError naming the field a damaged one gets wrong."""
    record_id = get_action_record_id(store, key)
    if record_id is None:
        return None
    return read_record(store.get_json(record_id), f"action-cache entry for {key}: record {record_id}")


def all_entry_digests(store: ObjectStore) -> dict[bytes, bytes]:
    """{key digest: record digest} of every entry, in no order: one pass for bulk readers (a push of
    40,000 entries), cut from the index's rows (Entries.entry_digests), without the sort and the hex ids of
    iter_actions."""
    index = store.runtime.index
    index.refresh()
    return index.entry_digests()


def iter_actions(store: ObjectStore) -> Iterator[tuple[str, str | None]]:
    """(key, record id) for every entry, sorted by key (the record id is never None in format 2)."""
    index = store.runtime.index
    index.refresh()
    for key, entry in index.actions.items():  # (streamed in key order)
        if entry.record is not None:
            yield PREFIX + key.hex(), PREFIX + entry.record.hex()
