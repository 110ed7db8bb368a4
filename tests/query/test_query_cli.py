"""`claw query`: SQL and saved queries over a real store, output formats, exports, errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.query.engine import reads_history
from clawstore.query.manifest import pending_builds
from clawstore.query.saved import PACKAGED
from clawstore.store import Store
from clawstore.store.headdoc import read_head_doc
from tests.query.campaigns import Spec, build, count_flattened
from tests.support.once import copied, made_once
from tests.support.prepared import claw_here

REPO = Path(__file__).resolve().parents[2]


def _built(made: Path) -> None:
    with Store(made / "store") as store:
        build(store, Spec())
        build(store, Spec(models=["openai/gpt-a", "new/model-c"], fail={("new/model-c", "case_2")}))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Two builds made once in the run (tests/support/once.py), the module's store a copy (queries write in it)."""
    root = tmp_path_factory.mktemp("q")
    copied(made_once(tmp_path_factory, "query-cli", _built), root, "store")
    return Store(root / "store")


def claw(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A real `claw` process (entry point of the installed package)."""
    return subprocess.run([sys.executable, "-m", "clawstore.cli", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=120)


def run(store: Store, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["query", "--store", str(store.root), *args])
    return result.exit_code, result.stdout, result.stderr


def test_count_of_runs_matches_run_nodes_in_a_real_process(store: Store) -> None:
    proc = claw("query", "select count(*) as n from runs", "--store", str(store.root), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    # 6 runs of build 1, plus 3 of new/model-c in build 2 (gpt-a's were reused: same keys).
    assert json.loads(proc.stdout) == [{"n": 9}]


def test_sql_opening_with_a_comment_is_the_sql_not_an_option(store: Store) -> None:
    """docs/query.md's interval example opens with `-- 95 % interval …`: pasted, it was "No such option", exit 2."""
    sql = "-- runs per model\nselect count(*) as n from runs"
    code, out, err = run(store, sql, "--format", "json")  # (the arguments as a real process gets them: click's)
    assert code == 0, err
    assert json.loads(out) == [{"n": 9}]
    code, out, err = run(store, "--format", "csv", "-- a comment\nselect 1 as one")
    assert (code, out.split()) == (0, ["one", "1"]), err


@pytest.mark.parametrize("comment", ["--no space after the dashes", "--", "--x=1 looks like an option's value",
                                     "--\tafter a tab"])
def test_sql_opening_with_any_comment_is_the_sql_in_any_order(store: Store, comment: str) -> None:
    """SQL allows `--comment` with no space (DuckDB runs it): it was "No such option '--comment\\nselect …'", exit 2.
    In every order of the options, beside a `--param` whose value opens with `-- `, and an option's `=` form."""
    sql = f"{comment}\nselect count(*) as n, getvariable('v') as v from runs"
    for args in (
        [sql, "--format", "json", "--param", "v=-- x"],
        ["--format", "json", sql, "-p", "v=-- x"],
        ["--param", "v=-- x", "--format=json", sql],
    ):
        code, out, err = run(store, *args)
        assert code == 0, (args, out, err)
        assert json.loads(out) == [{"n": 9, "v": "-- x"}], (args, out)
    code, out, err = run(store, "--format", "json", "--param=v=a b", sql)  # (an option's value holding a space)
    assert (code, json.loads(out or "null")) == (0, [{"n": 9, "v": "a b"}]), err
    code, out, err = run(store, "--no-such-flag", sql)  # (an unknown option stays one: no space in its name)
    assert code == 2 and "no such option '--no-such-flag'" in err, err


def test_bad_sql_is_one_line_and_exit_2(store: Store) -> None:
    proc = claw("query", "selec * from runs", "--store", str(store.root))
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("claw: error: query failed: Parser Error"), proc.stderr
    proc = claw("query", "select nope from runs", "--store", str(store.root))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "nope" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [(b"select '\xff' as x",),
                                  (b"select getvariable('v') as x", b"--param", b"v=caf\xe9")])
def test_sql_or_a_parameter_that_is_not_utf8_is_one_line_and_exit_2(store: Store, args: tuple[bytes, ...]) -> None:
    # (bytes a Latin-1 terminal sends: they reached DuckDB, which failed with a TypeError traceback)
    proc = claw("query", *map(os.fsdecode, args), "--store", str(store.root))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("claw: error: ") and "not UTF-8 text" in line, line


def test_a_store_whose_path_is_not_utf8_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    # (DuckDB takes file names as UTF-8 text only: every query of such a store failed with a traceback)
    build(Store(tmp_path / "cafe" / "store"), Spec())
    latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    os.rename(tmp_path / "cafe", latin1)  # (moved there, its manifest made: indexing stops the same way)
    for sql in ("select count(*) as n from runs", "select count(*) as n from run_history"):
        proc = claw("query", sql, "--store", str(latin1 / "store"))
        assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr
        [line] = proc.stderr.strip().splitlines()
        assert "the path is not UTF-8 text" in line and "move the store" in line, line


def test_formats(store: Store) -> None:
    sql = "select model_id, count(*) as runs, sum(cost_usd) as cost from runs group by 1 order by 1"
    code, out, _ = run(store, sql, "--format", "json")
    rows = json.loads(out)
    assert code == 0 and [r["model_id"] for r in rows] == ["anthropic/claude-b", "new/model-c", "openai/gpt-a"]
    assert [r["runs"] for r in rows] == [3, 3, 3] and isinstance(rows[0]["cost"], float)
    code, out, _ = run(store, sql, "--format", "csv")
    parsed = list(csv.reader(io.StringIO(out)))
    assert parsed[0] == ["model_id", "runs", "cost"] and len(parsed) == 4
    code, same, _ = run(store, sql, "--output", "csv")  # (report's and compare's name for it)
    assert code == 0 and same == out
    code, out, _ = run(store, sql, "--format", "markdown")
    assert out.splitlines()[0] == "| model_id | runs | cost |" and out.splitlines()[1] == "|---|---|---|"
    code, out, _ = run(store, sql)
    lines = out.splitlines()
    assert lines[0].split() == ["model_id", "runs", "cost"] and set(lines[1]) <= {"-", " "} and len(lines) == 5


def test_leaderboard_and_every_saved_query(store: Store) -> None:
    code, out, err = run(store, "leaderboard", "--format", "json")
    assert code == 0, err
    board = {r["model_id"]: r for r in json.loads(out)}
    assert set(board) == {"anthropic/claude-b", "new/model-c", "openai/gpt-a"}
    assert (board["new/model-c"]["cases"], board["new/model-c"]["scored"]) == (3, 2)  # case_2's run failed
    assert (board["openai/gpt-a"]["cases"], board["openai/gpt-a"]["scored"]) == (3, 3)
    means = [r["mean_score"] for r in json.loads(out)]
    assert means == sorted(means, reverse=True)
    for name in ("cost_by_model", "failures", "judge_spread", "history"):
        code, out, err = run(store, name, "--format", "json")
        assert code == 0, (name, err)
        assert isinstance(json.loads(out), list)
    failures = json.loads(run(store, "failures", "--format", "json")[1])
    assert [(f["kind"], f["model_id"], f["case_id"], f["error_code"]) for f in failures] == \
        [("run", "new/model-c", "case_2", "provider_error")]
    spread = json.loads(run(store, "judge_spread", "--format", "json")[1])
    assert all(r["judge_reps"] == 2 and r["spread"] == 0.5 for r in spread)
    history = json.loads(run(store, "history", "--param", "case=case_1", "--param", "model=openai/gpt-a",
                             "--format", "json")[1])
    assert len(history) == 2 and {h["case_id"] for h in history} == {"case_1"}
    assert [h["action"] for h in history] == ["exec", "reuse"]


def test_a_campaign_param_no_campaign_has_says_so_beside_its_empty_answer(store: Store) -> None:
    """A misspelt `--param campaign=` was an empty table and nothing else (the user took it for "no results"): the
    answer is still the query's, and a note names the store's campaigns (found by docs/query.md's examples run)."""
    [campaign] = [name.removeprefix("campaigns/") for name in store.list_refs("campaigns/")]
    code, out, err = run(store, "leaderboard", "--param", f"campaign={campaign}x", "--format", "json")
    assert code == 0 and json.loads(out) == [], (out, err)
    assert f"no campaign {campaign}x in this store (its campaigns: {campaign};" in err, err
    code, out, err = run(store, "leaderboard", "--param", f"campaign={campaign}", "--format", "json")
    assert code == 0 and json.loads(out) and "no campaign" not in err, err


def test_paired_compare_s_a_and_b_no_campaign_has_say_so_beside_its_empty_answer(store: Store) -> None:
    """`paired_compare`'s `a` and `b` name campaigns as `campaign` does; a misspelt one, or a pin name such as
    `pins/baseline` (what `claw compare` takes), was an empty table and nothing else, exit 0 (session 77's newcomer)."""
    [campaign] = [name.removeprefix("campaigns/") for name in store.list_refs("campaigns/")]
    for a, b in ((f"{campaign}x", campaign), (campaign, "pins/baseline")):
        code, out, err = run(store, "paired_compare", "--param", f"a={a}", "--param", f"b={b}", "--format", "json")
        wrong = a if a != campaign else b
        assert code == 0 and json.loads(out) == [], (out, err)
        assert f"no campaign {wrong} in this store (its campaigns: {campaign};" in err, err
    code, out, err = run(store, "paired_compare", "--param", f"a={campaign}", "--param", f"b={campaign}",
                         "--format", "json")
    assert code == 0 and json.loads(out) and "no campaign" not in err, err


def test_a_case_or_model_param_the_store_has_not_says_so_beside_its_empty_answer(store: Store) -> None:
    """`history`'s `--param case=` and `--param model=`: a misspelt one was an empty table and nothing else, read as
    "no history" (session 77's newcomer). The note names a few of the store's ids; a known case and model say
    nothing, and neither does an empty answer whose case and model the store has."""
    code, out, err = run(store, "history", "--param", "case=case_1x", "--format", "json")
    assert code == 0 and json.loads(out) == [], (out, err)
    assert "no case case_1x in this store (its cases: case_1; case_2;" in err, err
    assert "no model" not in err, err
    code, out, err = run(store, "history", "--param", "case=case_1", "--param", "model=openai/gpt-x", "--format",
                         "json")
    assert code == 0 and json.loads(out) == [], (out, err)
    assert "no model openai/gpt-x in this store (its models: " in err and "openai/gpt-a" in err, err
    assert "no case" not in err, err
    code, out, err = run(store, "history", "--param", "case=case_1", "--param", "model=openai/gpt-a", "--format",
                         "json")
    assert code == 0 and json.loads(out) and "claw: note: no" not in err, err
    code, out, err = run(store, "select case_id from results where case_id = getvariable('case') and false",
                         "--param", "case=case_1", "--format", "json")
    assert code == 0 and json.loads(out) == [] and "claw: note: no" not in err, err


def test_unknown_saved_query(store: Store) -> None:
    code, _, err = run(store, "leaderbord")
    assert code == 2 and "no saved query named 'leaderbord'" in err and "leaderboard" in err


def test_drop_and_alter_do_not_damage_the_store(store: Store) -> None:
    before = run(store, "select count(*) from runs", "--format", "csv")[1]
    code, out, err = run(store, "drop view runs; create table runs as select 1 as x; "
                                "alter table runs rename to gone; drop view results; select 42 as answer")
    assert code == 0, err
    assert out.split() == ["answer", "------", "42"]
    assert run(store, "select count(*) from runs", "--format", "csv")[1] == before
    assert run(store, "select count(*) from results", "--format", "csv")[1] == "count_star()\n8\n"


def test_out_writes_parquet_csv_json(store: Store, tmp_path: Path) -> None:
    sql = "select key, model_id, final_score from results order by key"
    code, _, err = run(store, sql, "--out", str(tmp_path / "r.parquet"))
    assert code == 0 and "wrote 8 rows" in err
    # An independent DuckDB reads the export back.
    rows = duckdb.connect().execute(f"select * from read_parquet('{tmp_path / 'r.parquet'}')").fetchall()
    assert len(rows) == 8 and rows == sorted(rows)
    run(store, sql, "-o", str(tmp_path / "r.json"))  # (-o / --out: the same spelling as view and export)
    assert len(json.loads((tmp_path / "r.json").read_text())) == 8
    run(store, sql, "--out", str(tmp_path / "r.csv"))
    assert (tmp_path / "r.csv").read_text().splitlines()[0] == "key,model_id,final_score"
    code, _, err = run(store, sql, "--out", str(tmp_path / "r.xlsx"))
    assert code == 2 and "unknown extension" in err


def test_workspace_queries_dir_wins(store: Store, tmp_path: Path) -> None:
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "leaderboard.sql").write_text("select 'mine' as who")
    code, out, err = claw_here("query", "leaderboard", "--store", str(store.root), "--format", "csv", cwd=tmp_path)
    assert code == 0 and out == "who\nmine\n", err


def test_the_workspace_queries_dir_is_found_from_a_folder_inside_the_workspace(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace root is the nearest directory above holding configs/, for the saved queries as for the store:
    before session 75, `claw query leaderboard` from configs/ (or any folder below the root) read the workspace's
    store but ran the packaged leaderboard, not the workspace's own, without a word."""
    (tmp_path / "configs" / "suites").mkdir(parents=True)
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "leaderboard.sql").write_text("select 'mine' as who")
    monkeypatch.chdir(tmp_path / "configs" / "suites")
    assert run(store, "leaderboard", "--format", "csv") == (0, "who\nmine\n", "")


def test_missing_store_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["query", "select 1", "--store", str(tmp_path / "none")])
    assert result.exit_code == 3 and "no store at" in result.stderr
    assert not (tmp_path / "none").exists()


def test_queries_dir_is_the_packaged_saved_queries() -> None:
    # One source: the repository's queries/ is a link to the copy an installed claw ships.
    assert (REPO / "queries").resolve() == PACKAGED.resolve()
    names = {p.name for p in PACKAGED.glob("*.sql")}
    assert {"leaderboard.sql", "cost_by_model.sql", "failures.sql", "judge_spread.sql", "history.sql"} <= names


def test_show_tables_lists_every_view_and_nothing_internal(store: Store) -> None:
    code, out, err = run(store, "show tables", "--format", "json")
    assert code == 0, err
    names = {row["name"] for row in json.loads(out)}
    assert {"runs", "checks", "judgements", "results", "builds", "objects"} <= names
    assert not any(name.startswith("__") for name in names), names
    code, out, err = run(store, "describe objects", "--format", "json")
    assert code == 0 and "column_name" in out, err


@pytest.mark.parametrize("attack", [
    "copy (select 'pwned') to '{target}'",
    "copy (select 'pwned' as x) to '{manifest}/evil.parquet' (format parquet)",
    "select * from read_csv('{secret}')",
    "attach '{target}' as other",
    "select * from glob('{secret}')",
    "install httpfs",
])
@pytest.mark.parametrize("output", [("--format", "csv"), ("--out", "{out}.parquet"), ("--out", "{out}.json")])
def test_a_saved_query_from_the_workspace_reads_the_results_and_nothing_else(
        store: Store, tmp_path: Path, attack: str, output: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # A workspace's queries/ come with a suite written by someone else: `claw query NAME` must not let
    # it write the user's files (~/.bashrc), read them (credentials) or plant rows in the manifest.
    # (Each attack once in a real process, printed: the exit code and stderr a user sees; the two --out files
    # in-process, run from the workspace as the user would: the same command, its confinement is DuckDB's own.)
    secret, target = tmp_path / "credentials", tmp_path / "written"
    secret.write_text("aws_secret_access_key=shh\n")
    manifest = store.root / "manifest"
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "board.sql").write_text(
        attack.format(target=target, secret=secret, manifest=manifest) + ";\nselect count(*) as n from runs")
    assert run(store, "select count(*) from runs")[0] == 0  # (the manifest is brought up to date first)
    before = sorted(p.relative_to(manifest) for p in manifest.rglob("*"))
    # (every way out: printed, or written by DuckDB's COPY (parquet) or by claw (json) to the file the user named)
    args = ("query", "board", "--store", str(store.root), output[0], output[1].format(out=tmp_path / "out"))
    if output[0] == "--format":
        proc = claw(*args, cwd=tmp_path)
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        monkeypatch.chdir(tmp_path)
        result = CliRunner().invoke(main, list(args))
        code, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert code == 2, stdout
    assert stderr.startswith(f"claw: error: {tmp_path / 'queries' / 'board.sql'}: query failed: ")
    assert len(stderr.splitlines()) == 1
    assert not target.exists() and "shh" not in stdout + stderr
    assert not list(tmp_path.glob("*out*"))
    assert sorted(p.relative_to(manifest) for p in manifest.rglob("*")) == before


def test_a_saved_query_from_the_workspace_still_sees_every_view_and_can_export(store: Store, tmp_path: Path) -> None:
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "board.sql").write_text(
        "select (select count(*) from runs) as runs, (select count(*) from run_history) as history, "
        "(select count(*) from objects) > 0 as objects")
    typed = run(store, "select (select count(*) from runs) as runs, (select count(*) from run_history) as history, "
                       "(select count(*) from objects) > 0 as objects", "--format", "csv")[1]
    # (in this process, from the workspace: the saved query's confinement is DuckDB's, as the test above says)
    code, printed, err = claw_here("query", "board", "--store", str(store.root), "--format", "csv", cwd=tmp_path)
    assert code == 0, err
    assert printed == typed and printed.splitlines()[1].endswith(",true")
    out = tmp_path / "board.parquet"
    code, _, err = claw_here("query", "board", "--store", str(store.root), "--out", str(out), cwd=tmp_path)
    assert code == 0, err
    assert duckdb.connect().execute(f"select count(*) from read_parquet('{out}')").fetchall() == [(1,)]


def test_sql_typed_by_the_user_keeps_the_user_s_own_file_access(store: Store, tmp_path: Path) -> None:
    mine = tmp_path / "mine.csv"
    mine.write_text("model_id,team\nopenai/gpt-a,blue\n")
    code, out, err = run(store, f"select team from read_csv('{mine}')", "--format", "csv")
    assert code == 0 and out == "team\nblue\n", err


def test_a_query_of_the_plain_views_leaves_the_builds_to_a_query_of_their_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing every build since the last query costs a copy of the campaign per build (on a campaign of
    40,000 nodes, 43 s after nine builds); the plain views need the current heads alone, each copied from
    the previous one, so only SQL that reads a history view pays for the builds."""
    edits = ("edit-1", "edit-2", "edit-3")  # three rubric edits, each judging again
    indexed = Store(tmp_path / "indexed" / "store")  # the same builds, each indexed as it ends
    for salt in ("", *edits):
        build(indexed, Spec(salt=salt))
    store = Store(tmp_path / "store")
    build(store, Spec())  # indexed, as a query would
    for salt in edits:
        build(store, Spec(salt=salt), refresh=False)  # no query meanwhile
    assert len(pending_builds(store)) == 3
    sql = "select model_id, case_id, final_score, passed from results order by 1, 2"
    flattened = count_flattened(monkeypatch)
    code, out, err = run(store, sql, "--format", "json")
    assert code == 0, err
    assert out == run(indexed, sql, "--format", "json")[1] and len(json.loads(out)) == 6
    assert len(pending_builds(store)) == 3  # left to the history
    head = read_head_doc(store, store.get_ref(f"campaigns/{Spec().campaign_id}"))
    judged = [node["key"] for node in head["nodes"] if node["kind"] != "run"]  # (the salt is in their keys)
    assert sorted(flattened) == sorted(judged)  # what the last edit changed, once; the runs copied
    flattened.clear()
    assert run(store, "leaderboard", "--format", "json")[:2] == run(indexed, "leaderboard", "--format", "json")[:2]
    assert not flattened and len(pending_builds(store)) == 3

    code, out, err = run(store, "select count(*) as builds from builds", "--format", "json")
    assert code == 0 and json.loads(out) == [{"builds": 4}], err
    assert pending_builds(store) == []
    history = "select model_id, case_id, count(*) as n from result_history group by 1, 2 order by 1, 2"
    assert run(store, history, "--format", "json")[:2] == run(indexed, history, "--format", "json")[:2]


@pytest.mark.parametrize(("sql", "history"), [
    ("select * from results", False), ("leaderboard", False), ("select * from objects", False),
    ("select * from RUN_HISTORY", True), ("select count(*) from builds", True), ("from build_nodes", True),
    ("select 1; select * from judgement_history", True), ('select * from "check_history"', True),
    ("describe runs", True), ("  SHOW tables", True), ("select 1; summarize results", True),
    ("select * from result_history_of_mine", False), ("select 'rebuilds' as word", False),
])
def test_which_sql_reads_the_history(sql: str, history: bool) -> None:
    assert reads_history(sql) is history


def test_a_broken_saved_query_names_its_file(store: Store, tmp_path: Path) -> None:
    # its SQL error read as the command line's ("query failed: Parser Error …"), and a queries/x.sql that is a
    # directory was "no saved query named 'x'" beside a list naming x
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "broken.sql").write_text("selec 1")
    (tmp_path / "queries" / "folder.sql").mkdir()
    # (in this process, from the workspace: what is read is the error a command says; a real process says its
    # errors the same way, test_bad_sql_is_one_line_and_exit_2)
    code, _, err = claw_here("query", "broken", "--store", str(store.root), cwd=tmp_path)
    assert code == 2 and err.startswith(
        f"claw: error: {tmp_path / 'queries' / 'broken.sql'}: query failed: Parser Error"), err
    assert len(err.splitlines()) == 1
    code, _, err = claw_here("query", "folder", "--store", str(store.root), cwd=tmp_path)
    assert (code, err) == (2, f"claw: error: {tmp_path / 'queries' / 'folder.sql'}: not a saved query (a directory)\n")
    code, _, err = claw_here("query", "foldr", "--store", str(store.root), cwd=tmp_path)
    assert code == 2 and "broken" in err and "folder" not in err, err
