"""What a pull keeps from gc of a pusher's killed builds' results (remote/pull.py `keep`): the entries a push marked
`unadopted` (remote/push.py), whose records no head here names, by a ref `imports/pull-<id>` (store/kept.py), as the
pushing store's journals keep them there and an archive import keeps what it carries beyond its head. Apart from
kept.py: it reads this store's own journals (buildlogs.py), which the archive import's module may not reach."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawstore.store.buildlogs import unadopted_entries
from clawstore.store.core.ids import PREFIX
from clawstore.store.kept import beyond_heads, keep_imported

if TYPE_CHECKING:
    from clawstore.store.store import Store

HEAD_REFS = ("campaigns/", "pins/")


def keep_pulled(store: Store, marked: dict[str, str]) -> str | None:
    """Keep `marked` (key -> record: a pusher's killed builds' results, held here) from gc where no campaign head or
    pin here names their records; those this store's own killed builds' journals keep already (its own push pulled
    back) are left to them. The ref `imports/pull-<id>`, None when nothing is kept."""
    own = {PREFIX + key.hex(): PREFIX + record.hex() for key, record in unadopted_entries(store).items()}
    entries = {key: record for key, record in marked.items() if own.get(key) != record}
    if not entries:
        return None
    heads = sorted({target for prefix in HEAD_REFS for target in store.list_refs(prefix).values()})
    return keep_imported(store, "pull", beyond_heads(store, heads, entries))
