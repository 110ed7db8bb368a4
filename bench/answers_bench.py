"""Benchmark the answers in SQL: a search of 10,000 runs' final answers through `claw query`'s views.

    python bench/answers_bench.py [--runs 10000] [--dir DIR]

A real Store receives a build of `--runs` runs, each with a real run artifact (a conversation of a system
prompt, a question, a tool call, its result and a final answer) and record, and a real build log; the
campaign head is indexed as `claw query` indexes it (setup, not measured). Then:
1. the first query naming `runs`: it reads every artifact from the store into the answers cache and
   materialises the current runs with their answers (query/answers.py), once;
2. `select model_id, count(*) from runs where final_response ilike '%x%' group by 1` on the views of an
   open connection (`runs`: that materialised table, attached read-only), against the same SQL on a plain
   in-memory DuckDB table holding the same rows; median of 9 each, taking turns;
3. the same SQL exactly as `claw query` runs it (run_query: a fresh in-memory DuckDB and its views, the
   answers cache checked for new runs, the result materialised and fetched), against run_query of the
   same shape of query on a view without answers (`nodes`): what reading answers adds to a query.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from clawstore.builder.buildlog import BuildLog  # noqa: E402
from clawstore.graph.records import make_record  # noqa: E402
from clawstore.query.engine import run_query  # noqa: E402
from clawstore.query.manifest import index_current, manifest_dir  # noqa: E402
from clawstore.query.views import connect  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.values.clock import utc_now  # noqa: E402

MODELS = [f"vendor{i}/model-{i}" for i in range(20)]
CAMPAIGN = {"id": "bench__std__none", "suite_id": "bench", "run_profile_id": "std", "evaluation_profile_id": None}
NODES_SQL = "select model_id, count(*) from nodes where case_id ilike '%x%' group by 1"
SQL = "select model_id, count(*) from runs where final_response ilike '%x%' group by 1"


def _artifact(i: int) -> dict[str, Any]:
    answer = f"answer {i}: the result is {i * 7} " + ("x" if i % 3 == 0 else "y") + " because " + "words " * 20

    def event(n: int, kind: str, **rest: Any) -> dict[str, Any]:
        return {"sequence": n, "event_type": kind, "timestamp": utc_now(), **rest}

    return {"identity": {"runner_type": "llm_probe", "case_id": f"case_{i}"}, "status": "success", "trace": [
        event(0, "message", role="system", content="You answer briefly."),
        event(1, "message", role="user", content=f"Question {i}: what is {i} * 7?"),
        event(2, "message", role="assistant", content=None),
        event(3, "tool_call", call_id=f"c{i}", tool_name="exec_shell", raw_arguments="{}",
              parsed_arguments={"command": f"echo $(({i} * 7))"}),
        event(4, "tool_result", call_id=f"c{i}", status="success", output=str(i * 7)),
        event(5, "message", role="assistant", content=answer),
        event(6, "final_output", content=answer)]}


def _build(store: Store, runs: int) -> None:
    log = BuildLog(store, CAMPAIGN)
    with store.batch():
        for i in range(runs):
            model, case = MODELS[i % len(MODELS)], f"case_{i // len(MODELS):06d}"
            address = {"model_id": model, "case_id": case, "repetition": 0}
            key = store.put_json({"doc": f"run/{i}"})
            now = utc_now()
            outputs = {"artifact": store.put_json(_artifact(i))}
            record = make_record(kind="run", key=key, address=address, outputs=outputs,
                                 metrics={"input_tokens": 40, "output_tokens": 30, "cost_usd": 0.001, "latency_s": 1.0},
                                 summary={**address, "requested_model": model, "runner_type": "llm_probe"},
                                 status="success", cacheable=True, error=None, started_at=now, finished_at=now,
                                 build_id=log.build_id)
            log.add("run", key, store.put_action(key, record), "exec", address, record)
    log.end("complete")
    log.advance_head(None)
    log.write()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = Store(Path(tmp) / "store")
        started = time.perf_counter()
        _build(store, args.runs)
        index_current(store)
        print(f"wrote and indexed a build of {args.runs} runs with their artifacts in "
              f"{time.perf_counter() - started:.1f} s (setup, not measured)")
        t0 = time.perf_counter()
        first = run_query(store.root, SQL, store=store).rows
        print(f"the first query naming runs, reading {args.runs} artifacts into the answers cache and "
              "materialising the current runs with them: "
              f"{time.perf_counter() - t0:.2f} s (once)")
        expected = sorted(first)

        con = duckdb.connect()
        rows = run_query(store.root, "select model_id, final_response from runs", store=store).rows
        con.execute("CREATE TABLE runs (model_id VARCHAR, final_response VARCHAR)").fetchall()
        con.executemany("INSERT INTO runs VALUES (?, ?)", rows)
        views = connect(manifest_dir(store.root))
        assert sorted(con.execute(SQL).fetchall()) == expected == sorted(views.execute(SQL).fetchall())
        times: dict[str, list[float]] = {"views": [], "plain": [], "claw": [], "nodes": []}
        for _ in range(9):
            for how, query in (("views", lambda: views.execute(SQL).fetchall()),
                               ("plain", lambda: con.execute(SQL).fetchall()),
                               ("claw", lambda: run_query(store.root, SQL, store=store)),
                               ("nodes", lambda: run_query(store.root, NODES_SQL, store=store))):
                t0 = time.perf_counter()
                query()
                times[how].append(time.perf_counter() - t0)
        median = {how: statistics.median(values) for how, values in times.items()}
        print(f"{SQL!r} over {args.runs} runs:")
        print(f"  on the views (runs materialised with their answers): {median['views'] * 1000:.1f} ms "
              f"= {median['views'] / median['plain']:.2f}x")
        print(f"  same SQL on a plain in-memory DuckDB table:          {median['plain'] * 1000:.1f} ms")
        print(f"  as claw query runs it (fresh DuckDB, views, cache checked): {median['claw'] * 1000:.1f} ms, against "
              f"{median['nodes'] * 1000:.1f} ms for {NODES_SQL!r} (no answers read) = "
              f"{median['claw'] / median['nodes']:.2f}x")


if __name__ == "__main__":
    main()
