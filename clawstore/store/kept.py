"""Refs `imports/<what>-<id>`: what an import brought that no head names yet, kept from gc until the user deletes the
ref (`claw refs --delete`), as a pin. `claw import-pae` (pae/importer.py) and `claw archive import` (the results an
archive carries beyond its head: builder/campaign_archive.py beyond_head_records) each set one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from clawstore.store.core.ids import PREFIX

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
