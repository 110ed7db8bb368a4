"""A batch may queue far more action-cache entries than a process may hold open files."""

from __future__ import annotations

import resource
from pathlib import Path

from clawstore.store import Store


def test_many_action_cache_entries_in_one_batch(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # (earlier tests' stores in the same worker keep no files open: tests/store/test_store_lifecycle.py)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(512, hard), hard))
    try:
        with Store(tmp_path / "store") as store:
            output = store.put_bytes(b"shared output")
            with store.batch():
                for index in range(1000):
                    store.put_action(f"blake3:{index:064x}", {"kind": "run", "outputs": {"x": output}, "n": index})
            assert store.get_json(store.get_action_record_id(f"blake3:{999:064x}"))["n"] == 999
            assert sum(1 for _ in store.iter_actions()) == 1000
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
