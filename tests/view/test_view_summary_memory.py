"""What `claw view`'s summary holds a model × case row (issue 54): its JSON text up to its runs and its index by model
and case (view_data.SummaryRows), not a dict of it, and no case scores for a page of one campaign. Measured in a
fresh interpreter (a pytest worker's history inflates in-process figures), the difference of two sizes."""

from __future__ import annotations

from pathlib import Path

from clawstore.store import Store
from tests.query.campaigns import Spec, build
from tests.support.fresh import fresh_json

MODELS = ["openai/gpt-a", "anthropic/claude-b"]
SIZES = (60, 360)  # cases
# Python bytes the collected summary holds per model x case row (tracemalloc, the difference of the two sizes).
# Measured 2026-12-05: 933 bytes with each row a dict (and the index of them row_index built), 520 as its text (about
# 250 bytes of it) and an index entry (its key's strings, most of the rest).
HELD_PER_ROW_BOUND = 700


def _spec(cases: int) -> Spec:
    return Spec(models=MODELS, cases=[f"case_{i:04}" for i in range(cases)], judge_reps=1)


def _held(root: str) -> dict[str, int]:
    """Run in a fresh interpreter: the bytes each store's collected summary (and its row index) holds."""
    import gc
    import tracemalloc

    from clawstore.cli.report_cmd import _indexed
    from clawstore.report.view_data import collect, row_index

    out = {}
    tracemalloc.start()
    for cases in (3, *SIZES):  # (the first: imports and caches)
        store = Store(Path(root) / f"store-{cases}", create=False)
        manifest = _indexed(store, store.root, _spec(cases).campaign_id)
        data = collect(store, [_spec(cases).campaign_id], manifest=manifest)
        rows = row_index(data)
        assert len(rows) == cases * len(MODELS)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        del data, rows  # (what goes with them is what they held: not the store's caches, nor the imports')
        gc.collect()
        out[str(cases)] = held - tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return out


def test_the_summary_holds_each_row_as_its_text(tmp_path: Path) -> None:
    for cases in (3, *SIZES):
        build(Store(tmp_path / f"store-{cases}"), _spec(cases))
    held = fresh_json("tests.view.test_view_summary_memory", "_held", str(tmp_path))
    per_row = (held[str(SIZES[1])] - held[str(SIZES[0])]) / ((SIZES[1] - SIZES[0]) * len(MODELS))
    assert per_row < HELD_PER_ROW_BOUND, f"{per_row:.0f} bytes held per model x case row: {held}"


def test_a_report_that_starts_over_gives_the_summary_its_rows_once(tmp_path: Path, monkeypatch) -> None:
    """The nodes' stream failing mid-way (another process's refresh removed the directory): the report starts over on
    the full path, and the rows and case indexes the first try added are taken away again."""
    import duckdb

    from clawstore.cli.report_cmd import _indexed
    from clawstore.report import data as report_data
    from clawstore.report.view_data import collect
    from clawstore.report.view_page import _json_pieces

    spec = _spec(4)
    store = Store(tmp_path / "store")
    build(store, spec)
    manifest = _indexed(store, store.root, spec.campaign_id)
    expected = "".join(_json_pieces(collect(store, [spec.campaign_id, spec.campaign_id], manifest=manifest).summary))
    streamed = report_data.streamed_rows

    def failing(*args: object) -> object:
        def rows() -> object:
            for number, row in enumerate(streamed(*args)):  # type: ignore[arg-type]
                if number == 5 and args[2] == "nodes":
                    raise duckdb.IOException("No files found that match the pattern")
                yield row
        return rows()

    monkeypatch.setattr(report_data, "streamed_rows", failing)
    again = collect(store, [spec.campaign_id, spec.campaign_id], manifest=manifest)
    assert "".join(_json_pieces(again.summary)) == expected
    assert len(again.summary["rows"]) == 2 * 4 * len(MODELS)
