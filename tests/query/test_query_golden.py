"""`claw query`'s bytes for odd values, in every format, against the output claw gave before it streamed its rows.

The golden file was written by main's code before the rows were streamed (session 59), with
`python3 -m tests.query.test_query_golden --write`: quoting, NULLs, unicode, nested types, timestamps, NaN,
very large integers, column names with quotes, duplicate names, no rows. A change to these bytes is a change
to what scripts read: write the file again only on purpose.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.store import Store

GOLDEN = Path(__file__).with_name("golden_formats.json")

CASES: dict[str, str] = {
    "quoting": """SELECT 'a,b' AS "col,1", 'he said "hi"' AS "q""uote", 'line1' || chr(10) || 'line2' AS nl,
        'tab' || chr(9) || 'x' AS tab, '  padded  ' AS sp, '' AS empty, 'pipe|bar' AS "p|ipe", 'cr' || chr(13) AS cr,
        'back\\slash' AS bs""",
    "nulls": """SELECT * FROM (VALUES (1, NULL, NULL::DOUBLE, NULL::INTEGER[], NULL::TIMESTAMP, NULL::BOOLEAN),
        (NULL, 'x', 1.5, [1], TIMESTAMP '2024-01-01', true), (NULL, NULL, NULL, NULL, NULL, NULL))
        t(i, s, d, l, ts, b)""",
    "unicode": """SELECT 'café' AS "naïve", '日本語テキスト' AS wide, '🦀 crab' AS emoji, 'e' || chr(769) AS combining,
        'שלום' AS rtl, chr(0) || 'nul' AS nul, chr(27) || '[31m' AS esc, chr(8232) AS ls
        UNION ALL SELECT 'x', 'y', 'z', 'w', 'v', 'u', 't', 's'""",
    "nested": """SELECT [1, 2, NULL] AS l, {'a': 1, 'b': [1, 2], 'c': NULL} AS st, MAP {'k': 1, 'j': 2} AS m,
        [{'x': 1.5, 'y': 'q"z'}] AS ls, []::INTEGER[] AS empty, [[1], [], NULL] AS nest,
        [1, 2, 3]::INTEGER[3] AS arr, {'t': TIMESTAMP '2024-05-06 07:08:09', 'd': DATE '2024-01-02'} AS times,
        MAP {1: 'one'} AS intkey, ['naïve', '🦀'] AS uni, [1.0::DOUBLE, 'nan'::DOUBLE] AS nanlist""",
    "timestamps": """SET TimeZone = 'UTC'; SELECT TIMESTAMP '2024-01-02 03:04:05.123456' AS ts,
        TIMESTAMPTZ '2024-01-02 03:04:05+02' AS tstz, DATE '2024-02-29' AS d, TIME '23:59:59.5' AS t,
        INTERVAL '1 month 2 days 3 hours' AS iv, INTERVAL '90 minutes' AS iv2,
        TIMESTAMP_NS '2024-01-02 03:04:05.123456789' AS tsns, TIMESTAMP_S '2024-01-02 03:04:05' AS tss,
        TIMESTAMP '2024-01-02' AS midnight, DATE '0001-01-01' AS first, TIMETZ '12:00:00+05' AS ttz""",
    "floats": """SELECT 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::FLOAT AS ninf, -0.0::DOUBLE AS negz,
        1e300 AS big, 0.1 AS tenth, 1e-7::DOUBLE AS small, 3.14::FLOAT AS f32, 123456.789::DOUBLE AS wide,
        99999.5::DOUBLE AS edge, 2.5::DECIMAL(18, 3) AS dec, 1e16::DOUBLE AS e16
        UNION ALL SELECT 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12""",
    "bigints": """SELECT 170141183460469231731687303715884105727::HUGEINT AS huge,
        (-170141183460469231731687303715884105727)::HUGEINT AS neghuge, 18446744073709551615::UBIGINT AS ubig,
        (-9223372036854775808)::BIGINT AS minbig, 340282366920938463463374607431768211455::UHUGEINT AS uhuge,
        12345678901234567890.1234567891::DECIMAL(38, 10) AS dec38, 255::UTINYINT AS u8""",
    "names": """SELECT 1 AS "a""b", 2 AS "'x'", 3 AS "with space", 4 AS a, 5 AS A, 6 AS a, 7 AS "a_1", 8,
        9 AS " ", 10 AS "new
line\"""",
    "odd_types": """SELECT '\\xAA\\x00abc'::BLOB AS blob, '6ba7b810-9dad-11d1-80b4-00c04fd430c8'::UUID AS id,
        true AS yes, false AS no, 'b'::ENUM('a', 'b') AS e, '{"k": [1, 2]}'::JSON AS j, '101'::BIT AS bits,
        union_value(n := 5) AS u""",
    "no_rows": "SELECT 1 AS a, 'x' AS b WHERE false",
    "no_rows_view": "select * from builds limit 0",
    "alignment": """SELECT * FROM (VALUES (1, 'short', 1.5, NULL), (123456789, 'a much longer text', -2.25, 7),
        (NULL, NULL, NULL, NULL), (-5, 'é', 1234567.0, 3)) t(n, s, f, maybe) ORDER BY n NULLS FIRST""",
    "mixed": "SELECT 1 AS x UNION ALL SELECT 'two' ORDER BY 1",
    "statements": "CREATE TEMP TABLE t AS SELECT range AS r FROM range(5); SELECT r, r * r AS sq FROM t ORDER BY r",
    "shorthand": "FROM range(3)",
    "values": "VALUES (1, 'a'), (2, 'b')",
    "comment": "SELECT 42 AS answer -- the trailing comment",
    "describe": "DESCRIBE SELECT 1 AS a, 'x' AS b",
    "summarize": "SUMMARIZE SELECT range AS r FROM range(10)",
    "cast_fails": "SELECT CAST(s AS INTEGER) AS n FROM (VALUES ('1'), ('two')) t(s)",
    "ddl_last": "CREATE TEMP TABLE t AS SELECT 1 AS a",
    "insert_last": "CREATE TEMP TABLE t (a INTEGER); INSERT INTO t VALUES (1), (2)",
    "pivot": "PIVOT (SELECT 'k' || range AS k, range AS v FROM range(3)) ON k USING sum(v)",
    "many": "SELECT range AS i, range % 3 = 0 AS b FROM range(2100)",
}
STDOUT_FORMATS = ("table", "csv", "json", "markdown")
OUT_EXTENSIONS = (".csv", ".json", ".md", ".parquet")


def _outputs(store: Path, sql: str, scratch: Path) -> dict[str, list[object]]:
    """Every format's (exit code, stdout, stderr) and every --out file's (code, stderr, content)."""
    runner = CliRunner()
    got: dict[str, list[object]] = {}
    for fmt in STDOUT_FORMATS:
        result = runner.invoke(main, ["query", "--store", str(store), sql, "--format", fmt])
        got[fmt] = [result.exit_code, result.stdout, result.stderr]
    for ext in OUT_EXTENSIONS:
        out = scratch / f"out{ext}"
        result = runner.invoke(main, ["query", "--store", str(store), sql, "--out", str(out)])
        stderr = result.stderr.replace(str(out), "OUT")
        if not out.exists():
            content: object = None
        elif ext == ".parquet":  # (read back: the bytes name the writer's version)
            rows = duckdb.connect().execute(f"SELECT * FROM read_parquet('{out}')").fetchall()
            content = repr(rows)
        else:
            content = out.read_text(encoding="utf-8", errors="surrogateescape")
        got[ext] = [result.exit_code, stderr, content]
        out.unlink(missing_ok=True)
    return got


def _everything(work: Path) -> dict[str, dict[str, list[object]]]:
    store = Store(work / "store")
    scratch = work / "scratch"
    scratch.mkdir()
    return {name: _outputs(Path(store.root), sql, scratch) for name, sql in CASES.items()}


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(Store(tmp_path_factory.mktemp("golden") / "store").root)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_format_gives_the_bytes_it_gave_before_streaming(empty_store: Path, tmp_path: Path, case: str) -> None:
    # (each case's own outputs: the module's all at once were made again in each xdist worker that ran a case)
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert _outputs(empty_store, CASES[case], tmp_path) == golden[case]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    with tempfile.TemporaryDirectory() as work:
        GOLDEN.write_text(json.dumps(_everything(Path(work)), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
