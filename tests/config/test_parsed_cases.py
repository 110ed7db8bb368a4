"""Case files parsed before, by their bytes (config/parsed.py, builder/parsed_cases.py): a build that plans keeps
what it parsed in its store; `status`, `explain`, `build --dry-run` and `plan` of the campaign after it take each
unchanged case's mapping from there instead of parsing its YAML again, and answer exactly as parsing does. An edited
file is parsed (its bytes are new), as is every file when the cache is another claw's or damaged; the read commands
never write it.

Real in-process `claw` commands on a workspace built against the stand-in provider, its provider's URL moved after the
build (every node stale: no stamp answers, every command loads the campaign).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import pytest

from clawstore.builder import parsed_cases, stamp
from clawstore.config import yamlio
from clawstore.config.parsed import ParsedCases
from clawstore.testing.standin import StandIn, text
from tests.support.claw import Claw
from tests.support.judging import JUDGE, eval_profile, judge_reply
from tests.support.workspace import Workspace

CAMPAIGN = ("--suite", "main", "--run-profile", "rp", "--evaluation-profile", "ev")
COMMANDS = [("status",), ("explain",), ("build", "--dry-run"), ("plan",)]


@pytest.fixture
def built(ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Path:
    """Eight cases × two models, judged once, built; the provider's URL moved since. The store's cache file."""
    for index in range(6):
        ws.case(f"c{index:02d}", f"Question {index}: " + "word " * (index + 1))
    ws.run_profile(repetitions=1, concurrency=4)
    eval_profile(ws, repetitions=1)
    for model in ("m1", "m2"):
        standin.script(f"vendor/{model}", *[text("answer " * (n % 5 + 1)) for n in range(20)])
    standin.script(JUDGE, *[judge_reply(float(n % 9)) for n in range(40)])
    code, _, err = claw.build(*CAMPAIGN[4:], "--output", "json")
    assert code == 0, err
    monkeypatch.setenv("OPENROUTER_BASE_URL", f"{standin.url}/moved/v1")
    return parsed_cases.path_of(Path(env["CLAW_STORE"]))


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The first line of each YAML text parsed (a case's is `schema_version: 1`, then its case_id on the next)."""
    found: list[str] = []
    parse = yamlio.parse_yaml_text

    def counted(text: str) -> Any:
        found.append(text)
        return parse(text)

    monkeypatch.setattr(yamlio, "parse_yaml_text", counted)
    yield found


def _case_parses(found: list[str]) -> int:
    return sum("case_id:" in text for text in found)


def _answers(claw: Claw, store: Path) -> list[tuple[int, str, str]]:
    answers = []
    for command in COMMANDS:
        for output in ("text", "json"):
            answers.append(claw(*command, *CAMPAIGN, "--output", output))
    return answers


def _parsing_every_case(claw: Claw, store: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, str]]:
    with monkeypatch.context() as patched:
        patched.setattr(parsed_cases, "read", lambda store_root: ParsedCases())
        return _answers(claw, store)


def test_read_commands_take_unchanged_cases_from_the_build_and_answer_as_parsing_does(
        built: Path, claw: Claw, env: dict[str, str], parses: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    assert built.is_file()  # (the build kept what it parsed)
    written = built.read_bytes(), built.stat().st_mtime_ns
    parses.clear()
    answers = _answers(claw, store)
    assert _case_parses(parses) == 0 and parses, parses  # (the suite and the profiles are parsed as before)
    assert all(code == 0 for code, _, _ in answers), answers
    assert (built.read_bytes(), built.stat().st_mtime_ns) == written  # (read commands never write it)
    parses.clear()
    assert _parsing_every_case(claw, store, monkeypatch) == answers
    assert _case_parses(parses) == 8 * len(answers)


def test_an_edited_case_is_parsed_and_answered_as_edited(
        built: Path, ws: Workspace, claw: Claw, env: dict[str, str], parses: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    path = ws.configs / "cases" / "c03" / "test.yaml"
    before = path.stat()
    path.write_text(path.read_text().replace("Question 3:", "Question 9:"))  # (the same size, its times put back)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    parses.clear()
    answers = _answers(claw, store)
    assert _case_parses(parses) == len(answers)  # (c03 alone, each command)
    assert _parsing_every_case(claw, store, monkeypatch) == answers
    code, out, _ = claw("explain", *CAMPAIGN, "--output", "json")
    assert code == 0 and "input.messages[1].content 'Question 3: word word word word ' -> 'Question 9:" in out


@pytest.mark.parametrize("why", ["another claw", "damaged", "not there"])
def test_a_cache_of_another_claw_damaged_or_missing_is_not_read(
        why: str, built: Path, claw: Claw, env: dict[str, str], parses: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = Path(env["CLAW_STORE"])
    expected = _parsing_every_case(claw, store, monkeypatch)
    if why == "another claw":
        code_now = stamp.code_digest()
        monkeypatch.setattr(stamp, "code_digest", lambda: "x" + code_now[1:])
    elif why == "damaged":
        data = bytearray(built.read_bytes())
        at = data.index(b'"case_id":"c02"') + 12  # (c02's mapping: another case_id, its file's bytes the same)
        data[at:at + 3] = b"c05"
        built.write_bytes(bytes(data))
    else:
        built.unlink()
    parses.clear()
    assert _answers(claw, store) == expected
    assert _case_parses(parses) == 8 * len(expected)
    assert built.exists() == (why != "not there")  # (nor written by them)


def test_a_build_parses_every_case_whatever_the_file_holds(
        built: Path, claw: Claw, standin: StandIn, parses: list[str]) -> None:
    # An entry of derived data never decides what is sent: here c02's replaced by another prompt, the file's digest made
    # to hold (as only someone writing into the store could), which a read command would take.
    body, _, _ = built.read_bytes().rpartition(b"\n")
    planted = body.replace(b"Question 2: word word word", b"Planted prompt: word word")
    assert planted != body
    built.write_bytes(planted + b"\n" + blake3.blake3(planted).hexdigest().encode())
    code, out, _ = claw("explain", *CAMPAIGN)  # (a read command takes the entry: derived data the store holds)
    assert code == 0 and "Planted prompt" in out
    parses.clear()
    sent = len(standin.requests)
    code, _, err = claw.build(*CAMPAIGN[4:], "--output", "json")  # (every run stale: each sent again)
    assert code == 0, err
    assert _case_parses(parses) == 8
    prompts = [json.dumps(r["messages"]) for r in standin.requests[sent:] if r["model"].startswith("vendor/")]
    assert any("Question 2: word word" in p for p in prompts) and not any("Planted" in p for p in prompts)
    assert b"Planted" not in built.read_bytes()  # (the build wrote what it parsed)


def test_claws_code_files_are_statted_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # The header of this cache and the stamp name claw's code by the stat data of its ~300 files (stamp.code_digest):
    # taken once per process, not at each read and write of either (a cold build took it twice, 15-45 ms each).
    listed: list[Path] = []
    real = stamp.code_files
    monkeypatch.setattr(stamp, "code_files", lambda package: listed.append(package) or real(package))
    first = stamp.code_digest()
    assert stamp.code_digest() == first == json.loads(parsed_cases._header())[1]
    assert len(listed) <= 1, listed
