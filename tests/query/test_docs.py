"""docs/query.md documents every column, and every SQL example in it runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawstore.query.engine import run_query
from clawstore.query.schema import view_columns
from clawstore.store import Store
from tests.query.campaigns import Spec, build
from tests.support.once import copied, made_once

DOC = (Path(__file__).resolve().parents[2] / "docs" / "query.md").read_text()


def test_every_view_and_column_is_documented() -> None:
    for view, columns in view_columns().items():
        assert f"`{view}`" in DOC, view
        for column in columns:
            assert f"| `{column.name}` | {column.type} |" in DOC, (view, column.name)


def test_every_column_is_documented_with_the_meaning_schema_gives() -> None:
    """`claw query --schema` says each column's meaning, "the same text as the tables" of docs/query.md: `status` said
    nothing of a checks node's statuses there, `cost_known_usd` nothing of an llm_probe run's known part, which the
    page had gained since. (A `|` in a meaning is escaped in its table cell.)"""
    rows = set(DOC.splitlines())
    drifted = [f"{view}.{column.name}" for view, columns in view_columns().items() for column in columns
               if f"| `{column.name}` | {column.type} | {column.doc.replace('|', chr(92) + '|')} |" not in rows]
    assert drifted == []


def test_the_saved_queries_table_names_each_saved_query_with_the_params_it_reads() -> None:
    """The "Saved queries" table is what a reader looks a name and its `--param`s up in: each query shipped has a row,
    and its parameters are the variables its SQL reads (`getvariable('campaign')`), no more, no fewer."""
    saved = Path(__file__).resolve().parents[2] / "clawstore" / "query" / "saved"
    shipped = {path.stem: set(re.findall(r"getvariable\('(\w+)'\)", path.read_text())) for path in saved.glob("*.sql")}
    section = DOC.split("### Saved queries", 1)[1].split("\n\n```", 1)[0]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| `")]
    table = {row[0].strip("|` "): set(re.findall(r"`(\w+)`", row[-1])) for row in rows}
    assert table == shipped


def test_views_have_exactly_the_documented_columns(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    for view, columns in view_columns().items():
        got = run_query(store.root, f"select * from {view} limit 0", store=store).columns
        assert got == [c.name for c in columns], view


def _built(made: Path) -> None:
    with Store(made / "store") as store:
        build(store, Spec(fail={("openai/gpt-a", "case_1")}))
        build(store, Spec(salt="rubric v2"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two builds made once in the run (tests/support/once.py), the module's store a copy (queries write in it)."""
    root = tmp_path_factory.mktemp("docs")
    copied(made_once(tmp_path_factory, "query-docs", _built), root, "store")
    return Store(root / "store")


@pytest.mark.parametrize("sql", re.findall(r"```sql\n(.*?)```", DOC, re.S))
def test_examples_run(sql: str, store: Store) -> None:
    result = run_query(store.root, sql, store=store)
    assert result.columns
