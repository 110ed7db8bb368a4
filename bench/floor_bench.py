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

The build's shape (session 47): N requests in flight while one other thread (the build's) spends Python CPU per
reply as a build's thread does per node (`--node-ms`, 0.7 ms), handing work and replies through SimpleQueues;
each reply's store writes done where a build does them:
- shape threads:      N worker threads, each request by ProviderClient.chat, as a build's (its wire since session 47);
- shape httpx:        the same with each leased client sending through httpx (a build before session 47);
- shape lean wire:    the same through httpx and bench/_leanwire.py (the socket's timeout set only when it changes,
                      no poll before each send and receive, a request's writes in one send);
- shape asyncio:      no workers: one I/O thread runs every exchange on an asyncio loop (httpx.AsyncClient, the
                      same reply checks), does each reply's store writes, and hands replies back in batches;
- shape h11 socket:   N workers, each exchange h11 over the worker's own blocking socket (no httpx, no httpcore);
- shape asyncio h11:  one I/O thread, h11 over asyncio's transports (no httpx), replies handed back in batches;
- shape httpcore[ lean]: N workers, each on its own httpcore pool (no httpx layer)[, through _leanwire].

CPU is this process's (RUSAGE_SELF: every thread, the store's group commit included); the stand-in
serves from a child process.

Usage: python bench/floor_bench.py [--requests 4000] [--threads 16] [--runs 3] [--node-ms 0.7] [--only NAME]
(--only: these loops only, e.g. one under `strace -f -c`; the bare loop is always run too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import resource
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import h11
import httpcore
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._leanwire import LeanBackend  # noqa: E402
from bench.growth_bench import bare_loop_cpu  # noqa: E402
from clawstore.graph.records import make_record  # noqa: E402
from clawstore.providers.client import ProviderClient, _interpret, _Reply  # noqa: E402
from clawstore.providers.endpoint import Endpoint  # noqa: E402
from clawstore.store.store import Store  # noqa: E402
from clawstore.testing.standin import StandInProcess  # noqa: E402
from clawstore.values.clock import utc_now  # noqa: E402

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


def calibrated_spin(node_ms: float) -> Callable[[], None]:
    """A function spending about `node_ms` of Python CPU (the build's thread's per-node work) each call."""
    def spin(n: int) -> int:
        total = 0
        for k in range(n):
            total += k & 7
        return total

    n = 20_000
    for _ in range(3):
        start = time.thread_time()
        spin(n)
        spent = time.thread_time() - start
        n = max(1, int(n * node_ms / 1000 / max(spent, 1e-6)))
    return lambda: spin(n) and None


def _drive(requests: int, inflight: int, node: Callable[[], None], submit: Callable[[list[int]], None],
           replies: queue.SimpleQueue) -> None:
    """The build's thread: keep `inflight` requests out; per reply, the node's own work; submit the next ones."""
    next_i = min(inflight, requests)
    submit(list(range(next_i)))
    done = 0
    while done < requests:
        batch = replies.get()
        if isinstance(batch, BaseException):
            raise batch
        for _ in batch:
            node()
        done += len(batch)
        more = list(range(next_i, min(next_i + len(batch), requests)))
        next_i += len(more)
        if more:
            submit(more)


def _workers_cpu(requests: int, threads: int, node: Callable[[], None],
                 per_thread: Callable[[], AbstractContextManager[Callable[[int], None]]]) -> float:
    """The build's shape with N worker threads: each takes a request, runs `one(i)` (its exchange and store
    writes; `one` made once per thread by `per_thread`) and hands the reply back to the driving thread."""
    tasks: queue.SimpleQueue = queue.SimpleQueue()
    replies: queue.SimpleQueue = queue.SimpleQueue()

    def worker() -> None:
        with per_thread() as one:
            while (i := tasks.get()) is not None:
                try:
                    one(i)
                    replies.put((i,))
                except BaseException as exc:  # noqa: BLE001 - raised again in the driving thread
                    replies.put(exc)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in workers:
        thread.start()
    before = _process_cpu()
    try:
        _drive(requests, threads, node, lambda more: [tasks.put(i) for i in more], replies)
    finally:
        for _ in workers:
            tasks.put(None)
        for thread in workers:
            thread.join()
    return (_process_cpu() - before) / requests


def shape_threads_cpu(server: StandInProcess, requests: int, threads: int, store: Store, node: Callable[[], None],
                      backend: Any = None) -> float:
    """N workers, as a build's: take a request, ProviderClient.chat, the store writes, hand the reply back."""
    endpoint = Endpoint(base_url=server.base_url, api_key_env=None)
    with ProviderClient() as client:
        if backend is not None:  # each leased client through httpx, its pool connecting through `backend`
            lease = client._lease

            def lease_through_backend() -> httpx.Client:
                http = lease()
                http.wire = None  # type: ignore[attr-defined]
                if backend is not True:
                    http._transport._pool._network_backend = backend  # type: ignore[attr-defined]
                return http

            client._lease = lease_through_backend  # type: ignore[method-assign]

        def one(i: int) -> None:
            store_one(store, i, client.chat(endpoint, BODY).message)

        return _workers_cpu(requests, threads, node, lambda: nullcontext(one))


class _HandBack:
    """An I/O thread's replies, checked and written to the store there, handed back in one put per turn of its
    loop (a failure at once)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, replies: queue.SimpleQueue) -> None:
        self.loop, self.replies, self.ready = loop, replies, []  # type: ignore[var-annotated]

    def checked(self, i: int, status: int, headers: list[tuple[bytes, bytes]], body: bytes, store: Store) -> bool:
        try:
            _checked(i, status, headers, body, store)
        except BaseException as exc:  # noqa: BLE001 - raised again in the driving thread
            self.replies.put(exc)
            return False
        if not self.ready:
            self.loop.call_soon(self._flush)
        self.ready.append(i)
        return True

    def _flush(self) -> None:
        batch, self.ready = self.ready, []
        self.replies.put(batch)


def _io_thread_cpu(requests: int, threads: int, node: Callable[[], None], loop: asyncio.AbstractEventLoop,
                   start: Callable[[list[int]], None], replies: queue.SimpleQueue,
                   close: Callable[[], Any]) -> float:
    """The build's shape with one I/O thread running `loop`: the driving thread submits by `start` (on the loop)
    and takes replies from `replies`; `close()` (a coroutine) runs on the loop once the thread has stopped."""
    io = threading.Thread(target=loop.run_forever)
    io.start()
    before = _process_cpu()
    try:
        _drive(requests, threads, node, lambda more: loop.call_soon_threadsafe(start, more), replies)
    finally:
        spent = _process_cpu() - before
        loop.call_soon_threadsafe(loop.stop)
        io.join()
        loop.run_until_complete(close())
        loop.close()
    return spent / requests


def shape_asyncio_cpu(server: StandInProcess, requests: int, threads: int, store: Store,
                      node: Callable[[], None]) -> float:
    """One I/O thread: every exchange on its asyncio loop, each reply checked as ProviderClient checks it and
    written to the store there; replies handed back in batches (one put per turn of the loop)."""
    replies: queue.SimpleQueue = queue.SimpleQueue()
    loop = asyncio.new_event_loop()
    hand_back = _HandBack(loop, replies)
    url = server.base_url + "/chat/completions"
    headers = {"Content-Type": "application/json", "X-Title": "clawstore"}
    payload = json.dumps(BODY).encode()
    client: list[httpx.AsyncClient] = []

    async def one(i: int) -> None:
        try:
            response = await client[0].post(url, content=payload, headers=headers)
        except BaseException as exc:  # noqa: BLE001 - raised again in the driving thread
            replies.put(exc)
            return
        hand_back.checked(i, response.status_code, response.headers.raw, response.content, store)

    def start(more: list[int]) -> None:
        for i in more:
            loop.create_task(one(i))

    async def open_client() -> None:
        client.append(httpx.AsyncClient(limits=httpx.Limits(max_connections=64, max_keepalive_connections=64)))

    loop.run_until_complete(open_client())
    return _io_thread_cpu(requests, threads, node, loop, start, replies, lambda: client[0].aclose())


class _Served:
    """A stand-in started outside this process (`python -m clawstore.testing.standin --port N`)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _h11_request(conn: h11.Connection, host: str, target: str) -> bytes:
    """One request's bytes, made by `conn` (the headers ProviderClient sends), its state moved on."""
    if conn.our_state is h11.DONE:
        conn.start_next_cycle()
    payload = json.dumps(BODY).encode()
    head = [("Host", host), ("Content-Type", "application/json"), ("X-Title", "clawstore"),
            ("Content-Length", str(len(payload)))]
    return b"".join((conn.send(h11.Request(method="POST", target=target, headers=head)) or b"",
                     conn.send(h11.Data(data=payload)) or b"", conn.send(h11.EndOfMessage()) or b""))


def _checked(i: int, status: int, headers: list[tuple[bytes, bytes]], body: bytes, store: Store) -> None:
    """The reply checked as ProviderClient checks one, then the node's store writes."""
    result, _usage = _interpret(_Reply(status, httpx.Headers(headers), "", "", body.decode("utf-8")), None)
    if not hasattr(result, "message"):
        raise RuntimeError(f"failed: {result}")
    store_one(store, i, result.message)  # type: ignore[union-attr]


def shape_h11_socket_cpu(server: Any, requests: int, threads: int, store: Store, node: Callable[[], None]) -> float:
    """N workers as a build's, each exchange h11 over its own blocking socket (no httpx, no httpcore): one send,
    one recv a request, the socket's timeout the kernel's, set once."""
    url = httpx.URL(server.base_url)
    host, target = url.netloc.decode(), url.raw_path.decode().rstrip("/") + "/chat/completions"

    @contextmanager
    def per_thread() -> Iterator[Callable[[int], None]]:
        sock = socket.create_connection((url.host, url.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("@ll", 120, 0))
        conn = h11.Connection(h11.CLIENT)

        def one(i: int) -> None:
            sock.sendall(_h11_request(conn, host, target))
            status, headers, body = 0, [], bytearray()
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(sock.recv(65536))
                elif isinstance(event, h11.Response):
                    status, headers = event.status_code, list(event.headers)
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            _checked(i, status, headers, bytes(body), store)

        with sock:
            yield one

    return _workers_cpu(requests, threads, node, per_thread)


def shape_httpcore_cpu(server: Any, requests: int, threads: int, store: Store, node: Callable[[], None],
                       backend: Any = None) -> float:
    """N workers as a build's, each exchange by httpcore's pool directly (one per worker; no httpx layer), the
    headers httpx would send."""
    url = server.base_url + "/chat/completions"
    payload = json.dumps(BODY).encode()
    made = httpx.Request("POST", url, content=payload, headers={"Content-Type": "application/json",
                                                                "X-Title": "clawstore"})
    head = made.headers.raw
    timeout = httpx.Timeout(120.0).as_dict()

    @contextmanager
    def per_thread() -> Iterator[Callable[[int], None]]:
        with httpcore.ConnectionPool(network_backend=backend) as pool:
            def one(i: int) -> None:
                response = pool.handle_request(httpcore.Request(b"POST", url, headers=head, content=payload,
                                                                extensions={"timeout": timeout}))
                try:
                    body = b"".join(response.stream)
                finally:
                    response.close()
                _checked(i, response.status, response.headers, body, store)

            yield one

    return _workers_cpu(requests, threads, node, per_thread)


class _H11Protocol(asyncio.Protocol):
    """One keep-alive connection of the I/O thread: h11 parses its replies as they arrive."""

    def __init__(self, done: Callable[[_H11Protocol, int, int, list[tuple[bytes, bytes]], bytes], None]) -> None:
        self.done = done
        self.conn = h11.Connection(h11.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.current = -1
        self.status, self.headers, self.body = 0, [], bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, i: int, host: str, target: str) -> None:
        self.current = i
        self.transport.write(_h11_request(self.conn, host, target))  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Response):
                self.status, self.headers, self.body = event.status_code, list(event.headers), bytearray()
            elif isinstance(event, h11.Data):
                self.body += event.data
            elif isinstance(event, h11.EndOfMessage):
                self.done(self, self.current, self.status, self.headers, bytes(self.body))
                return


def shape_asyncio_h11_cpu(server: Any, requests: int, threads: int, store: Store,
                          node: Callable[[], None]) -> float:
    """One I/O thread, N keep-alive connections on its asyncio loop, h11 over asyncio's transports (no httpx);
    each reply checked and written to the store there, handed back in batches."""
    url = httpx.URL(server.base_url)
    host, target = url.netloc.decode(), url.raw_path.decode().rstrip("/") + "/chat/completions"
    replies: queue.SimpleQueue = queue.SimpleQueue()
    loop = asyncio.new_event_loop()
    hand_back = _HandBack(loop, replies)
    idle: list[_H11Protocol] = []
    waiting: list[int] = []

    def done(proto: _H11Protocol, i: int, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        if not hand_back.checked(i, status, headers, body, store):
            return
        if waiting:
            proto.send(waiting.pop(), host, target)
        else:
            idle.append(proto)

    def start(more: list[int]) -> None:
        for i in more:
            if idle:
                idle.pop().send(i, host, target)
            else:
                waiting.append(i)

    async def connect() -> None:
        for _ in range(threads):
            _transport, proto = await loop.create_connection(lambda: _H11Protocol(done), url.host, url.port)
            idle.append(proto)

    async def close() -> None:
        for proto in idle:
            proto.transport.close()  # type: ignore[union-attr]

    loop.run_until_complete(connect())
    return _io_thread_cpu(requests, threads, node, loop, start, replies, close)


SHAPES = ("shape threads", "shape httpx", "shape lean wire", "shape asyncio", "shape h11 socket", "shape asyncio h11",
          "shape httpcore", "shape httpcore lean")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--node-ms", type=float, default=0.7, help="the build thread's Python CPU per reply")
    parser.add_argument("--base-url", help="a stand-in already serving (so `strace -f` counts this process only)")
    parser.add_argument("--only", action="append", choices=("pool", "pool+store", "claw client+store", *SHAPES))
    args = parser.parse_args()
    names = ["pool", "pool+store", "claw client+store", *SHAPES]
    figures: dict[str, list[float]] = {"bare": [], **{name: [] for name in names if not args.only or name in args.only}}
    node = calibrated_spin(args.node_ms)
    shapes: dict[str, Callable[[StandInProcess, int, int, Store], float]] = {
        "pool+store": pool_cpu, "claw client+store": claw_client_cpu,
        "shape threads": lambda *a: shape_threads_cpu(*a, node),
        "shape httpx": lambda *a: shape_threads_cpu(*a, node, True),
        "shape lean wire": lambda *a: shape_threads_cpu(*a, node, LeanBackend()),
        "shape asyncio": lambda *a: shape_asyncio_cpu(*a, node),
        "shape h11 socket": lambda *a: shape_h11_socket_cpu(*a, node),
        "shape asyncio h11": lambda *a: shape_asyncio_h11_cpu(*a, node),
        "shape httpcore": lambda *a: shape_httpcore_cpu(*a, node),
        "shape httpcore lean": lambda *a: shape_httpcore_cpu(*a, node, LeanBackend())}
    served = _Served(args.base_url) if args.base_url else StandInProcess()
    with served as server, tempfile.TemporaryDirectory(prefix="claw-floor-") as scratch:
        for run in range(args.runs):
            figures["bare"].append(bare_loop_cpu(server, args.requests))
            if "pool" in figures:
                figures["pool"].append(pool_cpu(server, args.requests, args.threads, None))
            for name, loop in shapes.items():
                if name not in figures:
                    continue
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
