"""`claw report`: tables, JSON and the PNG chart, from stored records only."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from clawstore.cli import main
from clawstore.query.manifest import index_pending, pending_builds
from clawstore.report.chart import bubble_areas
from clawstore.store import Store
from clawstore.store.headdoc import read_head_doc
from tests.query.campaigns import JUDGE_COST, RUN_COST, Spec, build, count_flattened, score_of
from tests.support.once import copied, made_once

MODELS = ["openai/gpt-a", "anthropic/claude-b"]


def write_configs(root: Path, models: list[str]) -> dict[str, Path]:
    """Minimal YAML in the seed's layout; report only ever reads the ID fields."""
    paths = {"suite": root / "configs/suites/suite_a.yaml", "run_profile": root / "configs/run_profiles/std.yaml",
             "evaluation_profile": root / "configs/evaluation_profiles/judge_x.yaml"}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    model_lines = "".join(f"    - model_id: {m}\n      requested_model: {m}\n" for m in models)
    paths["suite"].write_text(f"schema_version: 1\nsuite_id: suite_a\ntitle: A\nmodels:\n{model_lines}"
                              "case_selection:\n  include_case_ids: [case_1, case_2, case_3]\n")
    paths["run_profile"].write_text("schema_version: 1\nrun_profile_id: std\ntitle: Standard\n")
    paths["evaluation_profile"].write_text("schema_version: 1\nevaluation_profile_id: judge_x\ntitle: J\n")
    return paths


def report(store: Store, paths: dict[str, Path] | None, *extra: str, ids: bool = False) -> tuple[int, str, str]:
    if ids or paths is None:
        flags = ["--suite", "suite_a", "--run-profile", "std", "--evaluation-profile", "judge_x"]
    else:
        flags = ["--suite", str(paths["suite"]), "--run-profile", str(paths["run_profile"]),
                 "--evaluation-profile", str(paths["evaluation_profile"])]
    result = CliRunner().invoke(main, ["report", *flags, "--store", str(store.root), *extra])
    return result.exit_code, result.stdout, result.stderr


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    return struct.unpack(">II", data[16:24])


def _built(made: Path) -> None:
    build(Store(made / "store"), Spec(models=MODELS))


@pytest.fixture
def built(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Store:
    """A store holding the campaign of MODELS built (and indexed, as a query would): made once in the run
    (tests/support/once.py), a copy for each test."""
    copied(made_once(tmp_path_factory, "report-built", _built), tmp_path, "store")
    return Store(tmp_path / "store")


@pytest.fixture
def workspace(built: Store, tmp_path: Path) -> tuple[Store, dict[str, Path]]:
    return built, write_configs(tmp_path, MODELS)


def test_text_report_tables_and_chart(workspace: tuple[Store, dict[str, Path]], tmp_path: Path) -> None:
    store, paths = workspace
    chart = tmp_path / "charts" / "c.png"
    chart.parent.mkdir()
    code, out, err = report(store, paths, "--chart", str(chart))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Campaign: suite_a__std__judge_x"
    start = lines.index("Case Results")
    header = lines[start + 1].split()
    assert header[:6] == ["MODEL", "CASE", "REPS", "RUN", "EVAL", "SCORE"]
    assert header[-7:] == ["TOKENS_IN", "TOKENS_OUT", "LATENCY_S", "RUN_COST", "EVAL_COST", "TOTAL_COST", "STATUS"]
    rows = [ln.split() for ln in lines[start + 3:start + 9]]
    assert [(r[0], r[1]) for r in rows] == [(m, c) for m in sorted(MODELS) for c in ("case_1", "case_2", "case_3")]
    for row in rows:
        model, case, reps, run_action, eval_action, score = row[:6]
        _tok_in, _tok_out, _lat, run_cost, eval_cost, total, status = row[-7:]
        assert (reps, run_action, eval_action, status) == ("1", "exec", "exec", "ok")
        assert score == f"{score_of(model, case, 1):.2f}"
        assert float(run_cost) == RUN_COST and float(eval_cost) == pytest.approx(2 * JUDGE_COST)
        assert float(total) == pytest.approx(RUN_COST + 2 * JUDGE_COST)
    summary = lines.index("Model Summary")
    assert lines[summary + 1].split()[:4] == ["MODEL", "CASES", "SCORED", "MEAN_SCORE"]
    assert [ln.split()[0] for ln in lines[summary + 3:summary + 5]] == sorted(MODELS)
    assert png_size(chart) == (1000, 650)
    assert f"chart written to: {chart}" in err


def test_json_report_and_reuse_shows(workspace: tuple[Store, dict[str, Path]]) -> None:
    store, paths = workspace
    second = build(store, Spec(models=[*MODELS, "new/model-c"]))  # the old models' nodes are reused
    code, out, err = report(store, paths, "--output", "json", "--no-chart")
    assert code == 0, err
    data = json.loads(out)
    assert data["campaign"]["id"] == "suite_a__std__judge_x" and data["head"]["build_id"] == second.build_id
    assert len(data["rows"]) == 9
    actions = {r["model_id"]: (r["run_action"], r["eval_action"]) for r in data["rows"]}
    assert actions == {"openai/gpt-a": ("reuse", "reuse"), "anthropic/claude-b": ("reuse", "reuse"),
                       "new/model-c": ("exec", "exec")}
    models = {m["model_id"]: m for m in data["models"]}
    assert models["openai/gpt-a"]["cases"] == 3 and models["openai/gpt-a"]["runs_reused"] == 3
    assert models["new/model-c"]["runs_executed"] == 3
    # Costs are those of the results, reused ones included.
    assert data["totals"]["total_cost_usd"] == pytest.approx(9 * (RUN_COST + 2 * JUDGE_COST))


def test_report_survives_config_changes(workspace: tuple[Store, dict[str, Path]], tmp_path: Path) -> None:
    store, paths = workspace
    before = report(store, paths, "--output", "json", "--no-chart")[1]
    # The suite gains a model and loses required fields; the evaluation profile becomes invalid YAML
    # beyond its ID line. Nothing was rebuilt, so the report is the last build's, unchanged.
    paths["suite"].write_text("schema_version: 1\nsuite_id: suite_a\nmodels:\n  - model_id: x/new\n")
    paths["evaluation_profile"].write_text("evaluation_profile_id: judge_x\njudges: 12\n")
    paths["run_profile"].write_text("run_profile_id: std\nexecution_policy: {max_concurrency: -1}\n")
    code, after, err = report(store, paths, "--output", "json", "--no-chart")
    assert code == 0, err
    assert json.loads(after) == json.loads(before)
    assert report(store, None, "--output", "json", "--no-chart")[1] == before  # plain IDs too


def test_filters_and_failures(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    build(store, Spec(models=MODELS, fail={("openai/gpt-a", "case_2")}))
    code, out, err = report(store, None, "--model", "openai/gpt-a", "--no-chart")
    assert code == 0, err
    lines = out.splitlines()
    section = lines[lines.index("Case Results"):lines.index("Dimension Scores (0-10, mean of the final scores)")]
    rows = [ln.split() for ln in section if ln.startswith("openai/gpt-a  ")]
    assert [r[1] for r in rows] == ["case_1", "case_2", "case_3"]
    failed = next(r for r in rows if r[1] == "case_2")
    assert (failed[3], failed[4], failed[5], failed[-1]) == ("fail", "-", "n/a", "provider_error")
    assert "Problems (1)" in out and "HTTP 503" in out
    assert "anthropic/claude-b" not in out


def test_a_filter_that_matches_nothing_is_an_error_not_an_empty_report(built: Store) -> None:
    store = built
    for flags in (("--model", "openai/gpt-z"), ("--case", "case_9"), ("--model", "openai/gpt-a", "--case", "case_9")):
        for output in ("text", "json"):
            code, out, err = report(store, None, *flags, "--output", output, "--no-chart")
            assert (code, out) == (2, ""), (flags, output, out)
            assert err.strip().startswith("claw: error: no row of campaign ") and flags[-1] in err
    assert report(store, None, "--case", "case_1", "--no-chart")[0] == 0


def test_each_filter_value_that_matches_nothing_is_named_beside_ones_that_match(built: Store) -> None:
    store = built
    flags = ("--model", "openai/gpt-a", "--model", "openai/gpt-z", "--case", "case_1", "--case", "case_9")
    for output in ("text", "json"):
        code, out, err = report(store, None, *flags, "--output", output, "--no-chart")
        assert (code, out) == (2, ""), (output, out)
        assert err == "claw: error: no row of campaign suite_a__std__judge_x's last build matches --case case_9 " \
                      "--model openai/gpt-z (its cases: case_1, case_2, case_3; its models: anthropic/claude-b, " \
                      "openai/gpt-a)\n"
    code, out, err = report(store, None, "--model", "openai/gpt-a", "--model", "anthropic/claude-b", "--no-chart")
    assert code == 0 and "openai/gpt-a" in out and "anthropic/claude-b" in out, err


def test_a_chart_into_a_folder_not_there_is_refused_before_the_report_as_other_outputs_are(
        workspace: tuple[Store, dict[str, Path]], tmp_path: Path) -> None:
    store, paths = workspace
    chart = tmp_path / "typo" / "c.png"
    code, out, err = report(store, paths, "--chart", str(chart))
    assert (code, out, err) == (2, "", f"claw: error: --chart {chart}: directory {chart.parent} does not exist\n")
    assert not chart.parent.exists()
    (tmp_path / "file").write_text("x")
    code, out, err = report(store, paths, "--chart", str(tmp_path / "file" / "c.png"))
    assert (code, out) == (2, "") and "is a file, not a directory" in err


def test_runs_only_campaign_has_no_chart(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    build(store, Spec(models=MODELS, evaluation_profile=None))
    result = CliRunner().invoke(main, ["report", "--suite", "suite_a", "--run-profile", "std", "--store",
                                       str(store.root), "--chart", str(tmp_path / "c.png")])
    assert result.exit_code == 0, result.stderr
    assert "Campaign: suite_a__std__none" in result.stdout
    assert "no model in this campaign has a final score" in result.stderr
    assert not (tmp_path / "c.png").exists()
    assert "Model Statistics" not in result.stdout  # no score, no verdict: no interval to show


def test_unknown_campaign_and_bad_flag_path_exit_2(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", "report", "--suite", "nope", "--run-profile", "std",
                           "--store", str(store.root)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "campaign nope__std__none has never been built" in proc.stderr
    bad = tmp_path / "s.yaml"
    bad.write_text("title: no id here\n")
    result = CliRunner().invoke(main, ["report", "--suite", str(bad), "--run-profile", "std",
                                       "--store", str(store.root)])
    assert result.exit_code == 2 and f"{bad}: suite_id: missing" in result.stderr


# `claw` (cli.entry) with ChartBeside noting in the file argv[1] whether it forked its drawer.
_PROGRAM_NOTING_ITS_DRAWER = """
import sys
from pathlib import Path
from clawstore.report import chart_beside
said = Path(sys.argv.pop(1))
made = chart_beside.ChartBeside.__init__
def noted(self, fork=True):
    made(self, fork)
    said.write_text(str(self._pid is not None))
chart_beside.ChartBeside.__init__ = noted
sys.argv[0] = "claw"
from clawstore.cli import entry
entry()
"""


def test_default_chart_path_in_a_real_process(workspace: tuple[Store, dict[str, Path]], tmp_path: Path) -> None:
    store, _ = workspace
    said = tmp_path / "forked"  # (the `claw` program draws its chart in a forked process: report/chart_beside.py)
    code = _PROGRAM_NOTING_ITS_DRAWER
    proc = subprocess.run([sys.executable, "-c", code, str(said), "report", "--suite", "suite_a", "--run-profile",
                           "std", "--evaluation-profile", "judge_x", "--store", str(store.root)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert png_size(tmp_path / "outputs/charts/judge_x/score_cost.png") == (1000, 650)
    assert said.read_text() == "True"


def test_a_real_process_forks_no_drawer_for_a_campaign_without_an_evaluation_profile(tmp_path: Path) -> None:
    """No evaluation profile, no result node, no score: the chart is refused before matplotlib is imported, so a drawer
    forked to import it (~0.5 s of CPU) was spent for nothing."""
    store = Store(tmp_path / "store")
    build(store, Spec(models=MODELS, evaluation_profile=None))
    said = tmp_path / "forked"
    proc = subprocess.run([sys.executable, "-c", _PROGRAM_NOTING_ITS_DRAWER, str(said), "report", "--suite", "suite_a",
                           "--run-profile", "std", "--store", str(store.root)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Campaign: suite_a__std__none" in proc.stdout
    assert "claw: warning: no model in this campaign has a final score: chart not written" in proc.stderr
    assert said.read_text() == "False"


def test_bubble_areas() -> None:
    assert bubble_areas([1.0, 3.0, None]) == [90.0, 520.0, 305.0]
    assert bubble_areas([2.0, 2.0]) == [305.0, 305.0]


def test_head_without_embedded_records_reads_them_from_the_store(workspace: tuple[Store, dict[str, Path]]) -> None:
    store, paths = workspace
    before = json.loads(report(store, paths, "--output", "json", "--no-chart")[1])
    ref = "campaigns/suite_a__std__judge_x"
    head = read_head_doc(store, store.get_ref(ref))  # (its nodes inline: rewritten below as heads once were)
    assert all("record_doc" in n for n in head["nodes"])
    bare = {**head, "nodes": [{k: v for k, v in n.items() if k != "record_doc"} for n in head["nodes"]]}
    store.set_ref(ref, store.put_json(bare))
    after = json.loads(report(store, paths, "--output", "json", "--no-chart")[1])
    assert after["head"]["object"] != before["head"]["object"]
    assert after["rows"] == before["rows"] and after["models"] == before["models"]


def test_a_report_reads_the_rows_a_query_materialised(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    store, paths = workspace
    build(store, Spec(models=[*MODELS, "new/model-c"]), refresh=False)  # a build no query indexed yet
    manifest = store.root / "manifest"
    shutil.rmtree(manifest)
    flattened = count_flattened(monkeypatch)
    expected = report(store, paths, "--output", "json", "--no-chart")
    assert expected[0] == 0, expected[2]
    assert manifest.is_dir() and flattened  # the report materialised its head
    flattened.clear()
    assert report(store, paths, "--output", "json", "--no-chart") == expected
    assert not flattened  # read back from the head the query materialised: no record flattened
    # The same report from the records alone, with no manifest to read.
    shutil.rmtree(manifest)
    manifest.write_text("not a directory: the manifest cannot be written")
    code, out, err = report(store, paths, "--output", "json", "--no-chart")
    assert (code, out) == expected[:2] and "reading the records instead" in err and len(flattened) == 45


def test_a_report_after_builds_no_query_indexed_materialises_its_head_alone(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexing every build since the last query costs a copy of the campaign per build (on a campaign of
    40,000 nodes, 43 s after nine builds); the report needs one head, copied from the previous one."""
    store, paths = workspace  # built, and indexed as a query would
    for salt in ("edit-1", "edit-2", "edit-3"):  # three rubric edits, each judging again; no query
        build(store, Spec(models=MODELS, salt=salt), refresh=False)
    waiting = pending_builds(store)
    assert len(waiting) == 3
    flattened = count_flattened(monkeypatch)
    code, out, err = report(store, paths, "--output", "json", "--no-chart")
    assert code == 0, err
    assert pending_builds(store) == waiting  # the history is left to `claw query`
    head = read_head_doc(store, store.get_ref("campaigns/suite_a__std__judge_x"))
    judged = [n["key"] for n in head["nodes"] if n["kind"] != "run"]  # (the fixture's salt is in their keys)
    assert sorted(flattened) == sorted(judged)  # what the last edit changed, once; the runs copied

    index_pending(store)  # a query later indexes the builds, and shows the same head
    assert pending_builds(store) == []
    flattened.clear()
    assert report(store, paths, "--output", "json", "--no-chart") == (code, out, err) and not flattened
    shutil.rmtree(store.root / "manifest")  # the same report from the records alone
    (store.root / "manifest").write_text("not a directory: the manifest cannot be written")
    assert report(store, paths, "--output", "json", "--no-chart")[:2] == (code, out)


def test_a_report_materialises_its_own_campaigns_head_and_no_other(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """After a pull of campaigns a team built elsewhere, the first report of one flattened every one of
    them; it needs its own head only, and leaves the others to the next query."""
    store, paths = workspace  # indexed, as a query would
    heads = store.root / "manifest" / "heads"
    before = json.loads((heads / "current.json").read_text())["campaigns"]["suite_a__std__judge_x"]
    other = Spec(suite="suite_b", models=MODELS)
    build(store, other, refresh=False)  # another campaign (pulled, say): no query has seen it
    build(store, Spec(models=MODELS, salt="edit-1"), refresh=False)  # and a rubric edit of this one
    flattened = count_flattened(monkeypatch)
    code, out, err = report(store, paths, "--output", "json", "--no-chart")
    assert code == 0, err
    head = read_head_doc(store, store.get_ref("campaigns/suite_a__std__judge_x"))
    assert sorted(flattened) == sorted(n["key"] for n in head["nodes"] if n["kind"] != "run")
    current = json.loads((store.root / "manifest" / "heads" / "current.json").read_text())["campaigns"]
    assert set(current) == {"suite_a__std__judge_x"}  # the other campaign's head waits for a query
    assert current["suite_a__std__judge_x"] == store.get_ref("campaigns/suite_a__std__judge_x").split(":")[-1]
    # the head it replaces is removed (reports between two queries would otherwise pile up copies)
    assert sorted(p.name for p in heads.iterdir() if p.is_dir()) == [current["suite_a__std__judge_x"]] != [before]

    index_pending(store)  # which materialises it (and keeps this report's head)
    current = json.loads((store.root / "manifest" / "heads" / "current.json").read_text())["campaigns"]
    assert set(current) == {"suite_a__std__judge_x", other.campaign_id}
    flattened.clear()
    assert report(store, paths, "--output", "json", "--no-chart") == (code, out, err) and not flattened


def test_a_forged_current_json_never_names_a_directory_for_the_report_to_remove(
        workspace: tuple[Store, dict[str, Path]]) -> None:
    store, paths = workspace
    victim = store.root / "victim"
    victim.mkdir()
    (victim / "keep").write_text("kept")
    current = store.root / "manifest" / "heads" / "current.json"
    doc = json.loads(current.read_text())
    doc["campaigns"]["suite_a__std__judge_x"] = "../../victim"  # the head a report replaces, forged
    current.write_text(json.dumps(doc))
    build(store, Spec(models=MODELS, salt="edit-1"), refresh=False)
    code, _, err = report(store, paths, "--output", "json", "--no-chart")
    assert code == 0, err
    assert (victim / "keep").read_text() == "kept"


def test_rows_another_flattening_materialised_are_not_read_back(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.query import rows

    store, paths = workspace
    expected = report(store, paths, "--output", "json", "--no-chart")
    monkeypatch.setattr(rows, "_CODE_TAG", b"rows.py as changed by an upgrade")
    flattened = count_flattened(monkeypatch)
    assert report(store, paths, "--output", "json", "--no-chart") == expected
    assert len(flattened) == 30  # the head's files hold the rows of the older flattening: not used


def _head_dir(store: Store) -> Path:
    head = store.get_ref("campaigns/suite_a__std__judge_x").split(":")[-1]
    return store.root / "manifest" / "heads" / head


def _records_alone(store: Store, paths: dict[str, Path]) -> tuple[int, str]:
    """The report with no manifest to read: every record flattened (the manifest is put back after)."""
    manifest = store.root / "manifest"
    manifest.rename(store.root / "manifest.aside")
    manifest.write_text("not a directory: the manifest cannot be written")
    try:
        code, out, _ = report(store, paths, "--output", "json", "--no-chart")
    finally:
        manifest.unlink()
        (store.root / "manifest.aside").rename(manifest)
    return code, out


def test_a_stamped_head_is_reported_without_reading_its_parts_and_the_same_as_from_the_records(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    from clawstore.report import data

    store, paths = workspace
    expected = _records_alone(store, paths)
    assert expected[0] == 0
    stamp = _head_dir(store) / "rows.json"
    assert stamp.is_file()  # published with the head's rows
    flattened = count_flattened(monkeypatch)
    with monkeypatch.context() as patched:  # the head's parts and signatures are not read
        patched.setattr(data, "read_head_doc", lambda *_: pytest.fail("the whole head was read"))
        assert report(store, paths, "--output", "json", "--no-chart")[:2] == expected
    assert not flattened
    stamp.unlink()  # a directory an older claw published: every signature checked, then stamped
    assert report(store, paths, "--output", "json", "--no-chart")[:2] == expected
    assert stamp.is_file() and not flattened


def test_a_head_directory_that_does_not_match_its_stamp_is_not_trusted(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    from clawstore.report import data

    store, paths = workspace
    expected = _records_alone(store, paths)
    directory = _head_dir(store)
    stamp, nodes = directory / "rows.json", directory / "nodes.parquet"
    good = stamp.read_bytes()
    whole: list[str] = []
    read_whole = data.read_head_doc
    monkeypatch.setattr(data, "read_head_doc", lambda store, head: whole.append(head) or read_whole(store, head))
    flattened = count_flattened(monkeypatch)
    for damage in ("another head's stamp", "a stamp not JSON", "a node row lost"):
        stamp.write_bytes(good)
        if damage == "another head's stamp":
            stamp.write_bytes(good.replace(directory.name.encode(), b"0" * len(directory.name)))
        elif damage == "a stamp not JSON":
            stamp.write_bytes(b"{")
        else:
            kept = directory / "kept.parquet"
            nodes.rename(kept)
            duckdb.sql(f"COPY (SELECT * FROM read_parquet('{kept}') OFFSET 1) TO '{nodes}' (FORMAT parquet)")
            kept.unlink()
        whole.clear()
        flattened.clear()
        assert report(store, paths, "--output", "json", "--no-chart")[:2] == expected, damage
        assert whole, damage  # the head read whole, each signature checked against the files
        # (the rows of a stamp damaged alone are the head's; a row lost: flattened from the records)
        assert bool(flattened) == (damage == "a node row lost"), damage


def test_the_json_written_in_chunks_is_the_json_of_the_whole_report(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from clawstore.report import text
    from clawstore.report.data import build_report

    store, _ = workspace
    whole = build_report(store, "suite_a__std__judge_x")
    first = whole.rows[0]
    whole.rows[0] = replace(first, case_id='case "ü"\n{x}', problems=["run rep 0: failed (é: \\n)"])
    monkeypatch.setattr(text, "JSON_ROWS", 4)  # 6 rows: a full batch and a part
    for report_ in (whole, replace(whole, rows=whole.rows[:1]), replace(whole, rows=[])):
        assert "".join(text.json_chunks(report_)) == json.dumps(report_.to_json(), indent=2, sort_keys=True)



def test_the_c_encoders_indented_text_is_the_python_encoders() -> None:
    """json_chunks writes rows with text.indented (the C encoder, then msgspec's formatter): the same text as the
    pure-Python encoder that `indent` takes, for whatever a row may hold, hostile text, what msgspec refuses (NaN, a
    lone surrogate) and odd keys too."""
    import random
    import uuid

    from clawstore.report.text import indented

    encoder = json.JSONEncoder(indent=2, sort_keys=True)
    rnd = random.Random(54)
    scalars = [None, True, False, 0, -3, 2**70, 1.5, -0.0, float("nan"), float("-inf"), 1e-7,
               'é"\\\n</script>\ud800😀', f"{uuid.uuid4().hex}0", f'"{uuid.uuid4().hex}1"']

    def value(depth: int) -> object:
        if depth > 3 or rnd.random() < 0.5:
            return rnd.choice(scalars)
        return rnd.choice([
            lambda: {rnd.choice(["a", "b", "é", uuid.uuid4().hex, "Z"]) + str(i): value(depth + 1) for i in range(4)},
            lambda: [value(depth + 1) for _ in range(rnd.randrange(4))],
            lambda: tuple(value(depth + 1) for _ in range(rnd.randrange(3))),
            lambda: {1: "int key", 2.5: None, 3: [1]},
            lambda: {}])()

    for _ in range(3000):
        found = value(0)
        for indent in ("", "    "):
            assert indented(found, indent) == encoder.encode(found).replace("\n", "\n" + indent), found

def test_a_head_directory_removed_while_its_nodes_stream_is_reported_from_the_full_path(
        workspace: tuple[Store, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    from clawstore.query import heads
    from clawstore.report import data

    store, paths = workspace
    expected = report(store, paths, "--output", "json", "--no-chart")
    streamed = heads.streamed_rows

    def cut_short(*args: object) -> object:  # (another process's refresh removes the directory meanwhile)
        yield from list(streamed(*args))[:3]  # type: ignore[arg-type]
        raise duckdb.IOException("No files found that match the pattern")

    monkeypatch.setattr(data, "streamed_rows", cut_short)
    whole: list[str] = []
    read_whole = data.read_head_doc
    monkeypatch.setattr(data, "read_head_doc", lambda store, head: whole.append(head) or read_whole(store, head))
    assert report(store, paths, "--output", "json", "--no-chart") == expected
    assert whole  # started over: the head read whole


def test_a_rows_status_and_costs_folded_in_one_pass_are_read_as_before() -> None:
    """report/data.py `_row` reads a row's nodes in one pass: a run's bad status still shows before a result's
    whatever their order, an unknown cost is never 0, and costs add up in the order given (the same float sum as
    CostSum.total of each node's CostSum.of)."""
    from clawstore.report.data import _row
    from clawstore.values.costs import CostSum

    def node(kind: str, status: str | None, cost: object = None, source: str | None = None, **more: object) -> dict:
        return {"kind": kind, "status": status, "action": "exec", "repetition": 0, "judge_run_id": "j",
                "judge_repetition": 0, "error_code": None, "error_message": None, "cost_usd": cost,
                "cost_source": source, "cost_known_usd": 0.0, "latency_s": None, "input_tokens": None,
                "output_tokens": None, "input_tokens_known": 0, "output_tokens_known": 0, **more}

    costs = [(0.1, "reported"), (0.2, "priced"), (None, "reported"), ("x", "odd"), (0.7, "odd")]
    nodes = [node("result", "failed"), node("judge", "success", 0.3, "reported"),
             *(node("run", "provider_error" if at == 2 else "success", cost, source, repetition=at)
               for at, (cost, source) in enumerate(costs))]
    row = _row("m", "c", nodes, [])
    assert row.status == "provider_error"  # (the run's, listed after the result's "failed")
    assert row.run_cost == CostSum.total(CostSum.of(cost, source) for cost, source in costs)
    assert (row.run_cost.reported, row.run_cost.priced, row.run_cost.unknown, row.run_cost.usd) == (2, 1, 2, None)
    assert row.eval_cost == CostSum.of(0.3, "reported") and row.repetitions == 5
    assert _row("m", "c", [node("result", "failed"), node("run", "success")], []).status == "failed"
