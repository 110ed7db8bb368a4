"""Hostile YAML and numbers: bounded before anything recursive or costly sees them.

Each attack is a real file and a real `claw` process (memory-capped): exit 2 with one line, never a
signal death, a traceback or a memory blow-up, and no request sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from clawstore.config.limits import MAX_ATTACHMENT_BYTES
from clawstore.testing.standin import StandIn
from tests.hostile.attack import run_claw
from tests.support.claw import env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

CASE = "configs/cases/alpha/test.yaml"
PROFILE = "configs/run_profiles/rp.yaml"


def _bomb(first: str, level: Callable[[list[str]], str]) -> str:
    """Nine levels, each naming the one before nine times (`level` writes a level from its nine aliases)."""
    lines = [first]
    for i in range(1, 9):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} " + level([f"*{prev}"] * 9))
    return "\n".join(lines) + "\n"


def _alias_bomb() -> str:
    return _bomb('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
                 lambda aliases: "[" + ",".join(aliases) + "]")


def _merge_bomb() -> str:
    """The alias bomb through merge keys: each level merges the one before nine times (flattened, 9^8 key pairs)."""
    return _bomb("a: &a {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8}",
                 lambda aliases: "{<<: [" + ", ".join(aliases) + "]}")


def _case_with(w: Workspace, tail: str) -> None:
    path = w.configs / "cases" / "alpha" / "test.yaml"
    path.write_text(path.read_text() + tail)


def _replace_case(text: str) -> Callable[[Workspace], None]:
    return lambda w: (w.configs / "cases" / "alpha" / "test.yaml").write_text(text)


def _profile_line(old: str, new: str) -> Callable[[Workspace], None]:
    def apply(w: Workspace) -> None:
        path = w.configs / "run_profiles" / "rp.yaml"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new))
    return apply


def _runner_setting(value: str) -> Callable[[Workspace], None]:
    def apply(w: Workspace) -> None:
        path = w.configs / "cases" / "alpha" / "test.yaml"
        path.write_text(path.read_text().replace("  type: llm_probe", f"  type: llm_probe\n  max_tokens: {value}"))
    return apply


def _deep_json_source(w: Workspace) -> None:
    (w.configs / "cases" / "alpha" / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    w.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"].__setitem__(
        1, {"role": "user", "source": {"path": "deep.json"}}))


def _json_source(text: str) -> Callable[[Workspace], None]:
    def apply(w: Workspace) -> None:
        (w.configs / "cases" / "alpha" / "source.json").write_text(text)
        w.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"].__setitem__(
            1, {"role": "user", "source": {"path": "source.json"}}))
    return apply


def _big_attachment(w: Workspace) -> None:
    (w.configs / "cases" / "alpha" / "big.txt").write_bytes(b"x" * (MAX_ATTACHMENT_BYTES + 1))
    w.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["big.txt"]))


# attack -> (plant it, the file the refusal names, a phrase it contains)
ATTACKS: dict[str, tuple[Callable[[Workspace], None], str, str]] = {
    "alias bomb (9^9 nodes)": (lambda w: _case_with(w, "metadata:\n" + "".join(
        "  " + line + "\n" for line in _alias_bomb().splitlines())), CASE, "alias bomb"),
    "merge-key bomb (9^8 merged pairs)": (lambda w: _case_with(w, "metadata:\n" + "".join(
        "  " + line + "\n" for line in _merge_bomb().splitlines())), CASE, "alias bomb"),
    "100,000-deep flow nesting": (lambda w: _case_with(w, "metadata: {x: " + "[" * 100_000 + "]" * 100_000 + "}\n"),
                                  CASE, "nesting deeper than 100"),
    # one more space per level: 2,000 levels is 2 MB, 5,000 would already be over the size cap
    "2,000-deep block mappings": (_replace_case("".join(" " * i + "k:\n" for i in range(2000)) + " " * 2000 + "k: 1\n"),
                                  CASE, "nesting deeper than 100"),
    "5,000-deep compact sequences": (_replace_case("- " * 5000 + "x\n"), CASE, "nesting deeper than 100"),
    "deep nesting with CRLF line ends": (_replace_case("".join(" " * i + "k:\r\n" for i in range(300)) + "x: 1\r\n"),
                                         CASE, "nesting deeper than 100"),
    "deep nesting with U+2028 line ends": (_replace_case("".join(" " * i + "k:\u2028" for i in range(300))),
                                           CASE, "nesting deeper than 100"),
    "100,000-deep JSON message source": (_deep_json_source, CASE, "nesting deeper than 100"),
    # An unterminated string of escaped quotes (and brackets, to be counted) made the depth check's
    # string pattern start again at every quote: 60 KB took 20 s, these 1.2 MB would take hours.
    "JSON source with an unterminated string of escaped quotes": (
        _json_source('["' + 'a\\"[' * 300_000), CASE, "invalid JSON"),
    # Valid JSON that reads to a string UTF-8 cannot hold (YAML refuses the same escape): hashing the
    # case failed with a traceback.
    "JSON source with a lone surrogate escape": (_json_source('"2 + 2 \\ud800?"'), CASE, "lone surrogate"),
    "JSON source with a lone low surrogate in a mapping": (
        _json_source('{"role": "user", "content": "\\udc00 and a pair \\ud83d\\ude00"}'), CASE, "lone surrogate"),
    "50 MB string in a case": (lambda w: _case_with(w, "metadata: {blob: '" + "x" * 50_000_000 + "'}\n"),
                               CASE, "larger than"),
    "5000-digit max_tokens": (_runner_setting("9" * 5000), CASE, "integer literal longer than"),
    "max_tokens beyond 64 bits": (_runner_setting(str(2**70)), CASE, "out of range"),
    "max_tokens above its limit": (_runner_setting("100000000"), CASE, "from 1 to 10,000,000"),
    "temperature .nan": (lambda w: w.edit("run_profiles/rp.yaml", lambda d: None) or _profile_line(
        "temperature: 0", "temperature: .nan")(w), PROFILE, "runner_defaults.temperature"),
    "run_repetitions 10**12": (_profile_line("run_repetitions: 1", f"run_repetitions: {10**12}"),
                               PROFILE, "execution_policy.run_repetitions"),
    "max_concurrency 10**9": (_profile_line("max_concurrency: 2", f"max_concurrency: {10**9}"),
                              PROFILE, "execution_policy.max_concurrency"),
    "attachment above the size cap": (_big_attachment, CASE, "an attachment may be at most"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_hostile_yaml_is_refused_in_one_line(attack: str, ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    plant, where, phrase = ATTACKS[attack]
    plant(ws)
    validate = run_claw(ws.root, "validate")
    assert validate.code == 2, validate
    assert "Traceback" not in validate.stdout + validate.stderr
    assert where in validate.stdout and phrase in validate.stdout
    build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp", "--dry-run")
    assert build.refused_cleanly, build
    assert where in build.stderr and phrase in build.stderr
    assert standin.requests == []


@pytest.mark.parametrize("prices", ["pricing", "cost"])  # (`cost`, OpenClaw's name, said "cost unknown")
def test_many_attachment_tokens_warn_with_a_cost_estimate(ws: Workspace, standin: StandIn,  # noqa: F811
                                                          prices: str) -> None:
    (ws.configs / "cases" / "alpha" / "data.txt").write_bytes(b"word " * 1_000_000)  # 5 MB, under the cap
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["data.txt"]))
    ws.edit("suites/main.yaml", lambda d: [m.update({prices: {"input": 2.0}}) for m in d["models"]])
    plan = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp", "--dry-run")
    assert plan.code == 0, plan
    # 5,000,000 bytes / 4 = 1,250,000 tokens per run, 2 models -> 2,500,000 tokens at 2 USD per 1M
    assert "warning: attachments alone send about 2,500,000 input tokens" in plan.stderr
    assert "about 5.00 USD" in plan.stderr
    assert standin.requests == []


def test_a_build_showing_its_estimate_reads_the_configs_once(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    """The live display's cost estimate and the build plan the same configs: loaded once, warned once."""
    (ws.configs / "cases" / "alpha" / "data.txt").write_bytes(b"word " * 1_000_000)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"].update(attachments=["data.txt"]))
    ws.edit("suites/main.yaml", lambda d: [m.update(pricing={"input": 2.0}) for m in d["models"]])
    for flags in (("--progress", "live"), ("--max-cost", "100")):
        build = run_claw(ws.root, "build", "--suite", "main", "--run-profile", "rp", "--force", *flags)
        assert build.code == 0, build
        assert build.stderr.count("warning: attachments alone send about") == 1, build.stderr
