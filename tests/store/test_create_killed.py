"""A store appears whole or not at all: creation SIGKILLed the moment its directory shows up."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from clawstore.store.core.layout import DIRS, read_format

_CREATE = "import sys; from clawstore.store import Store; Store(sys.argv[1], create=True)"


def _kill_when_it_appears(root: Path) -> bool:
    """Start a creator, SIGKILL it as soon as `root` exists; True if the kill came before it exited."""
    proc = subprocess.Popen([sys.executable, "-c", _CREATE, str(root)])
    deadline = time.monotonic() + 60
    while not root.exists() and proc.poll() is None and time.monotonic() < deadline:
        pass  # spin: the window between the directory appearing and its marker is a few fsyncs wide
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return proc.returncode == -signal.SIGKILL


def test_a_killed_creation_leaves_no_half_made_store(tmp_path: Path) -> None:
    killed = 0
    for attempt in range(8):
        root = tmp_path / f"ws{attempt}" / "store"
        killed += _kill_when_it_appears(root)
        if root.exists():  # a directory named like the store is a whole store
            assert read_format(root) == 2, f"attempt {attempt}: {sorted(p.name for p in root.iterdir())}"
            assert all((root / name).is_dir() for name in DIRS)
        # and the next claw finishes the job
        subprocess.run([sys.executable, "-c", _CREATE, str(root)], check=True)
        assert read_format(root) == 2
        assert not [p.name for p in root.parent.iterdir() if p.name != "store"], "staging left behind"
    assert killed >= 4, "the creator finished before it could be killed every time"


def test_an_empty_directory_is_made_a_store_in_place(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    subprocess.run([sys.executable, "-c", _CREATE, str(root)], check=True)
    assert read_format(root) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


_FIRST_WRITE = """
import os, signal, sys
from clawstore.store import Store
from clawstore.store.core.runtime import Runtime
publish = Runtime.publish
def killed_before_naming(runtime, segment):  # the blobs are durable, their segment not written
    if segment.objects:
        os.kill(os.getpid(), signal.SIGKILL)
    publish(runtime, segment)
Runtime.publish = killed_before_naming
store = Store(sys.argv[1], create=True)
store.put_json({"answer": 42})
store.runtime.close_writer()
"""


def test_the_first_write_into_a_store_killed_before_its_segment_leaves_fsck_clean(tmp_path: Path) -> None:
    """An empty index beside a pack holding blobs is what a lost index looks like (fsck: damaged); a
    first write killed at its worst instant (its pack durable, the segment naming it not written)
    must leave an unnamed pack (gc's to remove), not that."""
    from clawstore.store import Store
    from clawstore.store.services.fsck import fsck

    root = tmp_path / "store"
    killed = subprocess.run([sys.executable, "-c", _FIRST_WRITE, str(root)], capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list((root / "packs").glob("*.pack"))  # the pack is there, named by nobody
    report = fsck(Store(root))
    assert report.clean, report.problems
