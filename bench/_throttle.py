"""A loopback TCP relay that limits throughput, standing in for a network link in front of a local server.

Everything relayed shares one budget per direction (a link, not a per-connection cap): `rate` bytes a
second, paced in chunks of at most 64 KiB. For benchmarks only: it shows how a transfer behaves when the
link, not the loopback server's CPU, sets the pace.

The relay runs in a process of its own: a real link keeps moving bytes while the client computes, where
a relay thread in the client's process would wait for its interpreter lock, slowing most the transfers
that check what they receive as it arrives.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

_CHUNK = 64 * 1024


class _Link:
    """One direction's budget: when the next byte may leave, given the bytes already sent."""

    def __init__(self, rate: float):
        self.rate, self.free_at = rate, 0.0

    def delay(self, size: int) -> float:
        now = time.monotonic()
        start = max(now, self.free_at)
        self.free_at = start + size / self.rate
        return self.free_at - now


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
    try:
        while data := await reader.read(_CHUNK):
            await asyncio.sleep(link.delay(len(data)))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _serve(host: str, port: int, bytes_per_s: float) -> None:
    """Relay to host:port until killed; the relay's own port is printed on stdout."""
    up, down = _Link(bytes_per_s), _Link(bytes_per_s)

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(_pump(client_reader, server_writer, up), _pump(server_reader, client_writer, down))

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


@contextmanager
def throttled(url: str, bytes_per_s: float) -> Iterator[str]:
    """A relay to the server at `url` (http://host:port) at `bytes_per_s` each way; yields its URL."""
    upstream = urlsplit(url)
    relay = subprocess.Popen([sys.executable, __file__, str(upstream.hostname), str(upstream.port), str(bytes_per_s)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert relay.stdout is not None
        port = relay.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"the throttling relay did not start (exit code {relay.poll()})")
        yield f"{upstream.scheme}://127.0.0.1:{port}"
    finally:
        relay.kill()
        relay.wait()


def _exit_with_parent() -> None:
    """The relay's stdin is a pipe from the benchmark: its end means the benchmark is gone (even
    killed with SIGKILL), and so is the relay."""
    sys.stdin.buffer.read()
    os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    asyncio.run(_serve(sys.argv[1], int(sys.argv[2]), float(sys.argv[3])))
