"""fsck maps blocks of `fsck.MAPPED` = 2 MiB or more on their own (heap.settle(MAPPED), session 62): a setting of the
whole process, so it is fsck's own. What runs after it in the same process (a test, an import, a gc --dry-run, which
settles nothing) has blocks from `heap.MMAP_THRESHOLD` up mapped again, as a build and a gc set them; before, a 1 MiB
block after an fsck came from the heap and stayed there when freed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import ctypes, sys
from clawstore.host import heap
from clawstore.store import Store
from clawstore.store.services.fsck import fsck


class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Mallinfo2


def mapped(size):  # is a block of this size mapped on its own (not from the heap)?
    before = libc.mallinfo2().hblks
    block = ctypes.create_string_buffer(size)
    return libc.mallinfo2().hblks - before == 1


store = Store(sys.argv[1])
with store.batch():
    store.put_json({"a": 1})
store.runtime.close_writer()
assert fsck(store).problems == []
print(mapped(heap.MMAP_THRESHOLD * 8), mapped(4 << 20))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_after_fsck_blocks_from_the_usual_threshold_are_mapped_again(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "store")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]  # (main: False True, a 1 MiB block from the heap)
