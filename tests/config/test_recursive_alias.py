"""An alias inside the collection its anchor names (`metadata: &m {self: *m}`) makes a value that contains itself: it
has no end, so it is refused with its line and column as an alias bomb is (docs/configuration.md, Limits).

Before session 72 the event scan counted such an alias as one node: `claw validate` said OK for a case's metadata, then
`claw plan` and `claw build` stopped with a RecursionError traceback while hashing the case (exit 1); in a judge's
request_options `claw validate` itself stopped with one.
"""

from __future__ import annotations

import pytest

from clawstore.config.yamlio import YamlProblem, parse_yaml_text
from tests.support.claw import Claw
from tests.support.workspace import Workspace

SELF_MAP = "metadata: &m {self: *m}\n"
SELF_LIST = "metadata:\n  items: &l [1, *l]\n"
DEEP = "metadata: &top\n  a:\n    b: [1, {c: *top}]\n"


@pytest.mark.parametrize("text", [SELF_MAP, SELF_LIST, DEEP])
def test_a_case_with_a_recursive_alias_is_refused(ws: Workspace, claw: Claw, text: str) -> None:
    path = ws.configs / "cases/alpha/test.yaml"
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")
    for args in (("validate",), ("plan", "--suite", "main", "--run-profile", "rp")):
        code, out, err = claw(*args)
        assert "Traceback" not in out + err and "RecursionError" not in out + err
        assert code == 2, out + err
        lines = [line for line in (out + err).splitlines() if "configs/cases/alpha/test.yaml" in line]
        assert len(lines) == 1, out + err
        assert "refers to a collection that contains it" in lines[0], lines
        assert "at line " in lines[0], lines


def test_a_judge_with_a_recursive_alias_is_refused(ws: Workspace, claw: Claw) -> None:
    (ws.configs / "evaluation_profiles").mkdir(parents=True, exist_ok=True)
    (ws.configs / "evaluation_profiles/ev.yaml").write_text(
        "schema_version: 1\nevaluation_profile_id: ev\ntitle: E\njudge_system_prompt: Judge.\n"
        "judges: [{judge_id: j1, type: llm_probe, request_options: &o {x: *o}}]\n", encoding="utf-8")
    code, out, err = claw("validate")
    assert "Traceback" not in out + err
    assert code == 2, out + err
    assert "configs/evaluation_profiles/ev.yaml: invalid YAML" in out + err
    assert "the alias *o refers to a collection that contains it" in out + err
    assert "at line 5, column" in out + err


def test_aliases_to_finished_collections_still_load() -> None:
    assert parse_yaml_text("a: &a {x: 1}\nb: {y: *a}\nc: &c [*a, *a]\n") == {
        "a": {"x": 1}, "b": {"y": {"x": 1}}, "c": [{"x": 1}, {"x": 1}]}
    with pytest.raises(YamlProblem, match="contains it"):
        parse_yaml_text("a: &a [1]\nb: &b [2, {c: [*a, *b]}]\n")


def test_aliases_that_expand_to_too_much_text_are_refused(ws: Workspace, claw: Claw) -> None:
    """Few nodes, much text: a 100 KB scalar aliased 200 times is 20 MB once expanded (the same 4 MiB file could hold
    a 3.5 MB one aliased 100,000 times: 350 GB). Before session 72 it validated, and `claw plan` held every copy
    (1.5 GB of memory for 5,000 copies of 100 KB, growing with them)."""
    path = ws.configs / "cases/alpha/test.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "metadata:\n  big: &b " + "x" * 100_000 + "\n  copies: ["
                    + ", ".join(["*b"] * 200) + "]\n", encoding="utf-8")
    line = claw.one_config_error()
    assert line.startswith("configs/cases/alpha/test.yaml: invalid YAML: aliases expand to more than 16 MiB of "
                           "text"), line
    assert ", column " in line, line


def test_a_long_text_aliased_a_few_times_loads() -> None:
    text = "a: &a " + "x" * 10_000 + "\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    assert len(parse_yaml_text(text)["b"]) == 50
