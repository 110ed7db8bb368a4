"""Tables for people and tables for scripts: rich tables on a real terminal (tmux), the formats
scripts read unchanged when piped, and `claw query --schema`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.query.schema import VIEW_DOCS, view_columns
from clawstore.testing.standin import StandIn, error, text
from tests.support.claw import Claw, env, ws  # noqa: F401
from tests.support.terminal import Terminal, terminal  # noqa: F401
from tests.support.workspace import Workspace

CAMPAIGN = ["--suite", "main", "--run-profile", "rp"]


def test_schema_lists_every_view_and_column() -> None:
    result = CliRunner().invoke(main, ["query", "--schema"])
    assert result.exit_code == 0, result.output
    views = view_columns()
    assert set(VIEW_DOCS) == set(views)
    lines = result.output.splitlines()
    for view, cols in views.items():
        start = lines.index(f"{view}: {VIEW_DOCS[view]}")
        for offset, col in enumerate(cols, start=1):
            assert lines[start + offset].split(None, 2)[:2] == [col.name, col.type]
            assert lines[start + offset].endswith(col.doc)
    rows = json.loads(CliRunner().invoke(main, ["query", "--schema", "--format", "json"]).output)
    assert len(rows) == sum(len(c) for c in views.values())
    assert rows[0] == {"view": "runs", "column": views["runs"][0].name, "type": views["runs"][0].type,
                       "meaning": views["runs"][0].doc}


def test_query_without_sql_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["query"])
    assert result.exit_code == 2 and "--schema" in result.output
    assert "Traceback" not in result.output


@pytest.fixture
def built(ws: Workspace, env: dict[str, str], standin: StandIn) -> Workspace:  # noqa: F811
    standin.set_default(text("an answer"))
    standin.script("vendor/m2", error(503, "upstream overloaded"), match="Name a colour.")
    code, _, _ = Claw(ws.root).build()
    assert code == 1
    ws.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    return ws


def test_rich_tables_on_a_terminal(built: Workspace, env: dict[str, str], terminal: Terminal) -> None:  # noqa: F811
    claw = f"{sys.executable} -m clawstore.cli"
    script = "; ".join([f"{claw} status {' '.join(CAMPAIGN)}", "echo ==explain",
                        f"{claw} explain {' '.join(CAMPAIGN)}", "echo ==query",
                        f"{claw} query 'select model_id, status, latency_s from runs order by 1, 2'",
                        "echo ==report", f"{claw} report {' '.join(CAMPAIGN)} --no-chart"])
    terminal.height = 80
    terminal.width = 150
    terminal.start(["bash", "-c", script], built.root,
                   {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "TERM": "xterm-256color",
                    "PATH": os.environ.get("PATH", "")})
    screen = terminal.wait_for(lambda s: "EXIT=" in s)
    ansi = terminal.screen(ansi=True)
    status, rest = screen.split("==explain")
    explain, rest = rest.split("==query")
    query, report = rest.split("==report")
    assert "Case Results" in report and "Model Summary" in report and "Problems (1)" in report
    case_header = next(line for line in report.splitlines() if "LATENCY_S" in line)
    assert case_header.split()[:3] == ["MODEL", "CASE", "REPS"]
    assert "status of main__rp__none" in status
    header = next(line for line in status.splitlines() if "FRESH" in line)
    assert header.split() == ["MODEL", "NODE", "FRESH", "STALE", "FAILED", "NEVER_BUILT"]
    m2 = next(line.split() for line in status.splitlines() if line.strip().startswith("m2"))
    assert m2 == ["m2", "run", "0", "1", "1", "0"]  # alpha edited (stale), beta failed
    assert "━" in status or "─" in status  # a drawn rule, not dashes
    assert "\x1b[" in ansi  # coloured
    words = " ".join(explain.split())  # long reasons wrap inside their cell
    assert "WHAT CHANGED" in words, explain
    assert "run m1 alpha rep 0 stale input.messages[1].content 'What is 2 + 2?' -> 'What is 3 + 3?'" in words
    assert "run m2 beta rep 0 failed last attempt ended provider_error" in words
    rows = [line.split() for line in query.splitlines() if line.strip().startswith(("m1", "m2"))]
    assert [r[:2] for r in rows] == [["m1", "success"], ["m1", "success"], ["m2", "provider_error"],
                                     ["m2", "success"]]
    # Numbers are right-aligned: every latency ends in the same column.
    ends = {line.rstrip().__len__() for line in query.splitlines() if line.strip().startswith(("m1", "m2"))}
    assert len(ends) == 1


def test_piped_output_stays_plain(built: Workspace, env: dict[str, str]) -> None:  # noqa: F811
    claw = Claw(built.root)
    proc = claw.popen("status", *CAMPAIGN)
    out, _ = proc.communicate(timeout=60)
    assert out.splitlines()[0].split() == ["MODEL", "NODE", "FRESH", "STALE", "FAILED", "NEVER_BUILT"]
    assert set(out.splitlines()[1].replace(" ", "")) == {"-"}
    assert "\x1b[" not in out
    proc = claw.popen("query", "select model_id, status from runs order by 1, 2", "--format", "csv")
    out, _ = proc.communicate(timeout=60)
    assert out == "model_id,status\nm1,success\nm1,success\nm2,provider_error\nm2,success\n"
