"""A remote's listings forged by someone who can write to it (and sign with a key the puller trusts)."""

from __future__ import annotations

from pathlib import Path

from clawstore.remote import listing
from clawstore.store.core.ids import PREFIX
from clawstore.store.face import pack_table


def swap_two_entries(remote: Path) -> list[str]:
    """Swap the records of the first two entries of each listing under `remote` holding entries and sign it again; the
    keys swapped (two a listing)."""
    swapped = []
    for path in sorted(remote.rglob("*.ids")):
        doc = listing.decode(path.read_bytes(), path.name[:-4])
        actions = {bytes.fromhex(k[len(PREFIX):]): bytes.fromhex(v[len(PREFIX):]) for k, v in doc.actions.items()}
        if len(actions) < 2:
            continue
        first, second = sorted(actions)[:2]
        actions[first], actions[second] = actions[second], actions[first]
        path.write_bytes(listing.encode(doc.pack, doc.size, pack_table(path.with_suffix(".pack")), doc.count,
                                        listing.entries(actions), doc.document))
        swapped += [PREFIX + first.hex(), PREFIX + second.hex()]
    return swapped
