"""The floor under a cold build's CPU per request (issue 54's lean request path): how much of it is the
provider call itself, with the build's concurrency, and with a store write per request, before any of
claw's bookkeeping. Each loop sends the same requests to the same stand-in; each figure is printed next
to the bare loop's (one thread, one connection, one request after another: growth_bench's baseline).

- bare:        one thread, one httpx connection, sequential;
- pool:        the build's shape: N threads (the run profile's max_concurrency, 16) on one httpx pool;
- pool+store:  the same, each request's reply and a record put into a store in one batch, under the
               build's group commit (what every run node writes at least);
- claw:        the provider client claw uses (ProviderClient.chat: retries, checks, usage) on N threads,
               with the same store writes.

CPU is this process's (RUSAGE_SELF: every thread, the store's group commit included); the stand-in
serves from a child process.

Usage: python bench/floor_bench.py [--requests 4000] [--threads 16] [--runs 3]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.growth_bench import bare_loop_cpu  # noqa: E402
from clawstore.graph.records import make_record, utc_now  # noqa: E402
from clawstore.providers.client import ProviderClient  # noqa: E402
from clawstore.providers.endpoint import Endpoint  # noqa: E402
from clawstore.store.store import Store  # noqa: E402
from clawstore.testing.standin import StandInProcess  # noqa: E402

BODY = {"model": "vendor/m0", "messages": [{"role": "user", "content": "What is 1 + 1?"}]}


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def threaded_cpu(requests: int, threads: int, one: Callable[[int], None]) -> float:
    """CPU seconds per request of `one(i)` for i in range(requests), spread over `threads` threads."""
    counter = iter(range(requests))
    lock = threading.Lock()
    failed: list[BaseException] = []

    def worker() -> None:
        try:
            while not failed:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                one(i)
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            failed.append(exc)

    before = _process_cpu()
    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join()
    spent = _process_cpu() - before
    if failed:
        raise failed[0]
    return spent / requests


def store_one(store: Store, i: int, reply: Any) -> None:
    """What a run node writes at least: its reply and a record, one batch (one durable group)."""
    with store.batch():
        reply_id = store.put_json(reply)
        key = f"blake3:{i:064x}"
        record = make_record(kind="run", key=key, address={"case_id": f"c{i}", "model_id": "m0"},
                             status="completed", cacheable=True, outputs={"artifact": reply_id},
                             metrics={"latency_s": 0.001}, summary={"case_id": f"c{i}"}, error=None,
                             started_at=utc_now(), finished_at=utc_now(), build_id="floor")
        store.put_action(key, record)


def pool_cpu(server: StandInProcess, requests: int, threads: int, store: Store | None) -> float:
    with httpx.Client(base_url=server.base_url, limits=httpx.Limits(max_connections=64,
                                                                    max_keepalive_connections=64)) as client:
        def one(i: int) -> None:
            response = client.post("/chat/completions", json=BODY)
            response.raise_for_status()
            if store is not None:
                store_one(store, i, response.json())

        return threaded_cpu(requests, threads, one)


def claw_client_cpu(server: StandInProcess, requests: int, threads: int, store: Store) -> float:
    endpoint = Endpoint(base_url=server.base_url, api_key_env=None)
    with ProviderClient() as client:
        def one(i: int) -> None:
            store_one(store, i, client.chat(endpoint, BODY).message)

        return threaded_cpu(requests, threads, one)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"bare": [], "pool": [], "pool+store": [], "claw client+store": []}
    with StandInProcess() as server, tempfile.TemporaryDirectory(prefix="claw-floor-") as scratch:
        for run in range(args.runs):
            figures["bare"].append(bare_loop_cpu(server, args.requests))
            figures["pool"].append(pool_cpu(server, args.requests, args.threads, None))
            for name, loop in (("pool+store", pool_cpu), ("claw client+store", claw_client_cpu)):
                store = Store(Path(scratch) / f"store-{name}-{run}")
                before = _process_cpu()
                with store.group_commit():  # its last commit counted too
                    loop(server, args.requests, args.threads, store)
                figures[name].append((_process_cpu() - before) / args.requests)
    bare = sorted(figures["bare"])[len(figures["bare"]) // 2]
    print(f"{args.requests} requests per loop, {args.threads} threads, {args.runs} runs (median; all runs)")
    for name, values in figures.items():
        median = sorted(values)[len(values) // 2]
        runs = ", ".join(f"{v * 1000:.2f}" for v in values)
        print(f"{name:20} {median * 1000:6.2f} ms CPU per request  {median / bare:5.2f}x bare  ({runs})")


if __name__ == "__main__":
    main()
