"""A store appears whole or not at all: creation SIGKILLed the moment its directory shows up."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from clawstore.store.layout import DIRS, read_format

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
