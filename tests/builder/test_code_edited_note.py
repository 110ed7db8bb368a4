"""A test that failed because claw's own code was edited while it ran (an edit-and-restore in the tree under test:
every stamp written before it stops matching) is told so beside its failure (tests/support/edited.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.edited import edited_note, edited_since


def _package(root: Path) -> Path:
    package = root / "clawstore"
    for name in ("__init__.py", "builder/stamp.py", "README.md", "pricing.json", "notes.txt",
                 "__pycache__/stamp.cpython-311.pyc"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("x = 1\n")
        os.utime(package / name, ns=(10**18, 10**18))  # (written long before the test below started)
    return package


def test_the_files_a_stamp_vouches_for_written_since_the_start_are_named(tmp_path: Path) -> None:
    package = _package(tmp_path)
    started = time.time_ns()
    assert edited_since(package, started) == [] and edited_note(package, started) is None
    stamp = package / "builder" / "stamp.py"
    stamp.write_text(stamp.read_text())  # undone at once: the same bytes, a new mtime
    (package / "notes.txt").write_text("not code\n")
    (package / "__pycache__" / "stamp.cpython-311.pyc").write_bytes(b"compiled")
    (package / "pricing.json").write_text("{}")
    assert edited_since(package, started) == ["builder/stamp.py", "pricing.json"]
    note = edited_note(package, started)
    assert note is not None and "builder/stamp.py, pricing.json" in note and "code_digest" in note
