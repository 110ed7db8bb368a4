"""Configs hold JSON values: what YAML parses into something else is taken as written (a date) or refused where it
stands (NaN, infinity, !!set, !!binary: a build hashing such a case failed with a traceback), and a JSON message
file's NaN is refused as YAML's is."""

from __future__ import annotations

import json

import pytest

from clawstore.config.yamlio import YamlProblem, parse_json_text, parse_yaml_text
from clawstore.testing.standin import StandIn
from tests.support.claw import Claw
from tests.support.workspace import Workspace


def test_dates_and_times_are_the_text_as_written() -> None:
    data = parse_yaml_text("created: 2026-01-01\nat: 2026-01-01 10:00:00+02:00\n2026-12-03: key\n"
                           "list: [2001-12-14t21:59:43.10-05:00]\n")
    assert data == {"created": "2026-01-01", "at": "2026-01-01 10:00:00+02:00", "2026-12-03": "key",
                    "list": ["2001-12-14t21:59:43.10-05:00"]}
    json.dumps(data, allow_nan=False)  # (plain JSON: what the store hashes)


@pytest.mark.parametrize("text", ["x: .nan", "x: .inf", "x: -.Inf", "x: 1.0e+400", "x: !!set {a}",
                                  "x: !!binary aGk=", "x: !!omap [a: 1]", "x: !!pairs [a: 1]"])
def test_values_without_a_json_form_are_refused_at_their_line(text: str) -> None:
    with pytest.raises(YamlProblem, match=r"^invalid YAML at line 1, column 4: "):
        parse_yaml_text(text)


@pytest.mark.parametrize("text", ['{"x": NaN}', '[Infinity]', '{"x": [-Infinity]}'])
def test_a_json_file_s_nan_is_refused(text: str) -> None:
    with pytest.raises(YamlProblem, match=r"^invalid JSON: .*Infinity|NaN"):
        parse_json_text(text)


def test_a_case_with_a_date_in_its_metadata_builds(ws: Workspace, claw: Claw, standin: StandIn) -> None:
    path = ws.case("dated", "What day is it?")
    path.write_text(path.read_text() + "metadata:\n  created: 2026-01-01\n  reviewed: [2026-02-01]\n")
    ws.suite("main", ["m"])
    ws.run_profile()
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp")
    assert code == 0 and "Traceback" not in out + err, out + err
    sent = len(standin.requests)
    assert any("What day is it?" in json.dumps(r["body"]) for r in standin.requests)
    code, out, err = claw("build", "--suite", "main", "--run-profile", "rp")  # the same key again: nothing sent
    assert code == 0 and len(standin.requests) == sent, out + err
