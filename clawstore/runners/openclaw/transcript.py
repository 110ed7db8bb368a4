"""Was an OpenClaw agent's model still answering it? Read from OpenClaw's own session transcript.

An agent cut off by the run's timeout while its model was answering is the agent's outcome, kept; with no answer, or
with its last request refused (a provider down since), it is a fault, retried (runner.py AGENT_TIMEOUT). The
transcript says which: each entry a JSON object, the last assistant message the model was asked for (past one
`aborted`: in flight at the timeout, and OpenClaw's own notices, provider `openclaw`) answered unless its `stopReason`
is `error`. Releases
keep it two ways: JSONL files (`state/agents/*/sessions/*.jsonl`, before 2026.9) or, as 2026.9.6 does, rows of the
agent's SQLite database (`state/agents/*/agent/openclaw-agent.sqlite`, table `transcript_events`: `event_json`, or
`event_zstd` when compressed; the rows of a container removed at the deadline are still in its `-wal` file). Each
message the model answered carries its request's `usage`: summed (Answers), they are what the run spent at least (read
for every run a turn of which left no result: its timeout, a crash, the engine's kill, a flood of output).

The agent owns the mounted state directory: a database reached through a link, or bigger than
MAX_TRANSCRIPT_DATABASE_BYTES, is not read (the run then counts as unanswered: a fault, retried), and it is read from
a copy in a private directory, never where the agent left it; only from a table of stored columns (a view or a computed
column would run the agent's SQL: rows without end, values of any size), no value over MAX_SESSION_FILE_BYTES, and its
compressed rows to MAX_TRANSCRIPT_TEXT_BYTES unpacked in all.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zstandard

from clawstore.host.run_limits import (
    MAX_SESSION_FILE_BYTES,
    MAX_TRANSCRIPT_DATABASE_BYTES,
    MAX_TRANSCRIPT_TEXT_BYTES,
    size_text,
)
from clawstore.host.scratch import OwnedScratch
from clawstore.values import jsontext
from clawstore.values.bounds import MAX_REPLY_TOKENS

# How OpenClaw ends an assistant message the model did not answer: a failed request, or one its timeout cut off.
_REFUSED, _CUT_OFF = "error", "aborted"
# The provider OpenClaw names in assistant messages it writes itself, asking no model (a delivery mirror, a gateway's
# injected notice such as "Agent failed before reply"); claw's openclaw.json names its one provider otherwise.
_OPENCLAW_ITSELF = "openclaw"
DATABASE_GLOB = "agents/*/agent/openclaw-agent.sqlite"
_WAL = "-wal"
USAGE_COUNTS = ("input", "output", "cacheRead", "cacheWrite")  # an answered message's `usage` counts (pi-ai's names)
# A refused request's `errorMessage` saying HTTP 402: pi-ai keeps the OpenAI SDK's error, "402 <the provider's message>"
# (and Python's urllib words one "HTTP Error 402: <reason>"); what follows is the provider's.
_PAYMENT_REQUIRED = re.compile(r"(?:HTTP(?: Error)? )?402(?::|\s|$)\s*(.*)", re.DOTALL)
REFUSAL_CHARS = 300  # of a refused request's errorMessage kept (the agent writes it: bounded)


@dataclass
class Answers:
    """What a transcript says of the model's requests: was the last one answered (`last_answered`), how many
    were, and the tokens their messages count (OpenClaw's `usage`; a message that counts none adds nothing): what a
    run cut off by its timeout spent at least."""

    last_answered: bool = False
    # The last request's errorMessage when it was refused (None: answered, or none); merged, a part's (a 402's first)
    refused: str | None = None
    requests: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_COUNTS, 0))

    def add(self, usage: Any) -> None:
        self.requests += 1
        usage = usage if isinstance(usage, dict) else {}
        for name in USAGE_COUNTS:
            value = usage.get(name)
            # (The agent owns these rows: a count is a plain int within a reply's bounds, or nothing.)
            if type(value) is int and 0 < value <= MAX_REPLY_TOKENS:
                self.tokens[name] += value

    def __iadd__(self, other: Answers) -> Answers:
        """Merge another part of the run (a session file, a database): they come in no order one can trust, so the
        model was answering if any part's last request was answered (what a timeout keeps: runner.py), and a part's
        last request refused with a 402 stays (out of credit whatever the other parts say: the endpoint is stopped)."""
        self.last_answered = self.last_answered or other.last_answered
        refusals = [words for words in (self.refused, other.refused) if words is not None]
        self.refused = next((words for words in refusals if _payment_required(words) is not None),
                            refusals[0] if refusals else None)
        self.requests += other.requests
        for name in USAGE_COUNTS:
            self.tokens[name] += other.tokens[name]
        return self


def answers(entries: Iterable[str]) -> Answers:
    """What these transcript entries (in order) say of the model's requests (Answers: was the last one answered, what
    the answered ones counted). Passed over: an entry not JSON (a line cut off by the container's removal), not an
    assistant message, cut off by the timeout, OpenClaw's own."""
    found = Answers()
    for entry in entries:
        if '"assistant"' not in entry:
            continue
        try:
            value = jsontext.loads(entry)
        except ValueError:
            continue
        message = value.get("message") if isinstance(value, dict) and value.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "assistant" and message.get("stopReason") != _CUT_OFF \
                and message.get("provider") != _OPENCLAW_ITSELF:
            found.last_answered = message.get("stopReason") != _REFUSED
            words = message.get("errorMessage")
            found.refused = None if found.last_answered else (words if isinstance(words, str) else "")[:REFUSAL_CHARS]
            if found.last_answered:
                found.add(message.get("usage"))
    return found


def out_of_credit(found: Answers) -> str | None:
    """The provider's words when the model's last request (of any part of the run: `Answers.__iadd__`) was refused
    with HTTP 402 (out of credit: no `Retry-After` reaches the transcript, so a 402 there is taken as final), else
    None."""
    return None if found.refused is None else _payment_required(found.refused)


def _payment_required(words: str) -> str | None:
    match = _PAYMENT_REQUIRED.match(words.strip())
    return None if match is None else " ".join(match.group(1).split()) or "HTTP 402"


def jsonl_answers(text: str) -> Answers:
    """A JSONL transcript (one entry a line)."""
    return answers(text.splitlines())


def unsafe(path: Path, root: Path, max_bytes: int | None = None) -> str | None:
    """Why a file under the agent's mounted `root` is not read: reached through a link, not a regular file, bigger
    than `max_bytes` (MAX_TRANSCRIPT_DATABASE_BYTES unless told)."""
    max_bytes = MAX_TRANSCRIPT_DATABASE_BYTES if max_bytes is None else max_bytes
    try:
        linked = path.resolve() != root.resolve() / path.relative_to(root)
    except (OSError, RuntimeError):  # a link to itself or in a loop (RuntimeError: Python 3.11's resolve)
        linked = True
    if linked:
        return "reached through a link"
    if path.is_symlink() or not path.is_file() or path.stat().st_size > max_bytes:
        return f"not a regular file of at most {size_text(max_bytes)}"
    return None


def database_answers(database: Path, root: Path) -> tuple[Answers, str | None]:
    """(what it says of the model's requests, why it was not read) of one agent database under `root`, read from a
    private copy."""
    wal = database.with_name(database.name + _WAL)
    why = unsafe(database, root) or (unsafe(wal, root) if wal.exists() or wal.is_symlink() else None)
    if why is not None:
        return Answers(), why
    private_scratch = OwnedScratch("claw-transcript-")  # (up to a GiB: a SIGKILL's is swept, host/scratch.py)
    private = Path(private_scratch.path)
    try:
        copy = private / database.name
        shutil.copyfile(database, copy, follow_symlinks=False)
        if wal.exists():
            shutil.copyfile(wal, private / wal.name, follow_symlinks=False)
        # (Its schema is OpenClaw's, CHECKs calling json_valid(): `trusted_schema = OFF` refuses it. This connection
        # has no function of ours and no extension loading, so a crafted schema reaches SQLite's built-ins alone.)
        with closing(sqlite3.connect(copy)) as connection:
            # (No value longer than a session file: one row is parsed whole, as a JSONL file is.)
            connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_SESSION_FILE_BYTES)
            _plain_table(connection)
            return answers(_events(connection)), None
    except (sqlite3.Error, zstandard.ZstdError, OSError, ValueError) as exc:
        return Answers(), f"unreadable: {type(exc).__name__}: {exc}"
    finally:
        private_scratch.remove()


def _plain_table(connection: sqlite3.Connection) -> None:
    """`transcript_events` as OpenClaw makes it, a table of stored columns: a view, a virtual table or a computed
    column would run the agent's SQL as it is read (rows without end, values of any size)."""
    kind = connection.execute("SELECT type, sql FROM sqlite_master WHERE lower(name) = 'transcript_events'").fetchone()
    if kind is None or kind[0] != "table" or str(kind[1]).upper().startswith("CREATE VIRTUAL") \
            or any(column[6] for column in connection.execute("PRAGMA table_xinfo(transcript_events)")):
        raise ValueError("transcript_events is not a table of stored columns")


def _events(connection: sqlite3.Connection) -> Iterator[str]:
    decompress = zstandard.ZstdDecompressor()
    rows = connection.execute("SELECT event_json, event_zstd FROM transcript_events ORDER BY created_at, seq")
    unpacked = 0
    for text, packed in rows:
        if isinstance(text, str):
            yield text
        elif isinstance(packed, bytes):
            raw = decompress.decompress(packed, max_output_size=MAX_SESSION_FILE_BYTES)
            unpacked += len(raw)
            if unpacked > MAX_TRANSCRIPT_TEXT_BYTES:
                raise ValueError(f"its rows unpacked pass {size_text(MAX_TRANSCRIPT_TEXT_BYTES)}")
            yield raw.decode("utf-8", "replace")
