"""`claw report --output json` folds its rows into the summaries as they stream and spills their JSON text: the same
bytes as the report held whole, in memory that does not grow with the rows."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from clawstore.cli.report_cmd import _indexed
from clawstore.report import data, text
from clawstore.report.data import build_report
from clawstore.report.text import JsonRows, json_chunks
from clawstore.store import Store
from tests.query.campaigns import Spec, build
from tests.support.fresh import measured_in_fresh_process

CASES = ["case_1", "case_2", "case_3", "case_4", "case_5"]
MODELS = ["openai/gpt-a", "anthropic/claude-b", "meta/llama-c"]


def _held(store: Store, campaign: str, **filters: tuple[str, ...]) -> str:
    """The report from the records alone (no manifest), its rows held: the JSON as json.dumps writes it."""
    report = build_report(store, campaign, **filters)
    assert report.rows or not report.models
    return json.dumps(report.to_json(), indent=2, sort_keys=True)


def _streamed(store: Store, campaign: str, **filters: tuple[str, ...]) -> str:
    manifest = _indexed(store, store.root, campaign)
    assert manifest is not None
    report = build_report(store, campaign, manifest=manifest, sink=JsonRows, **filters)
    assert report.rows == []  # (spilled)
    return "".join(json_chunks(report))


@pytest.mark.parametrize("spec", [
    Spec(models=MODELS, cases=CASES, repetitions=2, judge_reps=1, fail={("meta/llama-c", "case_3")}),
    Spec(models=MODELS, cases=CASES, repetitions=1, judge_reps=2),
    Spec(models=MODELS[:1], cases=CASES[:1], evaluation_profile=None),
], ids=["run-repetitions-and-a-failure", "judge-repetitions", "runs-only"])
def test_the_streamed_and_spilled_json_is_the_held_reports(tmp_path: Path, spec: Spec,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    build(store, spec)
    monkeypatch.setattr(text, "JSON_ROWS", 4)  # several spilled parts and a last short one
    expected = {name: _held(store, spec.campaign_id, **filters) for name, filters in _filters().items()}
    with monkeypatch.context() as patched:  # the streamed path: the head's parts are not read
        patched.setattr(data, "read_head_doc", lambda *_: pytest.fail("the whole head was read"))
        for name, filters in _filters().items():
            assert _streamed(store, spec.campaign_id, **filters) == expected[name], name
    found = json.loads(expected["all"])
    assert len(found["rows"]) == len(spec.models) * len(spec.cases)
    if spec.repetitions == 2:
        assert found["models"][0]["pass_k"] is not None  # pass@k folded from the streamed results
    if spec.judge_reps == 2 and spec.evaluation_profile:
        assert found["judge_reliability"]  # judges that repeat: their judgements read whole


def _filters() -> dict[str, dict[str, tuple[str, ...]]]:
    return {"all": {}, "a model": {"models": ("anthropic/claude-b",)}, "two cases": {"cases": ("case_2", "case_5")},
            "none": {"models": ("nobody",)}}


def _peak(store: Store, campaign: str, spill: bool) -> int:
    """Peak bytes Python allocated for the report and its JSON text (written away as it comes)."""
    manifest = _indexed(store, store.root, campaign)
    tracemalloc.start()
    try:
        report = build_report(store, campaign, manifest=manifest, sink=JsonRows if spill else None)
        for _ in json_chunks(report):
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def peaks_alone(root: str, campaign: str) -> tuple[int, int]:
    """The peaks of the report of the store at `root`, held and spilled, the nodes streamed 64 rows at a time and the
    JSON written 50 at a time. Called in a new interpreter (measured_in_fresh_process): in a test worker, what earlier
    tests left (their threads, their garbage's finalizers) would be counted too."""
    from clawstore.query import heads

    heads.STREAM_ROWS, text.JSON_ROWS = 64, 50
    store = Store(Path(root), create=False)
    try:
        _peak(store, campaign, True)  # (the manifest materialised first, its imports made)
        return _peak(store, campaign, False), _peak(store, campaign, True)
    finally:
        store.close()


def test_the_reports_memory_does_not_grow_with_its_rows(tmp_path: Path) -> None:
    """Five times the rows: the held report's peak grows with them; the spilled one's stays within a constant (the
    nodes streamed STREAM_ROWS at a time, the JSON written JSON_ROWS rows at a time, a model's doubles)."""
    peaks = {}
    for cases in (60, 300):
        store = Store(tmp_path / f"store-{cases}")
        spec = Spec(models=MODELS[:2], cases=[f"case_{i:04}" for i in range(cases)], judge_reps=1)
        build(store, spec)
        store.close()
        peaks[cases] = tuple(measured_in_fresh_process(peaks_alone, store.root, spec.campaign_id))
    (held_small, spilled_small), (held_large, spilled_large) = peaks[60], peaks[300]
    assert held_large > held_small + 4 * 120 * 1000, peaks  # the rows held: about 4.7 KB each (the test can fail)
    assert spilled_large < spilled_small + 150_000, peaks  # 480 rows more: ~300 bytes each at most, not 4.7 KB


def test_a_results_stream_that_fails_at_once_is_reported_from_the_full_path(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    spec = Spec(models=MODELS[:2], cases=CASES[:3], repetitions=2, judge_reps=1)
    store = Store(tmp_path / "store")
    build(store, spec)
    expected = _held(store, spec.campaign_id)
    streamed = data.streamed_rows

    def gone(manifest: Path, head_id: str, table: str, *rest: object) -> object:
        if table == "results":  # (another process's refresh removed the directory before this query)
            raise duckdb.IOException("No files found that match the pattern")
        return streamed(manifest, head_id, table, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(data, "streamed_rows", gone)
    assert _streamed(store, spec.campaign_id) == expected


@pytest.mark.parametrize("ranged", [False, True], ids=["one-range", "ranges-of-SORT_ROWS"])
def test_the_streams_sort_spills_past_its_bound_into_the_manifests_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      ranged: bool) -> None:
    """streamed_rows' sort holds SORT_MEMORY: a range of keys larger than that (400,000 rows, ~30 MB unsorted, made one
    range) is sorted by spilling to a directory under the manifest's tmp/ (seen while the rows stream, removed after),
    never to the working directory; sorted SORT_ROWS rows at a time, it needs no spill. Either way the rows come in the
    order asked for (rows alike in it, in the order stored)."""
    import duckdb

    from clawstore.query import heads

    monkeypatch.chdir(tmp_path)
    if not ranged:
        monkeypatch.setattr(heads, "SORT_ROWS", 10**9)
    manifest = tmp_path / "manifest"
    head = heads.heads_dir(manifest) / "ab"
    head.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(f"COPY (SELECT md5(CAST(i % 50000 AS VARCHAR)) AS model_id, md5(CAST(i * 7 AS VARCHAR)) AS case_id, "
                f"CAST(i AS INTEGER) AS repetition FROM range(400000) t(i)) TO '{head}/nodes.parquet' (FORMAT parquet)")
    expected = con.execute(f"SELECT model_id, repetition FROM '{head}/nodes.parquet' ORDER BY model_id, repetition"
                           ).fetchall()
    con.close()
    stream = heads.streamed_rows(manifest, "sha256:ab", "nodes", ["model_id", "case_id", "repetition"], ["model_id"])
    first = next(stream)
    spilled = [path.name for path in (manifest / "tmp").rglob("*") if path.is_file()]
    assert any(name.startswith("duckdb_temp") for name in spilled) != ranged, spilled  # (unbounded: in memory)
    got = [(first["model_id"], first["repetition"])] + [(row["model_id"], row["repetition"]) for row in stream]
    assert got == expected
    assert list((manifest / "tmp").iterdir()) == []
    assert list(tmp_path.iterdir()) == [manifest]
