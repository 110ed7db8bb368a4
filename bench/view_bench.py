"""Benchmark `claw view` on a large campaign: page size, time to write it, time to first paint.

    python bench/view_bench.py [--runs 10000] [--models 20]

A real Store receives one build of `--runs` runs (models x cases), each with a realistic artifact
(system and user messages, a tool call and its result, the final answer), two deterministic checks,
two judge repetitions with reasoning per dimension, and a result: records, action-cache entries, the
build log and the campaign head, as the build layer writes them (no provider: setup, not measured).

Measured, each next to a baseline from the same run:
1. writing: `claw view` as a subprocess, next to `claw report --output json` of the same campaign
   (both read the head and every record; the view also reads each run's artifact, checks and judgements);
2. size: the page in MB and per run, next to the report JSON, and the detail shards beside it;
3. opening, in headless Chromium (Debian's chromium + chromium-driver via Selenium): first contentful
   paint and the moment the leaderboard is rendered (`performance.mark("claw-rendered")`), next to the
   first paint of a page without data (the browser's own floor); then opening one run page (its shard of
   details loaded from the folder beside the page). Target: the leaderboard within 2 s. Median of 3 loads,
   each in a fresh tab state.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clawstore.builder.buildlog import BuildLog  # noqa: E402
from clawstore.graph.records import make_record  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.buildlogs import read_build_log  # noqa: E402
from clawstore.values.clock import utc_now  # noqa: E402

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
CAMPAIGN = {"id": "bench__std__judge", "suite_id": "bench", "run_profile_id": "std",
            "evaluation_profile_id": "judge"}
FLAGS = ["--suite", "bench", "--run-profile", "std", "--evaluation-profile", "judge"]
ANSWER = ("The file was written and read back. It contains the requested line, and `wc -c` reports "
          "its size in bytes, which matches what was written. ") * 2


def _logged(log: BuildLog) -> int:
    """How many nodes a build's log lists (as sealed: a running log keeps them in its journal)."""
    return len(read_build_log(log.path).nodes)


def _metrics(cost: float, latency: float, tokens: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    return {"input_tokens": tokens[0], "output_tokens": tokens[1], "reasoning_tokens": 0, "cached_tokens": 0,
            "cost_usd": cost, "latency_s": latency}


def _trace(i: int) -> list[dict[str, Any]]:
    now = utc_now()
    events: list[dict[str, Any]] = [
        {"event_type": "message", "role": "system", "content": "Use the tools; answer briefly."},
        {"event_type": "message", "role": "user", "content": f"Task {i}: write line {i} to /tmp/out.txt, "
                                                                  "read it back and report its size."},
        {"event_type": "tool_call", "call_id": f"call_{i}", "tool_name": "write_file",
         "parsed_arguments": {"path": "/tmp/out.txt", "content": f"line {i}"}},
        {"event_type": "tool_result", "call_id": f"call_{i}", "status": "success",
         "output": {"path": "/tmp/out.txt", "bytes_written": len(f"line {i}")}},
        {"event_type": "message", "role": "assistant", "content": ANSWER},
        {"event_type": "final_output", "content": ANSWER},
    ]
    for n, event in enumerate(events):
        event.update(sequence=n, timestamp=now, metadata={})
    return events


def write_campaign(store: Store, runs: int, models: int) -> BuildLog:
    log = BuildLog(store, CAMPAIGN)
    log.write()
    now = utc_now()
    common = {"status": "success", "cacheable": True, "error": None, "started_at": now, "finished_at": now,
              "build_id": log.build_id}

    def node(kind: str, key: str, address: dict[str, Any], outputs: dict[str, Any], metrics: dict[str, Any],
             summary: dict[str, Any]) -> None:
        record = make_record(kind=kind, key=key, address=address, outputs={"input_document": key, **outputs},
                             metrics=metrics, summary=summary, **common)
        log.add(kind, key, store.put_action(key, record), "exec", address, record)

    with store.batch():
        for i in range(runs):
            model, case = f"vendor{i % models}/model-{i % models}", f"case_{i // models:05d}"
            address = {"model_id": model, "case_id": case, "repetition": 0}
            score = round(1 + (i * 37 % 90) / 10, 1)
            run_key = store.put_json({"kind": "run", **address})
            artifact = store.put_json({"identity": {"case_id": case}, "status": "success", "trace": _trace(i)})
            node("run", run_key, address, {"artifact": artifact}, _metrics(0.001 + (i % 7) / 1000, 1.0 + i % 5,
                                                                            (420, 95)),
                 {**address, "requested_model": model, "runner_type": "llm_probe", "error_code": None,
                  "error_message": None})
            checks = [{"check_id": "answered", "kind": "final_response_present", "outcome": "passed",
                       "message": "final response present", "dimensions": ["task"]},
                      {"check_id": "file-written", "kind": "file_contains",
                       "outcome": "passed" if i % 4 else "failed", "message": "file /tmp/out.txt checked",
                       "dimensions": ["process"]}]
            checks_key = store.put_json({"kind": "checks", "run": run_key})
            node("checks", checks_key, address, {"checks": store.put_json({"checks": checks})},
                 _metrics(0.0, 0.01), {"run_key": run_key, **address, "checks": checks})
            for rep in range(2):
                jaddr = {**address, "judge_run_id": "main", "judge_repetition": rep}
                body = {"scores": {"overall_score": score, "summary": f"Judged run {i}: grounded in the tool results.",
                                   "overall_evidence": ["the reply quotes the tool result"],
                                   "dimensions": {d: score for d in DIMS},
                                   "evidence": {d: [f"{d}: consistent with the trace"] for d in DIMS}}}
                judge_key = store.put_json({"kind": "judge", "run": run_key, "rep": rep})
                node("judge", judge_key, jaddr, {"judgement": store.put_json(body)}, _metrics(0.0004, 0.8, (900, 160)),
                     {"run_key": run_key, **jaddr, "judge_id": "j", "judge_model": "openai/gpt-4o-mini",
                      "overall_score": score, "dimensions": {d: score for d in DIMS}})
            result_key = store.put_json({"kind": "result", "run": run_key})
            node("result", result_key, address, {}, _metrics(0.0, 0.0),
                 {"run_key": run_key, **address, "final_score": score, "final_dimensions": {d: score for d in DIMS},
                  "passed": score >= 5, "aggregation_method": "median", "pass_threshold": 0.5,
                  "judge_iterations": 2, "judge_successful": 2, "checks_total": 2,
                  "checks_passed": 2 - (i % 4 == 0), "checks_failed": int(i % 4 == 0)})
    log.finish("complete")
    log.advance_head(None)
    return log


def claw(store: Path, *args: str) -> tuple[float, str]:
    env = {**os.environ, "CLAW_STORE": str(store)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "clawstore.cli", *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"claw {' '.join(args)} exited {proc.returncode}: {proc.stderr[-800:]}")
    return elapsed, proc.stdout


def browser_figures(page: Path, empty: Path) -> dict[str, float]:
    from tests.support.browser import start_chromium

    profile = Path(tempfile.mkdtemp(prefix="claw-bench-chromium-"))
    driver = start_chromium(profile)
    fcp_js = "return performance.getEntriesByName('first-contentful-paint').map(e => e.startTime)[0] || null"
    try:
        def load(url: str, mark: bool) -> tuple[float, float | None]:
            driver.get("about:blank")
            driver.get(url)
            fcp = driver.execute_script(fcp_js)
            deadline = time.monotonic() + 10
            while fcp is None and time.monotonic() < deadline:  # the paint entry lands just after load
                time.sleep(0.02)
                fcp = driver.execute_script(fcp_js)
            rendered = driver.execute_script(
                "return performance.getEntriesByName('claw-rendered').map(e => e.startTime)[0] || null") \
                if mark else None
            return float(fcp or "nan"), rendered

        floor = statistics.median(load(empty.as_uri(), False)[0] for _ in range(3))
        loads = [load(page.as_uri(), True) for _ in range(3)]
        first = driver.find_element("css selector", "#leaderboard tbody tr")
        assert first is not None
        run_times = []
        for n in range(3):
            target = driver.execute_script(
                "const r = JSON.parse(document.getElementById('claw-summary').textContent).rows;"
                f"const x = r[Math.floor(r.length * {n + 1} / 4)];"
                "return '#case/' + encodeURIComponent(JSON.parse(document.getElementById('claw-summary')"
                ".textContent).cases[x.case]) + '/model/' + encodeURIComponent(x.model_id);")
            started = time.perf_counter()
            driver.execute_script("location.hash = arguments[0]", target)
            while not driver.find_elements("id", "run-title"):
                time.sleep(0.005)
            run_times.append(time.perf_counter() - started)
            driver.execute_script("location.hash = '#leaderboard'")
        return {"floor_ms": floor, "fcp_ms": statistics.median(f for f, _ in loads),
                "rendered_ms": statistics.median(r for _, r in loads if r is not None),
                "run_page_ms": 1000 * statistics.median(run_times)}
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="claw-view-bench-") as tmp:
        root = Path(tmp)
        store = Store(root / "store")
        started = time.perf_counter()
        log = write_campaign(store, args.runs, args.models)
        print(f"wrote a build of {args.runs} runs ({_logged(log)} nodes, artifacts, checks, judgements) "
              f"in {time.perf_counter() - started:.1f} s (setup, not measured)")
        page = root / "view.html"
        report_s, report_json = claw(store.root, "report", *FLAGS, "--output", "json", "--no-chart")
        view_s, _ = claw(store.root, "view", *FLAGS, "--out", str(page))
        size = page.stat().st_size
        packed = len(gzip.compress(page.read_bytes(), 6))
        shards = list(page.with_name(page.name + ".d").glob("details-*.js"))
        details = sum(f.stat().st_size for f in shards)
        print(f"claw view ({args.runs} runs): {view_s:.2f} s to write = {view_s / report_s:.2f}x "
              f"claw report --output json ({report_s:.2f} s)")
        print(f"page size: {size / 1e6:.1f} MB ({size / args.runs / 1e3:.2f} kB per run; gzip {packed / 1e6:.2f} MB) "
              f"= {size / len(report_json.encode()):.1f}x the report JSON ({len(report_json.encode()) / 1e6:.1f} MB); "
              f"run details beside it: {details / 1e6:.1f} MB in {len(shards)} shards "
              f"({details / args.runs / 1e3:.2f} kB per run, {details / max(len(shards), 1) / 1e3:.0f} kB per shard)")
        from tests.support.browser import chromium_available

        if args.no_browser or not chromium_available():
            print("headless Chromium: skipped (--no-browser, or chromium/chromium-driver not installed)")
            return
        empty = root / "empty.html"
        empty.write_text("<!DOCTYPE html><html><body><h1>empty page</h1></body></html>")
        figures = browser_figures(page, empty)
        print(f"headless Chromium, median of 3 loads: first contentful paint {figures['fcp_ms']:.0f} ms, "
              f"leaderboard rendered {figures['rendered_ms']:.0f} ms (target 2000 ms) = "
              f"{figures['rendered_ms'] / figures['floor_ms']:.1f}x the first paint of an empty page "
              f"({figures['floor_ms']:.0f} ms)")
        print(f"opening one run page (its shard loaded on demand): median {figures['run_page_ms']:.0f} ms")


if __name__ == "__main__":
    main()
