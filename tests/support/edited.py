"""Claw's own code edited while a test ran: every stamp written before the edit stops matching (builder/stamp.py
`code_digest`), so a test that expects a stamp to answer fails, through no fault of its own. tests/conftest.py says
so beside such a failure."""

from __future__ import annotations

from pathlib import Path

from clawstore.builder.stamp import code_files


def edited_since(package: Path, since_ns: int) -> list[str]:
    """The files of `package` a stamp vouches for that were written at or after `since_ns` (time.time_ns())."""
    return [str(path.relative_to(package)) for path in code_files(package) if path.stat().st_mtime_ns >= since_ns]


def edited_note(package: Path, since_ns: int) -> str | None:
    """What to say beside a test that failed after `since_ns`, when the code under test was edited meanwhile."""
    edited = edited_since(package, since_ns)
    if not edited:
        return None
    shown = ", ".join(edited[:5]) + (f" and {len(edited) - 5} more" if len(edited) > 5 else "")
    return (f"{package} was edited while this test ran ({shown}): a stamp written before the edit no longer "
            "matches (builder/stamp.py code_digest), so an assert that a stamp answered fails. Run the tests of a "
            "tree nobody edits meanwhile (break-and-restore checks in a worktree of their own).")
