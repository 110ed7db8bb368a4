"""Reading whether an OpenClaw agent's model answered from the session transcript it left (runners/openclaw/
transcript.py): JSONL lines (older releases) or rows of the agent's SQLite database (2026.9.6), the agent's own files,
read from a private copy and never through a link."""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
import zstandard

from clawstore.runners.openclaw.transcript import database_answers, jsonl_answers


def jsonl_answered(text: str) -> bool:
    return jsonl_answers(text).last_answered


def database_answered(database: Path, root: Path) -> tuple[bool, str | None]:
    found, why = database_answers(database, root)
    return found.last_answered, why

ANSWERED = {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "toolUse"}}
FAILED = {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "error",
                                         "errorMessage": "503 provider down"}}
CUT_OFF = {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "aborted"}}
USER = {"type": "message", "message": {"role": "user", "content": "Create report.md"}}


def test_jsonl_an_answer_counts_an_error_or_an_aborted_request_or_a_cut_line_does_not() -> None:
    lines = [json.dumps(e) for e in (USER, FAILED, CUT_OFF)]
    assert not jsonl_answered("\n".join(lines))
    assert not jsonl_answered("\n".join([*lines, json.dumps(ANSWERED)[:40]]))  # cut off by the container's removal
    assert jsonl_answered("\n".join([*lines, json.dumps(ANSWERED)]))


def _database(root: Path, *entries: dict, packed: bool = False, checkpoint: bool = True) -> Path:
    path = root / "state" / "agents" / "a" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    # (OpenClaw's CHECKs call json_valid(): a reader with `trusted_schema = OFF` cannot read its rows)
    db.execute("CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT, "
               "created_at INTEGER NOT NULL, event_zstd BLOB, PRIMARY KEY (session_id, seq), "
               "CHECK (event_json IS NULL OR json_valid(event_json))) STRICT")
    for seq, entry in enumerate(entries):
        text = json.dumps(entry)
        blob = zstandard.ZstdCompressor().compress(text.encode()) if packed else None
        db.execute("INSERT INTO transcript_events VALUES ('s', ?, ?, 0, ?)", (seq, None if packed else text, blob))
    if checkpoint:
        db.close()
    else:  # as a container removed at the deadline leaves it: the rows in the -wal file alone (open: no checkpoint)
        _open.append(db)
    return path


_open: list[sqlite3.Connection] = []  # (closed by the test once it has read the files)


def test_a_database_row_answered_counts_plain_compressed_or_only_in_the_wal(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    assert database_answered(_database(root, USER, FAILED, ANSWERED), root) == (True, None)
    root = tmp_path / "failed"
    assert database_answered(_database(root, USER, FAILED, CUT_OFF), root) == (False, None)
    root = tmp_path / "packed"
    assert database_answered(_database(root, USER, ANSWERED, packed=True), root) == (True, None)
    root = tmp_path / "wal"
    path = _database(root, USER, ANSWERED, checkpoint=False)
    assert path.with_name(path.name + "-wal").stat().st_size > 0
    assert database_answered(path, root) == (True, None)
    assert path.with_name(path.name + "-wal").stat().st_size > 0  # read from a copy: the agent's files as they were
    while _open:
        _open.pop().close()  # (its three files stayed open in the worker until it ended)


def test_a_database_through_a_link_or_not_a_database_is_not_read(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    real = _database(elsewhere, ANSWERED)
    root = tmp_path / "run"
    (root / "state" / "agents").mkdir(parents=True)
    (root / "state" / "agents" / "a").symlink_to(real.parent.parent)  # a linked directory names a host one
    linked = root / "state" / "agents" / "a" / "agent" / real.name
    assert database_answered(linked, root) == (False, "reached through a link")
    junk = tmp_path / "junk"
    path = junk / "state" / "agents" / "a" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a database" * 100)
    answered, why = database_answered(path, junk)
    assert not answered and why is not None and why.startswith("unreadable: DatabaseError"), why


def test_a_database_over_the_limit_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.runners.openclaw import transcript

    path = _database(tmp_path, ANSWERED)
    monkeypatch.setattr(transcript, "MAX_TRANSCRIPT_DATABASE_BYTES", path.stat().st_size - 1)
    answered, why = database_answered(path, tmp_path)
    assert not answered and why is not None and why.startswith("not a regular file of at most"), why


def _crafted(root: Path, *schema: str) -> Path:
    """A database the agent wrote itself: `transcript_events` made by `schema`."""
    path = root / "state" / "agents" / "a" / "agent" / "openclaw-agent.sqlite"
    path.parent.mkdir(parents=True)
    with closing(sqlite3.connect(path)) as db:
        for statement in schema:
            db.execute(statement)
        db.commit()
    return path


@pytest.mark.parametrize("schema", [
    # rows without end: reading them never ended (and their sort filled the temporary directory)
    ("CREATE VIEW transcript_events AS WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
     "SELECT 'x' AS event_json, NULL AS event_zstd, x AS created_at, x AS seq FROM n",),
    # a column computed as each row is read, 900 MB each: claw held 6 GB and still read
    ("CREATE TABLE transcript_events (seq INTEGER, event_json TEXT, event_zstd BLOB, "
     "created_at BLOB AS (zeroblob(900000000)))",
     "INSERT INTO transcript_events (seq, event_json) VALUES (1, 'x'), (2, 'x'), (3, 'x')"),
    # a module's rows, whatever the build of SQLite at hand makes of them (here rtree's, harmless; unread all the same)
    ("CREATE VIRTUAL TABLE transcript_events USING rtree(seq, created_at, x, event_json, event_zstd)",
     "INSERT INTO transcript_events VALUES (1, 1, 2, 3, 4)"),
], ids=["endless view", "computed column", "virtual table"])
def test_a_transcript_events_that_is_no_plain_table_is_not_read(tmp_path: Path, schema: tuple[str, ...]) -> None:
    path = _crafted(tmp_path, *schema)
    started = time.monotonic()
    answered, why = database_answered(path, tmp_path)
    assert not answered and why is not None and "transcript_events" in why, why
    assert time.monotonic() - started < 5


def test_an_event_bigger_than_a_session_file_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One row may be as big as the database (512 MiB), parsed whole; a session file's limit bounds it as for JSONL."""
    from clawstore.runners.openclaw import transcript

    path = _database(tmp_path, ANSWERED)
    monkeypatch.setattr(transcript, "MAX_SESSION_FILE_BYTES", len(json.dumps(ANSWERED)) - 1)
    answered, why = database_answered(path, tmp_path)
    assert not answered and why is not None and "too big" in why, why


def test_compressed_rows_are_read_to_a_total_not_without_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 KB row may unpack to 64 MiB: a 512 MiB database of them was ~260,000 rows, 7.5 hours of claw's CPU (100 ms
    a row at load 10). Unpacked text past MAX_TRANSCRIPT_TEXT_BYTES in all is not read on."""
    from clawstore.runners.openclaw import transcript

    path = _database(tmp_path, USER, ANSWERED, USER, packed=True)
    first_two = sum(len(json.dumps(e).encode()) for e in (USER, ANSWERED))
    monkeypatch.setattr(transcript, "MAX_TRANSCRIPT_TEXT_BYTES", first_two)
    answered, why = database_answered(path, tmp_path)
    assert not answered and why is not None and "unpacked" in why, why
    monkeypatch.setattr(transcript, "MAX_TRANSCRIPT_TEXT_BYTES", first_two + len(json.dumps(USER).encode()))
    assert database_answered(path, tmp_path) == (True, None)


def test_a_table_of_another_shape_is_unreadable_and_says_which_column(tmp_path: Path) -> None:
    """A release that renames created_at: its rows are not guessed at; the run counts as unanswered (a fault, retried)
    and session_database_skipped says why."""
    path = _crafted(tmp_path, "CREATE TABLE transcript_events (seq INTEGER, event_json TEXT, event_zstd BLOB)",
                    f"INSERT INTO transcript_events VALUES (1, '{json.dumps(ANSWERED)}', NULL)")
    assert database_answered(path, tmp_path) == (False, "unreadable: OperationalError: no such column: created_at")


def _with_usage(usage: object, stop: str = "toolUse") -> dict:
    return {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": stop, "usage": usage}}


def test_the_answered_rows_usage_is_summed_a_count_the_agent_could_have_forged_is_not(tmp_path: Path) -> None:
    """What a run its timeout ended spent at least: the usage of the requests answered (OpenClaw's shape, pi-ai's
    names); an error row, a row without usage, a count that is no plain int within a reply's bounds add no tokens."""
    from clawstore.runners.openclaw.transcript import database_answers
    from clawstore.values.bounds import MAX_REPLY_TOKENS

    rows = [USER, _with_usage({"input": 10, "output": 2, "cacheRead": 5, "cacheWrite": 1, "totalTokens": 18,
                               "cost": {"total": 1e9}}),
            _with_usage({"input": 7, "output": 3}, stop="error"),  # no answer came: not a request answered
            ANSWERED,  # answered, its usage not written: a request, no tokens
            _with_usage({"input": True, "output": 2.5, "cacheRead": -4, "cacheWrite": MAX_REPLY_TOKENS + 1}),
            _with_usage({"input": "9", "output": 1}),
            _with_usage({"input": 50, "output": 50}, stop="aborted"),  # cut off by the timeout: passed over
            {"type": "message", "message": {**_with_usage({"input": 60, "output": 60})["message"],
                                            "provider": "openclaw"}},  # OpenClaw's own notice: passed over
            {"type": "custom", "message": _with_usage({"input": 70, "output": 70})["message"]},  # no message entry
            ANSWERED]
    root = tmp_path / "db"
    found, why = database_answers(_database(root, *rows, packed=True), root)
    assert why is None and found.requests == 5 and found.last_answered
    assert found.tokens == {"input": 10, "output": 3, "cacheRead": 5, "cacheWrite": 1}


def _refused(words: str) -> dict[str, object]:
    return {"type": "message", "message": {"role": "assistant", "content": [], "stopReason": "error",
                                           "errorMessage": words}}


@pytest.mark.parametrize(("words", "said"), [
    ("402 Insufficient credits. Add more using https://openrouter.ai/settings/credits",
     "Insufficient credits. Add more using https://openrouter.ai/settings/credits"),
    ("HTTP Error 402: Payment Required", "Payment Required"),
    ("402 status code (no body)", "status code (no body)"),
    ("503 provider down", None), ("429 Rate limit: retry in 402 ms", None), ("4020 tokens over", None)])
def test_the_last_request_refused_with_a_402_is_out_of_credit(words: str, said: str | None) -> None:
    """An agent out of credit: its model's last request refused with HTTP 402, as pi-ai keeps the OpenAI SDK's error
    (`errorMessage: "402 <the provider's message>"`): the provider's words; any other refusal, or a 402 answered since
    (its last request answered), is none."""
    from clawstore.runners.openclaw.transcript import out_of_credit

    lines = [json.dumps(e) for e in (USER, ANSWERED, _refused(words))]
    assert out_of_credit(jsonl_answers("\n".join(lines))) == said
    assert out_of_credit(jsonl_answers("\n".join([*lines, json.dumps(ANSWERED)]))) is None


OUT_OF_CREDIT_WORDS = "402 Insufficient credits. Add more using https://openrouter.ai/settings/credits"


@pytest.mark.parametrize("refused_first", [True, False], ids=["refused_part_first", "answered_part_first"])
def test_a_402_ending_any_part_of_a_run_stays_out_of_credit_when_the_parts_are_merged(refused_first: bool) -> None:
    """A run's transcripts (its session files, or its databases: runner.py `model_answers`) are parts in no order one
    can trust: one part ending in a 402 says the endpoint refused the agent's key though another part's last request
    was answered. Merged, the run is out of credit (the endpoint is stopped) and its model was answering (what a
    timeout keeps). Before: the answered part cleared the 402, in either order, and the endpoint was asked again."""
    from clawstore.runners.openclaw.transcript import Answers, out_of_credit

    refused = jsonl_answers("\n".join(json.dumps(e) for e in (USER, ANSWERED, _refused(OUT_OF_CREDIT_WORDS))))
    answered = jsonl_answers("\n".join(json.dumps(e) for e in (USER, ANSWERED, ANSWERED)))
    merged = Answers()
    for part in ((refused, answered) if refused_first else (answered, refused)):
        merged += part
    assert out_of_credit(merged) == "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
    assert merged.last_answered and merged.requests == 3


@pytest.mark.parametrize("refused_first", [True, False], ids=["402_first", "503_first"])
def test_a_402_ending_one_part_is_not_hidden_by_another_refusal_ending_another(refused_first: bool) -> None:
    from clawstore.runners.openclaw.transcript import Answers, out_of_credit

    parts = [jsonl_answers(json.dumps(_refused(OUT_OF_CREDIT_WORDS))), jsonl_answers(json.dumps(FAILED))]
    merged = Answers()
    for part in (parts if refused_first else parts[::-1]):
        merged += part
    assert out_of_credit(merged) == "Insufficient credits. Add more using https://openrouter.ai/settings/credits"
    assert not merged.last_answered
