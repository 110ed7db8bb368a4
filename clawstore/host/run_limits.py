"""What one run may make claw hold, and what a tree from outside may be (container output, a run's final workspace or
sandbox, an agent's template): bounded so that a model or a suite cannot exhaust the machine. The limits:
docs/runners.md (Details by module)."""

from __future__ import annotations

import os
from pathlib import Path

MAX_OUTPUT_BYTES = 16 << 20  # per stream (stdout, stderr) of one container run
MAX_WORKSPACE_BYTES = 1 << 30  # all files a run leaves (workspace, sandbox) together
MAX_WORKSPACE_FILES = 100_000  # files, directories and links a run leaves
MAX_WORKSPACE_DEPTH = 256  # directories one inside the other
MAX_PATH_BYTES = 2048  # a path inside the workspace: well below the system's limit once placed somewhere
MAX_SESSION_FILE_BYTES = 64 << 20  # one of OpenClaw's session transcripts, read whole to be redacted
# An agent's SQLite transcript (2026.9.6), with its -wal file each: copied, then read a row at a time, only for a run
# its timeout ended. A looping agent's grows ~20 KB a request (15 MB after 717 requests with the stand-in).
MAX_TRANSCRIPT_DATABASE_BYTES = 512 << 20
# Its rows' text unpacked in all (a 2 KB zstd row may unpack to 64 MiB: 512 MiB of them took hours to read).
MAX_TRANSCRIPT_TEXT_BYTES = 4 << 30


def size_text(count: int) -> str:
    return f"{count >> 20} MiB" if count < (1 << 30) else f"{count >> 30} GiB"


def workspace_problem(directory: Path, max_bytes: int | None = None, max_entries: int | None = None) -> str | None:
    """Why the files a run left are too big to keep (the MAX_WORKSPACE_* limits), or None. Stops at
    the first limit passed: millions of files, or a nesting without end, cost no more than the limit."""
    max_bytes = MAX_WORKSPACE_BYTES if max_bytes is None else max_bytes
    max_entries = MAX_WORKSPACE_FILES if max_entries is None else max_entries
    total, entries = 0, 0
    pending = [(str(directory), 0, 0)]  # a directory, how deep it is, the length of its relative path
    while pending:
        path, depth, length = pending.pop()
        try:
            listing = os.scandir(path)
        except OSError:
            continue
        with listing:
            for entry in listing:
                entries += 1
                if entries > max_entries:
                    return f"it holds more than {max_entries:,} files and directories"
                name_length = length + len(os.fsencode(entry.name)) + 1
                if name_length > MAX_PATH_BYTES:
                    return f"it holds a path longer than {MAX_PATH_BYTES:,} bytes"
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_WORKSPACE_DEPTH:
                        return f"it nests directories more than {MAX_WORKSPACE_DEPTH} deep"
                    pending.append((entry.path, depth + 1, name_length))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
                    if total > max_bytes:
                        return f"its files hold more than {size_text(max_bytes)}"
    return None
