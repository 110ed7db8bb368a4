"""Refs `imports/<what>-<id>`: what an import brought that no head names yet, kept from gc until the user deletes the
ref (`claw refs --delete`), as a pin. `claw import-pae` (pae/importer.py) and `claw archive import` (the results an
archive carries beyond its head: `beyond_heads`, builder/campaign_archive.py beyond_head_records) each set one, and so
does the first build after an archive imported --untrusted is trusted (store/untrusted.py promote_trusted)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from clawstore.store.core.ids import PREFIX, is_oid
from clawstore.store.headdoc import iter_nodes

if TYPE_CHECKING:
    from clawstore.store.store import Store

IMPORTS = "imports/"  # refs of imports: each names what one import stored or found (a gc root, like a pin)


def keep_imported(store: Store, what: str, records: Iterable[str]) -> str | None:
    """Keep `records` from gc: one object lists them (kind `<what>_import`), the ref `imports/<what>-<16 hex of its
    id>` names it; the ref, None when there is nothing to keep. Named by what it keeps: importing the same again names
    the same ref, and two imports never one. The listing is durable before the ref names it."""
    listed = sorted(set(records))
    if not listed:
        return None
    with store.batch():
        listing = store.put_json({"kind": f"{what}_import", "records": listed})
    ref = f"{IMPORTS}{what}-{listing.removeprefix(PREFIX)[:16]}"
    store.set_ref(ref, listing)
    return ref


def beyond_heads(store: Store, heads: Iterable[str], entries: Mapping[str, str]) -> list[str]:
    """The records `entries` (an archive's, a kept-apart set's, a pull's) name that none of the heads' nodes do, each
    once, sorted: what a killed build finished beyond the head it was exported or pushed with, which no head names
    until a build adopts them. One byte an entry marks those a head names (each node's key found among
    the entries' sorted keys): no set of ids, whatever the campaign's size. A head not here, or not a head, names
    none."""
    from clawstore.store.services.archive_listing import ActionEntries

    packed = entries if isinstance(entries, ActionEntries) else ActionEntries.of_dict(entries)
    keys, records = packed.keys_sorted, packed.records
    named = bytearray(len(packed))
    for head_id in heads:
        head = store.get_json(head_id) if is_oid(head_id) and store.has(head_id) else None
        if not isinstance(head, dict):
            continue
        for node in iter_nodes(head, store.get_json):
            key, record = (node.get("key"), node.get("record")) if isinstance(node, dict) else (None, None)
            if is_oid(key) and is_oid(record):
                at = keys.index(bytes.fromhex(key[len(PREFIX):]))
                if at >= 0 and records[at * 32:at * 32 + 32].hex() == record[len(PREFIX):]:
                    named[at] = 1
    return sorted({PREFIX + records[at * 32:at * 32 + 32].hex() for at in range(len(named)) if not named[at]})

