"""A batch may queue far more action-cache entries than a process may hold open files."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.packfile import ACTION_SIZE, decode_action, pack_path

SPARE_FDS = 256


def test_many_action_cache_entries_in_one_batch(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # 256 descriptors to spare above those open now (whatever earlier tests in this worker left open: a leak of theirs
    # made this fail under a fixed 512), far fewer than the batch's 1,000 entries
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(highest + 1 + SPARE_FDS, 512), hard), hard))
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


def test_each_entry_a_commit_sets_is_named_where_its_blob_is(tmp_path: Path) -> None:
    """The index names each action-cache entry by the pack and offset of its blob (a commit of many notes them all at
    once, by maps: each must get its own offset), as another process reads them back from the segment."""
    with Store(tmp_path / "store") as store:
        output = store.put_bytes(b"shared output")
        with store.batch():
            for index in range(300):
                store.put_action(f"blake3:{index:064x}", {"kind": "run", "outputs": {"x": output}, "n": index})
    with Store(tmp_path / "store") as again:
        runtime = again.runtime
        runtime.index.refresh()
        for index in range(300):
            entry = runtime.index.find_action(bytes.fromhex(f"{index:064x}"), look_again=False)
            assert entry is not None and entry.record is not None
            with open(pack_path(runtime.packs_dir, entry.pack), "rb") as fh:
                payload = os.pread(fh.fileno(), ACTION_SIZE, entry.offset)
            assert decode_action(payload) == (entry.record, entry.time_ns)
            assert again.get_json("blake3:" + entry.record.hex())["n"] == index
