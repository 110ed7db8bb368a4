"""Action cache: `ac/<2 hex>/<64 hex of the key>` holds the id of the key's record object.

The record is stored first (as an object) and its outputs must already exist, so an entry never
points at something missing. Rewriting an entry (a retried failure) replaces it atomically.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawstore.errors import MissingObjectError, StoreError
from clawstore.store.durable import write_file_atomic
from clawstore.store.ids import PREFIX, check_oid, is_hex64, is_oid, oid_hex

if TYPE_CHECKING:
    from clawstore.store.store import Store


def entry_path(store: Store, key: str) -> Path:
    hexdigest = oid_hex(check_oid(key, "action key"))
    return store.root / "ac" / hexdigest[:2] / hexdigest


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


def put_action(store: Store, key: str, record: dict[str, Any]) -> str:
    """Store `record` and point `key` at it. Returns the record's object id."""
    path = entry_path(store, key)
    if not isinstance(record, dict):
        raise TypeError("an action record must be a dict")
    if record.get("key", key) != key:
        raise ValueError(f"record key {record.get('key')!r} does not match action key {key}")
    for oid in output_ids(record.get("outputs"), f"record for {key}"):
        if not store.has(oid):  # write order: outputs first, then the record, then the entry
            raise MissingObjectError(f"record for {key} names output {oid}, which is not in the store")
    record_id = store.put_json(record)
    body = (record_id + "\n").encode()
    if not store.queue_pointer(path, body):
        write_file_atomic(path, body, store.root / "tmp")
    return record_id


def get_action_record_id(store: Store, key: str) -> str | None:
    path = entry_path(store, key)
    queued = store.queued_pointer(path)
    if queued is not None:
        return queued.decode().strip()
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        text = ""
    if not is_oid(text):
        raise StoreError(f"action-cache entry {path} is damaged (run `claw fsck --repair`)")
    return text


def get_action(store: Store, key: str) -> dict[str, Any] | None:
    record_id = get_action_record_id(store, key)
    if record_id is None:
        return None
    record = store.get_json(record_id)
    if not isinstance(record, dict):
        raise StoreError(f"action-cache entry for {key} points at {record_id}, which is not a record")
    return record


def iter_actions(store: Store) -> Iterator[tuple[str, str | None]]:
    """(key, record id) for every entry; the record id is None if the entry file is damaged."""
    ac_dir = store.root / "ac"
    for shard in sorted(os.listdir(ac_dir)):
        with os.scandir(ac_dir / shard) as entries:
            for entry in entries:
                if not (is_hex64(entry.name) and entry.name.startswith(shard)):
                    continue
                try:
                    text = Path(entry.path).read_text(encoding="ascii").strip()
                except FileNotFoundError:
                    continue
                except (OSError, UnicodeDecodeError):
                    text = ""
                yield PREFIX + entry.name, text if is_oid(text) else None
