"""How a provider request waits out a rate limit: inside a build, the build's pacer (bound to the
calling thread) gives the thread's concurrency slot back while it waits; elsewhere a wait is a sleep."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Pacer(Protocol):
    """What the provider client tells the build about one thread's requests (builder/lanes.py)."""

    def pause(self, seconds: float, cancelled: threading.Event) -> bool:
        """Wait `seconds` for a retry, then until the request may go; False if cancelled meanwhile."""
        ...

    def throttled(self, seconds: float, retry_after_s: float | None, sent_at: float, *, halve: bool) -> None:
        """The provider asked this model to wait `seconds` (a 429, a Retry-After); `halve` for a 429
        to a request sent at `sent_at` (time.monotonic)."""
        ...

    def succeeded(self) -> None:
        """A request of this model was answered."""
        ...


class _Sleep:
    """Outside a build: a wait is a sleep (cut short when the client closes), nothing is learned."""

    def pause(self, seconds: float, cancelled: threading.Event) -> bool:
        return not cancelled.wait(seconds)

    def throttled(self, seconds: float, retry_after_s: float | None, sent_at: float, *, halve: bool) -> None:
        pass

    def succeeded(self) -> None:
        pass


SLEEP: Pacer = _Sleep()
_bound = threading.local()


def current_pacer() -> Pacer:
    """The pacer bound to this thread (the build's, while it executes a node), else a plain sleep."""
    pacer: Pacer | None = getattr(_bound, "pacer", None)
    return pacer if pacer is not None else SLEEP


@contextmanager
def paced_by(pacer: Pacer) -> Iterator[None]:
    """Bind `pacer` to this thread for the provider requests made inside the block."""
    outer = getattr(_bound, "pacer", None)
    _bound.pacer = pacer
    try:
        yield
    finally:
        _bound.pacer = outer
