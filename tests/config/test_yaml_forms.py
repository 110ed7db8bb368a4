"""YAML as users write it: a BOM, CRLF, anchors, aliases and merge keys (`<<:`), flow style, JSON syntax validate and
build with what they say; a syntax error, a tab, a duplicate key (also after a merge), a second document, UTF-16 or
Latin-1 text, a case id in two files are one line naming the file, with the line and column or the field.

(An alias bomb and deep nesting: tests/hostile/test_yaml_attacks.py, memory-capped.)
"""

from __future__ import annotations

import json
import re

import pytest

from clawstore.config.yamlio import parse_yaml_text
from clawstore.testing.standin import StandIn
from tests.config.workspace_builder import claw
from tests.support.claw import Claw, env, ws  # noqa: F401 - fixtures
from tests.support.workspace import Workspace

CASE = """schema_version: 1
case_id: {cid}
title: A case
runner:
  type: llm_probe
input:
  messages:
    - role: user
      content: Say {cid}.
"""


def case(cid: str, tail: str = "") -> bytes:
    return (CASE.format(cid=cid) + tail).encode("utf-8")


MERGED_RUNNER = """schema_version: 1
case_id: {cid}
title: A case
runner:
  <<: {{type: llm_probe, temperature: 0.5, max_tokens: 64}}
  max_tokens: 32
input:
  messages:
    - &ask {{role: user, content: Say {cid}.}}
    - {{role: assistant, content: "{cid}."}}
    - <<: *ask
      content: Again, {cid}.
"""
MERGE_LIST = """schema_version: 1
case_id: {cid}
title: A case
runner:
  <<: [{{type: llm_probe}}, {{temperature: 0.25}}]
input: {{messages: [{{role: user, content: Say {cid}.}}]}}
metadata:
  defaults: &d {{owner: qa, team: evals}}
  copy: *d
"""
# form -> the file's bytes for case id `cid`
ALLOWED = {
    "utf-8 BOM": lambda cid: b"\xef\xbb\xbf" + case(cid),
    "CRLF line ends": lambda cid: case(cid).replace(b"\n", b"\r\n"),
    "document markers and comments": lambda cid: b"%YAML 1.1\n---\n# why\n" + case(cid, "tags: [a]  # why\n...\n"),
    "merge keys and aliases": lambda cid: MERGED_RUNNER.format(cid=cid).encode(),
    "a merge of a list and an aliased mapping": lambda cid: MERGE_LIST.format(cid=cid).encode(),
    "flow style": lambda cid: (f"{{schema_version: 1, case_id: {cid}, title: T, runner: {{type: llm_probe}}, "
                               f"input: {{messages: [{{role: user, content: Say {cid}.}}]}}}}\n").encode(),
    "JSON syntax": lambda cid: json.dumps({"schema_version": 1, "case_id": cid, "title": "T",
                                           "runner": {"type": "llm_probe"},
                                           "input": {"messages": [{"role": "user", "content": f"Say {cid}."}]}
                                           }).encode(),
    "quoted and block scalars": lambda cid: case(cid, 'expectations:\n  hard_expectations:\n    - text: "Says it."\n'
                                                      "    - text: >\n        Folded\n        text.\n"
                                                      "    - text: |\n        Literal\n        text.\n"),
    "unquoted number keys in anchors": lambda cid: case(cid, "rubric:\n  scale:\n    anchors:\n      10: Top.\n"
                                                             "      0: Nothing.\n      '5': Half.\n"),
    "number, boolean and null keys in free mappings": lambda cid: case(cid, "metadata:\n  2024: launch\n  true: yes\n"
                                                                            "  ~: none\n  nested: {1: a, b: c}\n"),
}
# form -> (the bytes, the error line after `<file>: `, as a regular expression)
FORBIDDEN = {
    "a syntax error": (lambda cid: case(cid, "tags: [a, b\n"),
                       r"invalid YAML at line 11, column 1: did not find expected ',' or ']'"),
    "a tab for indentation": (lambda cid: case(cid, "\tmetadata: {}\n"),
                              r"invalid YAML at line 10, column 1: found a tab character .*"),
    "a key written twice": (lambda cid: case(cid, "title: Again\n"),
                            r"invalid YAML at line 10, column 1: duplicate key 'title'"),
    "a key written twice in a list item": (lambda cid: case(cid).replace(b"content:", b"name: a\n      name:"),
                                           r"invalid YAML at line 10, column 7: duplicate key 'name'"),
    "a key written twice beside a merge": (
        lambda cid: case(cid).replace(b"  type: llm_probe", b"  <<: {type: llm_probe}\n  seed: 1\n  seed: 2"),
        r"invalid YAML at line 7, column 3: duplicate key 'seed'"),
    "a list as a key": (lambda cid: case(cid, "metadata:\n  [a, b]: c\n"),
                        r"invalid YAML at line 11, column 3: a list or mapping cannot be a key"),
    "two documents": (lambda cid: case(cid) + b"---\n" + case(cid),
                      r"invalid YAML at line 10, column 1: but found another document"),
    "UTF-16": (lambda cid: case(cid).decode().encode("utf-16"), r"not UTF-8 text \(invalid start byte at byte 0\)"),
    "Latin-1": (lambda cid: case(cid, "title: Caf\xe9\n".replace("title", "metadata:\n  x")).decode().encode("latin-1"),
                r"not UTF-8 text \(invalid continuation byte at byte \d+\)"),
    "a list at the top": (lambda cid: b"- schema_version: 1\n", r"top level must be a mapping, got a list"),
    "an unknown top-level anchor holder": (lambda cid: b"x-defaults: &d {type: llm_probe}\n" + case(cid),
                                           r"x-defaults: unknown field 'x-defaults' \(allowed: schema_version, .*\)"),
    "a YAML 1.1 boolean where text belongs": (
        lambda cid: case(cid).replace(f"content: Say {cid}.".encode(), b"content: yes"),
        r"input\.messages\[0\]\.content: expected a string, got a boolean True .*quote it for text\)"),
    "an unquoted number for an id": (lambda cid: case(cid).replace(f"case_id: {cid}".encode(), b"case_id: 1234"),
                                     r"case_id: expected a string, got an integer 1234 .*quote it for text\)"),
    "a YAML 1.1 boolean where one of a few words belongs": (
        lambda cid: case(cid, "deterministic_checks:\n  - check_id: s\n"
                              "    declarative: {kind: status_is, status: on}\n"),
        r"deterministic_checks\[0\]\.declarative\.status: expected one of success, .*, got True .*quote it for text\)"),
}


@pytest.fixture
def forms(ws: Workspace) -> Workspace:  # noqa: F811
    """The standard workspace plus one case per form, `y<n>` in configs/cases/y<n>/."""
    for index, make in enumerate([*ALLOWED.values(), *(m for m, _ in FORBIDDEN.values())]):
        path = ws.configs / "cases" / f"y{index}" / "test.yaml"
        path.parent.mkdir(parents=True)
        path.write_bytes(make(f"y{index}"))
    return ws


def test_every_form_is_accepted_or_refused_in_one_line_naming_the_file(forms: Workspace) -> None:
    done = claw("validate", str(forms.root))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    for index, name in enumerate(ALLOWED):
        assert not [line for line in lines if f"/y{index}/" in line], name
    for index, (name, (_, expected)) in enumerate(FORBIDDEN.items(), start=len(ALLOWED)):
        mine = [line for line in lines if line.startswith(f"configs/cases/y{index}/test.yaml: ")]
        assert len(mine) == 1, (name, mine)
        assert re.fullmatch(rf"configs/cases/y{index}/test\.yaml: {expected}", mine[0]), (name, mine[0])


def test_merged_and_aliased_values_are_what_a_build_sends(ws: Workspace, standin: StandIn) -> None:  # noqa: F811
    (ws.configs / "cases" / "merged" / "test.yaml").parent.mkdir(parents=True)
    (ws.configs / "cases" / "merged" / "test.yaml").write_text(MERGED_RUNNER.format(cid="merged"))
    ws.suite("merged", ["m1"], case_selection={"include_case_ids": ["merged"]})
    code, out, err = Claw(ws.root)("build", "--suite", "merged", "--run-profile", "rp")
    assert code == 0, out + err
    body = next(r["body"] for r in standin.requests if "merged" in json.dumps(r["body"]))
    # the merged temperature, the explicit max_tokens over the merged one, the aliased message and its override
    assert body["temperature"] == 0.5 and body["max_tokens"] == 32
    assert [m["content"] for m in body["messages"] if m["role"] != "system"] == [
        "Say merged.", "merged.", "Again, merged."]


def test_a_case_id_in_two_files_names_both(ws: Workspace) -> None:  # noqa: F811
    twin = ws.configs / "cases" / "group" / "twin" / "test.yaml"
    twin.parent.mkdir(parents=True)
    twin.write_bytes(case("alpha"))
    done = claw("validate", str(ws.root))
    assert done.returncode == 2
    assert done.stdout.splitlines()[:1] == [("configs/cases/group/twin/test.yaml: case_id: duplicate case_id 'alpha' "
                                           "(also defined in configs/cases/alpha/test.yaml)")]


# a message `source:` file's name and bytes -> None (accepted) or the end of the error line, as a regular expression
SOURCES: dict[str, tuple[str, bytes, str | None]] = {
    "a JSON source with a UTF-8 BOM": ("m.json", b'\xef\xbb\xbf[{"role": "user", "content": "From JSON."}]', None),
    "a YAML source with a UTF-8 BOM": ("m.yaml", b"\xef\xbb\xbf- role: user\n  content: From YAML.\n", None),
    "a YAML source with a merge key": ("m.yaml", b"- &m {role: user, content: One.}\n- <<: *m\n  content: Two.\n",
                                       None),
    "a JSON source with a key written twice": (
        "m.json", b'[{"role": "user", "content": "One.", "content": "Two."}]',
        r"m\.json: invalid JSON: duplicate key 'content'"),
    "a nested JSON key written twice": (
        "m.json", b'{"role": "user", "content": "x", "meta": {"a": 1, "a": 2}}',
        r"m\.json: invalid JSON: duplicate key 'a'"),
    "a YAML source with a key written twice": (
        "m.yaml", b"- role: user\n  content: One.\n  content: Two.\n",
        r"m\.yaml: invalid YAML at line 3, column 3: duplicate key 'content'"),
    "a JSON source in Latin-1": ("m.json", '[{"role": "user", "content": "Caf\xe9"}]'.encode("latin-1"),
                                 r"m\.json: not UTF-8 text \(invalid continuation byte at byte \d+\)"),
}


@pytest.mark.parametrize("form", sorted(SOURCES))
def test_a_message_source_file_as_users_write_it(ws: Workspace, form: str) -> None:  # noqa: F811
    name, raw, expected = SOURCES[form]
    (ws.configs / "cases" / "alpha" / name).write_bytes(raw)
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"].__setitem__(
        1, {"role": "user", "source": {"path": name}}))
    done = claw("validate", str(ws.root))
    if expected is None:
        assert done.returncode == 0, done.stdout + done.stderr
        return
    assert done.returncode == 2
    assert re.fullmatch(rf"configs/cases/alpha/test\.yaml: input\.messages\[1\]\.source: {expected}",
                        done.stdout.splitlines()[0]), done.stdout


def test_keys_yaml_would_type_are_the_text_as_written() -> None:
    # (1 and true were one Python key, the second silently replacing the first; 01 and 1 too)
    assert parse_yaml_text("m: {1: a, true: b, 01: c, 1.0: d, ~: e, 2026-01-01: f, x: g}\n") == {
        "m": {"1": "a", "true": "b", "01": "c", "1.0": "d", "~": "e", "2026-01-01": "f", "x": "g"}}
    assert parse_yaml_text("base: &b {1: a}\nm:\n  <<: *b\n  2: c\n") == {"base": {"1": "a"}, "m": {"1": "a", "2": "c"}}
