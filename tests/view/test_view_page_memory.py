"""Writing `claw view`'s page holds one summary row's JSON at a time, not the summary's and the page's whole text
(issue 54: ~3 x 11 MB at 10,000 x 5), and writes the same bytes as the summary encoded whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clawstore.report import view_page
from clawstore.report.view_page import Written, finish_page
from tests.support.fresh import measured_in_fresh_process

# Bytes Python may hold at the peak of writing a page of four times the rows (2,000 against 8,000, ~230 bytes of JSON
# each), beyond the summary itself. Measured 2026-12-05 at 20,000: +22.3 MB with the page made whole (its text and its
# bytes; ~1.2 KB a row: ~7 MB at 8,000), +0.0 MB a piece at a time. (20,000 rows until session 70.)
GROWTH_BOUND = 1_000_000
LARGE = 8_000


def _summary(rows: int) -> dict[str, Any]:
    """A page's summary with `rows` matrix rows as collect makes them (one model, `rows` cases)."""
    return {"campaigns": [{"id": "c", "run_cost_usd": 0.5, "untrusted": None}], "models": [{"model_id": "m"}],
            "cases": [f"case_{i:06d}" for i in range(rows)],
            "rows": [{"campaign": 0, "model_id": "vendor/model-a", "case": i, "score": i / 7, "passed": i % 2 == 0,
                      "status": "ok", "latency_s": 1.25 + i, "cost_usd": 0.000123 * i,
                      "cost_text": f"{i * 0.000123:.5f}",
                      "run_action": "exec", "eval_action": "exec", "problems": [], "runs": [i]} for i in range(rows)],
            "tags": {}, "judge_reliability": [], "paired": [{"note": "<b>&</b> é"}]}


def _peak_writing(folder: str) -> dict[str, int]:
    """Run in a fresh interpreter: the peak Python allocates while finish_page writes each size's page (the summary
    made first, not counted), and whether the page is the text of the summary encoded whole."""
    import tracemalloc

    out: dict[str, int] = {}
    for rows in (2_000, LARGE):
        summary = _summary(rows)
        path = Path(folder) / f"page-{rows}.html"
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        finish_page(summary, "claw view: <c>", path, "token", Written(0, 0, 0, 0))
        out[str(rows)] = tracemalloc.get_traced_memory()[1] - before
        tracemalloc.stop()
        whole = {**summary, "details": {"dir": path.name + ".d", "per": view_page.SHARD_RUNS, "token": "token",
                                        "runs": 0}, "title": "claw view: <c>"}
        text = path.read_text(encoding="utf-8")
        out[f"same-{rows}"] = int(view_page.page_json(whole) in text)
    return out


def test_the_page_is_written_a_piece_at_a_time(tmp_path: Path) -> None:
    measured = measured_in_fresh_process(_peak_writing, tmp_path)
    assert measured["same-2000"] and measured[f"same-{LARGE}"], measured
    grown = measured[str(LARGE)] - measured["2000"]
    assert grown < GROWTH_BOUND, f"writing the page held {grown / 1e6:.1f} MB more for four times the rows: {measured}"


def test_the_page_written_in_pieces_is_the_page_made_whole(tmp_path: Path) -> None:
    summary = _summary(3)
    finish_page(summary, "claw view: <c>", tmp_path / "page.html", "token", Written(0, 0, 0, 0))
    page = view_page._asset("view.html")
    whole = json.loads(json.dumps(summary))  # (a copy: finish_page adds its details to its own)
    whole.update(details={"dir": "page.html.d", "per": view_page.SHARD_RUNS, "token": "token", "runs": 0},
                 title="claw view: <c>")
    expected = view_page._MARKERS.sub(lambda m: {
        "/*CLAW_STYLE*/": view_page._asset("view.css"), "/*CLAW_SCRIPT*/": view_page._asset("view.js"),
        "CLAW_TITLE": "claw view: &lt;c&gt;", "CLAW_SUMMARY": view_page.page_json(whole)}[m.group(0)], page)
    assert (tmp_path / "page.html").read_bytes() == expected.encode("utf-8")
