"""DuckDB draws a progress bar on stdout when a query is still short of half done after 2 s, into a pipe or a file as
well: claw's output (a report's JSON, a query's rows) must never carry it. Found by session 69's CI: on a loaded
machine `tests/query/test_report_memory.py` read `claw report`'s output with the bar's lines before its JSON."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import clawstore

_SETTINGS = """
import duckdb
from clawstore.query import duck
ask = "SELECT current_setting('enable_progress_bar'), current_setting('threads')"
print(duckdb.connect().execute(ask).fetchall(), duck.connect(threads=1).execute(ask).fetchall())
"""


def test_claws_connections_are_made_without_the_bar() -> None:
    """In a process of its own, its stdout a pipe, as `claw report`'s (under pytest DuckDB leaves the bar off)."""
    done = subprocess.run([sys.executable, "-c", _SETTINGS], capture_output=True, text=True, timeout=120,
                          cwd=Path(clawstore.__file__).parents[1])
    assert done.returncode == 0, done.stderr
    plain, claws = done.stdout.split("] [")
    assert plain.startswith("[(True,"), done.stdout  # (DuckDB's default: so a bar could be drawn)
    assert claws.startswith("(False, 1)"), done.stdout  # (the config passed on: threads 1)


def test_nothing_in_claw_connects_to_duckdb_but_duck_connect() -> None:
    callers = []
    for path in Path(clawstore.__file__).parent.rglob("*.py"):
        if "duckdb" not in (text := path.read_text()):
            continue
        for node in ast.walk(ast.parse(text, str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "duckdb"):
                callers.append(f"{path.relative_to(Path(clawstore.__file__).parent)}:{node.lineno}")
    assert callers == ["query/duck.py:15"], callers
