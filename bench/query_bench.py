"""Benchmark the manifest: refresh after a 10,000-node build, and the leaderboard over 1,000,000 results.

    python bench/query_bench.py [--results 1000000] [--per-build 10000] [--nodes 10000] [--dir DIR]
                                [--only refresh|leaderboard|output] [--rows 3000000] [--small-rows 30000]
                                [--pairs 1] [--against TREE] [--rounds N]

What is measured:
1. refresh: a real Store receives a build of `--nodes` nodes (runs, checks, two judge repetitions and a
   result per run) as real records and action-cache entries with a real build log; the timer covers only
   `refresh_manifest(store, build_id)`: reading the log, reading and verifying every record object,
   flattening, writing the Parquet segment and publishing it; then materialising the campaign head
   (`refresh_heads`) on its own; then both as a query's first indexing does them (`index_pending`: the
   head the build wrote takes its rows and files), next to the sum of the two on their own. Then a second
   build of the campaign that changes one run (its 5 nodes executed, every other node reused), indexed by
   a query's `index_pending`: the reused nodes' rows copied from the campaign's previous head
   (query/copied.py), against the same indexing with copying turned off (every record read and
   flattened, as before copying existed), taking turns, median of 3 each (`--rounds`). Then two more such builds, and
   what `claw report` indexes before it reads its head (`index_heads`: the current head alone, copied from
   the previous one) and what `claw query` of the plain views indexes (`index_current`: every campaign's
   current head) against indexing every pending build first (`index_pending`, what a query of a history
   view does), taking turns.
2. leaderboard: `--results` result rows (plus their runs) are indexed through the same code a build's
   refresh uses (`rows_for_build` on build-log-shaped documents and records, then `publish_segment` and
   the automatic compaction), but the records are held in memory instead of being written as 2M store
   objects; each build is its own campaign, whose head holds the same rows (what the plain views read).
   The timer covers `run_query(store, leaderboard.sql)` exactly as `claw query leaderboard` runs
   it (fresh in-memory DuckDB, views over the Parquet files, result materialised and fetched), against
   the same SQL on plain in-memory DuckDB tables holding the same rows. Median of 5 runs each (`--rounds`).
3. output: `claw query` printing `--rows` generated rows (an integer and a short text) as csv, json and
   table to /dev/null, a real process each: its max RSS (wait4) and wall, beside the same at `--small-rows` and
   `select 1`. Streamed, the three RSS figures are about the same (docs/scale/query.md). `--against` another
   tree (main's worktree) runs that tree's claw in turns with this one's, `--pairs` times.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clawstore.builder.buildlog import BuildLog  # noqa: E402
from clawstore.graph.records import make_record  # noqa: E402
from clawstore.query import copied, heads, segments  # noqa: E402
from clawstore.query.engine import run_query  # noqa: E402
from clawstore.query.manifest import (  # noqa: E402
    compact_manifest,
    index_current,
    index_heads,
    index_pending,
    refresh_manifest,
)
from clawstore.query.rows import rows_for_build  # noqa: E402
from clawstore.query.schema import HISTORY_VIEW  # noqa: E402
from clawstore.query.stats_sql import create_stats_macros  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.buildlogs import read_build_log  # noqa: E402
from clawstore.values.clock import utc_now  # noqa: E402

DIMS = ("task", "process", "autonomy", "closeness", "efficiency", "spark")
MODELS = [f"vendor{i}/model-{i}" for i in range(20)]
CAMPAIGN = {"id": "bench__std__judge", "suite_id": "bench", "run_profile_id": "std",
            "evaluation_profile_id": "judge"}


def _logged(log: BuildLog) -> int:
    """How many nodes a build's log lists (as sealed: a running log keeps them in its journal)."""
    return len(read_build_log(log.path).nodes)


def _metrics(cost: float, latency: float) -> dict[str, Any]:
    return {"input_tokens": 120, "output_tokens": 40, "reasoning_tokens": 0, "cached_tokens": 0,
            "cost_usd": cost, "latency_s": latency}


def _records_for_run(i: int, build_id: str, key: Callable[[str], str], judges: int) -> list[tuple[str, str, dict]]:
    """(kind, key, record) of one run and its evaluation nodes, shaped as the build layer writes them."""
    model, case = MODELS[i % len(MODELS)], f"case_{i // len(MODELS):06d}"
    address = {"model_id": model, "case_id": case, "repetition": 0}
    now = utc_now()
    common = {"status": "success", "cacheable": True, "error": None, "started_at": now, "finished_at": now,
              "build_id": build_id}
    run_key = key(f"run/{i}")
    score = (i * 37 % 100) / 10
    out = [("run", run_key, make_record(kind="run", key=run_key, address=address, outputs={"artifact": run_key},
                                        metrics=_metrics(0.001 + (i % 7) / 1000, 1.0 + i % 5),
                                        summary={**address, "requested_model": model, "runner_type": "llm_probe",
                                                 "endpoint": "https://openrouter.ai/api/v1", "error_code": None,
                                                 "error_message": None}, **common))]
    if judges:
        checks_key = key(f"checks/{i}")
        out.append(("checks", checks_key, make_record(
            kind="checks", key=checks_key, address=address, outputs={}, metrics=_metrics(0.0, 0.01),
            summary={"run_key": run_key, **address, "passed": 1, "failed": 0, "error": 0,
                     "checks": [{"check_id": "present", "kind": "final_response_present", "outcome": "passed",
                                 "message": "ok", "dimensions": ["task"]}]}, **common)))
    for j in range(judges):
        judge_key = key(f"judge/{i}/{j}")
        out.append(("judge", judge_key, make_record(
            kind="judge", key=judge_key, address={**address, "judge_run_id": "main", "judge_repetition": j},
            outputs={}, metrics=_metrics(0.0004, 0.8),
            summary={"run_key": run_key, **address, "judge_run_id": "main", "judge_id": "j",
                     "judge_model": "openai/gpt-4o-mini", "judge_repetition": j, "overall_score": score,
                     "dimensions": {d: score for d in DIMS}}, **common)))
    result_key = key(f"result/{i}")
    out.append(("result", result_key, make_record(
        kind="result", key=result_key, address=address, outputs={}, metrics=_metrics(0.0, 0.0),
        summary={"run_key": run_key, **address, "final_score": score, "final_dimensions": {d: score for d in DIMS},
                 "passed": score >= 5, "aggregation_method": "median", "pass_threshold": 5.0,
                 "judge_iterations": judges, "judge_successful": judges, "checks_total": 1, "checks_passed": 1,
                 "checks_failed": 0}, **common)))
    return out


def bench_refresh(root: Path, nodes: int, rounds: int = 3) -> float:
    store = Store(root / "refresh-store")
    log = BuildLog(store, CAMPAIGN)
    runs = nodes // 5  # run + checks + 2 judges + result
    started = time.perf_counter()
    with store.batch():
        for i in range(runs):
            for kind, key, record in _records_for_run(i, log.build_id, lambda s: store.put_json({"doc": s}), 2):
                record_id = store.put_action(key, record)
                log.add(kind, key, record_id, "exec", record["address"], record)
    log.end("complete")
    log.advance_head(None)
    log.write()
    print(f"wrote a real build of {_logged(log)} nodes into the store in "
          f"{time.perf_counter() - started:.1f} s (setup, not measured)")
    timings = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        refresh_manifest(store, log.build_id)
        timings.append(time.perf_counter() - t0)
    print(f"refresh_manifest after a {_logged(log)}-node build, reading every record from the store "
          f"(fsck's path): median {statistics.median(timings):.3f} s (runs: {', '.join(f'{t:.3f}' for t in timings)})")
    manifest = store.root / "manifest"
    head_times = []
    for _ in range(rounds):
        shutil.rmtree(heads.heads_dir(manifest), ignore_errors=True)
        t0 = time.perf_counter()
        heads.refresh_heads(store, manifest)
        head_times.append(time.perf_counter() - t0)
    print(f"materialising the campaign head the plain views read (once per changed head): median "
          f"{statistics.median(head_times):.3f} s (runs: {', '.join(f'{t:.3f}' for t in head_times)})")
    first = []
    for _ in range(rounds):
        shutil.rmtree(manifest, ignore_errors=True)
        t0 = time.perf_counter()
        index_pending(store)
        first.append(time.perf_counter() - t0)
    alone = statistics.median(timings) + statistics.median(head_times)
    print(f"a query's first indexing (index_pending: the build, then the head it wrote, which takes its rows "
          f"and files): median {statistics.median(first):.3f} s (runs: {', '.join(f'{t:.3f}' for t in first)}) "
          f"= {statistics.median(first) / alone:.2f}x the two above on their own ({alone:.3f} s)")
    _bench_one_run_changed(store, log, runs, rounds)
    return statistics.median(timings)


def _build_changing(store: Store, first: BuildLog, runs: int, changed_run: int) -> BuildLog:
    """A build of the campaign that executes run `changed_run`'s nodes anew and reuses every other node."""
    log = BuildLog(store, CAMPAIGN)
    reused = {node["key"]: node for node in read_build_log(first.path).nodes}  # (as sealed: nodes inline)
    with store.batch():
        for i in range(runs):
            changed = i == changed_run

            def key(name: str, changed: bool = changed) -> str:
                return store.put_json({"doc": name, "changed": changed_run} if changed else {"doc": name})

            for kind, node_key, record in _records_for_run(i, log.build_id, key, 2):
                if changed:
                    log.add(kind, node_key, store.put_action(node_key, record), "exec", record["address"], record)
                else:
                    old = reused[node_key]
                    log.add(kind, node_key, old["record"], "reuse", old["address"], None)
    log.end("complete")
    log.advance_head(None)
    log.write()
    return log


def _bench_one_run_changed(store: Store, first: BuildLog, runs: int, rounds: int) -> None:
    """index_pending after a build that executes one run's nodes and reuses the rest: copied vs flattened.
    Then `claw report`'s indexing after three such builds: the current head alone vs every build."""
    manifest = store.root / "manifest"
    indexed = store.root.parent / "manifest-before"
    shutil.rmtree(manifest, ignore_errors=True)
    index_pending(store)  # the first build and its head, as the previous query left them
    shutil.copytree(manifest, indexed)
    log = _build_changing(store, first, runs, 0)
    real = copied.reusable
    times: dict[str, list[float]] = {"copied": [], "flattened": []}
    for _ in range(rounds):
        for how in times:
            shutil.rmtree(manifest)
            shutil.copytree(indexed, manifest)
            copied.reusable = real if how == "copied" else (lambda source: None)  # type: ignore[assignment]
            t0 = time.perf_counter()
            assert index_pending(store) == 1
            times[how].append(time.perf_counter() - t0)
    copied.reusable = real  # type: ignore[assignment]
    fast, slow = statistics.median(times["copied"]), statistics.median(times["flattened"])
    print(f"a query after a build that changed 1 run of {runs} ({_logged(log)} nodes executed, the rest "
          f"reused): index_pending median {fast:.3f} s with the reused rows copied from the previous head, "
          f"against {slow:.3f} s reading and flattening every record = {fast / slow:.2f}x")
    for changed_run in (1, 2):  # three builds in all that no query indexed
        _build_changing(store, first, runs, min(changed_run, runs - 1))
    report_times: dict[str, list[float]] = {"heads": [], "current": [], "pending": []}
    for _ in range(rounds):
        for how, index in (("heads", lambda store: index_heads(store, CAMPAIGN["id"])), ("current", index_current),
                           ("pending", index_pending)):
            shutil.rmtree(manifest)
            shutil.copytree(indexed, manifest)
            t0 = time.perf_counter()
            index(store)
            report_times[how].append(time.perf_counter() - t0)
    fast, slow = statistics.median(report_times["heads"]), statistics.median(report_times["pending"])
    print(f"claw report's indexing after 3 such builds no query indexed: index_heads median {fast:.3f} s (the "
          f"current head, copied from the previous one) against {slow:.3f} s indexing every build first "
          f"(index_pending, as reports did before) = {fast / slow:.2f}x")
    fast = statistics.median(report_times["current"])
    print(f"claw query of the plain views after the same 3 builds: index_current median {fast:.3f} s (every "
          f"campaign's current head) against {slow:.3f} s indexing every build first (index_pending, what a "
          f"query of a history view does, and every query did before) = {fast / slow:.2f}x")


def bench_leaderboard(root: Path, results: int, per_build: int, rounds: int = 5) -> None:
    store_root = root / "big-store"
    Store(store_root)
    manifest = store_root / "manifest"
    started = time.perf_counter()
    made = 0
    build_no = 0
    current: dict[str, str] = {}
    while made < results:
        count = min(per_build, results - made)
        build_id = f"bench-{build_no:05d}"
        records: dict[str, dict] = {}
        nodes = []
        for i in range(made, made + count):
            for kind, key, record in _records_for_run(i, build_id, lambda s: "blake3:" + s, 0):
                oid = f"rec:{key}"
                records[oid] = record
                nodes.append({"kind": kind, "key": key, "record": oid, "action": "exec", "address": record["address"]})
        campaign = {**CAMPAIGN, "id": f"{CAMPAIGN['id']}_{build_no:05d}"}
        log = {"build_id": build_id, "started_at": f"2026-01-01T00:{build_no // 60:02d}:{build_no % 60:02d}Z",
               "finished_at": None, "state": "complete", "campaign": campaign, "nodes": nodes,
               "counts": {"executed": len(nodes), "reused": 0, "failed": 0, "skipped": 0}, "metrics": {}}
        tables = rows_for_build(log, records.get)
        segments.publish_segment(manifest, build_id, tables)
        segments.compact(manifest)  # what refresh_manifest does after publishing
        head = f"{build_no:064x}"
        heads.publish_head(manifest, head, {name: tables[name] for name in HISTORY_VIEW})
        current[campaign["id"]] = head
        made += count
        build_no += 1
    heads.publish_current(manifest, current)
    print(f"indexed {made} results (+ their runs) in {build_no} builds via rows_for_build/publish_segment in "
          f"{time.perf_counter() - started:.1f} s (setup, not measured)")
    sql = (REPO / "queries" / "leaderboard.sql").read_text()

    class _StoreRoot:
        root = store_root

    def manifest_time() -> float:
        t0 = time.perf_counter()
        rows = run_query(store_root, sql).rows
        assert len(rows) == len(MODELS) * build_no
        return time.perf_counter() - t0

    snap = segments.snapshot(manifest)
    waiting = len(snap.segments)
    steady = statistics.median([manifest_time() for _ in range(rounds)])
    t0 = time.perf_counter()
    compact_manifest(_StoreRoot())  # type: ignore[arg-type]
    print(f"compacting the pack and {waiting} waiting segments into one pack of {made} results: "
          f"{time.perf_counter() - t0:.2f} s")
    packed = statistics.median([manifest_time() for _ in range(rounds)])

    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'").fetchall()
    create_stats_macros(con)  # (the leaderboard's intervals use them, as claw query's connection has them)
    for table in ("results", "nodes"):
        files = ", ".join(f"'{f}'" for f in heads.current_files(manifest, table))
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM read_parquet([{files}])").fetchall()
    assert con.execute("SELECT count(*) FROM results").fetchall() == [(made,)]
    plain_times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        con.execute(sql).fetchall()
        plain_times.append(time.perf_counter() - t0)
    plain = statistics.median(plain_times)
    print(f"leaderboard over {made} results:")
    print(f"  claw query (pack + {waiting} waiting segments, as refresh leaves it): {steady * 1000:.1f} ms "
          f"= {steady / plain:.2f}x")
    print(f"  claw query (fully compacted):                    {packed * 1000:.1f} ms = {packed / plain:.2f}x")
    print(f"  same SQL on plain in-memory DuckDB tables:       {plain * 1000:.1f} ms")


OUTPUT_SQL = "SELECT range AS i, 'x' || range AS s FROM range({rows})"


def bench_output(work: Path, rows: int, small: int, pairs: int, against: Path | None) -> None:
    """`claw query` printing `rows` rows in each format, as a real process: max RSS (wait4) and wall, next to the
    same command at `small` rows and `select 1` (what a query costs with no rows to speak of). With `against`
    (another tree, e.g. main's worktree), that tree's claw runs too, the two taking turns, `pairs` times."""
    from bench.growth_bench import measure  # (wait4 in a launcher: the peak of the command's process alone)

    store = Store(work / "output-store")
    trees = {"this": REPO, **({"against": against.resolve()} if against is not None else {})}

    def run(tree: Path, fmt: str, count: int | None) -> str:
        sql = "SELECT 1 AS one" if count is None else OUTPUT_SQL.format(rows=count)
        got = measure(work, ("query", "--store", str(store.root), sql, "--format", fmt),
                      {"PYTHONPATH": str(tree)})
        return f"{got.max_rss / 2**20:7.1f} MB {got.wall:6.2f} s"

    print(f"claw query output ({os.getloadavg()[0]:.1f} load): max RSS and wall, {small:,} and {rows:,} rows "
          f"({OUTPUT_SQL.format(rows='N')}), `select 1` the baseline")
    for fmt in ("csv", "json", "table"):
        for number in range(pairs):
            for name, tree in trees.items():
                print(f"  {fmt:<5} {name:<7} #{number + 1}: select 1 {run(tree, fmt, None)}; {small:,} rows "
                      f"{run(tree, fmt, small)}; {rows:,} rows {run(tree, fmt, rows)}  (load {os.getloadavg()[0]:.1f})",
                      flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=1_000_000)
    parser.add_argument("--per-build", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--only", choices=["refresh", "leaderboard", "output"], default=None)
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows `claw query` prints (output)")
    parser.add_argument("--small-rows", type=int, default=30_000, help="the same at this many rows (output)")
    parser.add_argument("--pairs", type=int, default=1, help="runs of each tree (output)")
    parser.add_argument("--against", type=Path, default=None, help="another tree whose claw takes turns (output)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="times each refresh and leaderboard figure is taken (default 3 and 5; the median printed)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        if args.only in (None, "refresh"):
            bench_refresh(Path(tmp), args.nodes, *([args.rounds] if args.rounds else []))
        if args.only in (None, "leaderboard"):
            bench_leaderboard(Path(tmp), args.results, args.per_build, *([args.rounds] if args.rounds else []))
        if args.only in (None, "output"):
            bench_output(Path(tmp), args.rows, args.small_rows, args.pairs, args.against)


if __name__ == "__main__":
    main()
