"""A tiny writer of format-1 stores (one file per object and per action-cache entry), for migration tests.

Format 1, as the previous release wrote it: `objects/<2 hex>/<62 hex>` holds an object's zstd frame,
`ac/<2 hex>/<64 hex of the key>` holds "<record id>\\n", refs/ as today, and CLAWSTORE says
{"format": 1}. `downgrade` turns a format-2 store into the format-1 store the old release would have
left with the same content.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.runtime import drop_runtime
from tests.support.storefiles import frame_bytes


def write_object(root: Path, hexdigest: str, frame: bytes) -> None:
    shard = root / "objects" / hexdigest[:2]
    shard.mkdir(parents=True, exist_ok=True)
    path = shard / hexdigest[2:]
    path.write_bytes(frame)
    path.chmod(0o444)


def write_action(root: Path, key_hex: str, record_id: str) -> None:
    shard = root / "ac" / key_hex[:2]
    shard.mkdir(parents=True, exist_ok=True)
    (shard / key_hex).write_text(record_id + "\n")


def downgrade(store: Store) -> dict[str, int]:
    """Rewrite `store` in format 1 with the same objects, action-cache entries and refs."""
    root = store.root
    frames = {oid[len("blake3:"):]: frame_bytes(store, oid) for oid in store.iter_objects()}
    actions = dict(store.iter_actions())
    drop_runtime(root)
    for hexdigest, frame in frames.items():
        write_object(root, hexdigest, frame)
    for key, record_id in actions.items():
        write_action(root, key[len("blake3:"):], str(record_id))
    for name in ("packs", "index"):
        shutil.rmtree(root / name)
    (root / "CLAWSTORE").write_text('{"format": 1}\n')
    os.sync()
    return {"objects": len(frames), "actions": len(actions)}
