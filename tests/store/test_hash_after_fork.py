"""A big input hashed in a process forked after its parent hashed one on all cores (fsck's helpers fork after the
parent hashed its packs): blake3's pool is not copied by fork, and a hash handed to it there waited forever."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from clawstore.store.core.ids import PREFIX, file_digest, oid_of


def test_a_forked_child_hashes_big_inputs_after_its_parent_did(tmp_path: Path) -> None:
    data = bytes(range(256)) * (8 << 12)  # 8 MiB: hashed on all cores
    path = tmp_path / "big"
    path.write_bytes(data)
    expected = oid_of(data)  # (the parent's pool started)
    assert file_digest(path) == expected[len(PREFIX):]
    pid = os.fork()
    if pid == 0:  # (the child: its answer is its exit code)
        try:
            os._exit(0 if oid_of(data) == expected and file_digest(path) == expected[len(PREFIX):] else 3)
        finally:
            os._exit(4)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid, "the child's hash never ended"
    assert os.waitstatus_to_exitcode(done[1]) == 0
