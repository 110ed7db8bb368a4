"""A pull's downloads: at most pull.STREAMS at once, each starting as soon as one ends (not when the pulling thread
is next free of a check), in the order asked for (pull._Turns); a big pack alone, in ranges at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from clawstore.remote import pull
from clawstore.remote.backends import DirectoryBackend, Moved
from clawstore.store import Store
from clawstore.store.services import transfer
from tests.remote.test_packs import _pushed_in_packs, _slow_downloads


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of these (start, end) spans open at one instant."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_downloads_go_on_while_a_long_check_runs_at_most_streams_at_once(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pack's check is long (a big pack on a slow machine): the others keep arriving meanwhile, two at a
    time, where they waited for the pulling thread to start each (two packs arrived and waiting held the link idle)."""
    source, remote = _pushed_in_packs(tmp_path, (40, 30, 20, 10, 5))
    spans = _slow_downloads(monkeypatch, 0.15)  # (a slow link)
    checks: list[tuple[float, float]] = []
    real_check = transfer.Incoming.check

    def check(self: transfer.Incoming, *args: Any, **kwargs: Any) -> bytes:
        start = time.monotonic()
        table = real_check(self, *args, **kwargs)
        if not checks:
            time.sleep(0.8)  # (the first check is long)
        checks.append((start, time.monotonic()))
        return table

    monkeypatch.setattr(transfer.Incoming, "check", check)
    target = Store(tmp_path / "b")
    assert pull.STREAMS == 2 and pull.pull(target, remote).packs == 5
    assert len(spans) == 5
    first_check_ends = checks[0][1]
    assert sum(end < first_check_ends for _, end in spans) == 5  # (every pack arrived during the first check)
    assert _most_at_once(spans) == pull.STREAMS
    assert set(target.iter_objects()) == set(source.iter_objects())


def test_turns_let_tickets_through_in_their_order_width_at_a_time() -> None:
    """Threads asking in the reverse order of their tickets still go in ticket order, never more than `width` at
    once; `close` lets every one waiting through."""
    turns = pull._Turns(2)
    tickets = [turns.ticket() for _ in range(6)]
    passed: list[int] = []
    inside, most = [0], [0]
    lock = threading.Lock()

    def ask(ticket: int) -> None:
        with turns.turn(ticket):
            with lock:
                passed.append(ticket)
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.05)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=ask, args=(ticket,)) for ticket in reversed(tickets)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)  # (each waiting before the next asks: the last ticket asks first)
    for thread in threads:
        thread.join(10)
    assert passed == tickets and most[0] == 2

    stuck = pull._Turns(1)
    stuck.ticket()  # (a ticket never used: those after it wait until `close`)
    late = stuck.ticket()
    waiter = threading.Thread(target=lambda: stuck.turn(late).__enter__(), daemon=True)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()
    stuck.close()
    waiter.join(5)
    assert not waiter.is_alive()


def test_a_ticket_that_goes_alone_runs_with_none_beside_it() -> None:
    """A big pack's download (in ranges of its own that fill the link) runs alone: the ticket before it ends first,
    and none after it starts until it ends; the others still go `width` at a time, in ticket order."""
    turns = pull._Turns(2)
    tickets = [turns.ticket(alone) for alone in (True, False, False, True, False, False)]
    spans: dict[int, tuple[float, float]] = {}

    def ask(ticket: int) -> None:
        with turns.turn(ticket):
            start = time.monotonic()
            time.sleep(0.1)
        spans[ticket] = (start, time.monotonic())

    threads = [threading.Thread(target=ask, args=(ticket,)) for ticket in tickets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(spans) == tickets
    for alone in (0, 3):
        start, end = spans[alone]
        assert all(other_end <= start or other_start >= end
                   for ticket, (other_start, other_end) in spans.items() if ticket != alone)
    assert _most_at_once([spans[1], spans[2]]) == 2 and _most_at_once([spans[4], spans[5]]) == 2
    assert [ticket for ticket, _ in sorted(spans.items(), key=lambda item: item[1][0])] == tickets


def test_big_packs_download_alone_each_in_ranges_and_the_small_ones_two_at_a_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Packs of pull.ALONE_BYTES or more come one after another (the largest first), each asked in STREAMS ranges at
    once and nothing else downloading meanwhile; the smaller ones after them, STREAMS at a time, each whole."""
    source, remote = _pushed_in_packs(tmp_path, (400, 300, 200, 100, 50))
    sizes = sorted((path.stat().st_size for path in (tmp_path / "remote" / "packs").glob("*.pack")), reverse=True)
    monkeypatch.setattr(pull, "ALONE_BYTES", sizes[1])  # (the two largest go alone)
    spans: list[tuple[float, float, int, int]] = []  # (start, end, size, parts) of each pack's download
    real = DirectoryBackend.download

    def timed(self: DirectoryBackend, name: str, target: Path, size: int | None = None, moved: Moved = None,
              parts: int = 1) -> None:
        start = time.monotonic()
        time.sleep(0.1)  # (a slow link: downloads running at once overlap)
        real(self, name, target, size, moved, parts)
        if name.endswith(".pack"):
            spans.append((start, time.monotonic(), target.stat().st_size, parts))

    monkeypatch.setattr(DirectoryBackend, "download", timed)
    target = Store(tmp_path / "b")
    assert pull.STREAMS == 2 and pull.pull(target, remote).packs == 5
    spans.sort()
    assert [size for _, _, size, _ in spans[:2]] == sizes[:2]  # (the largest first, alone)
    assert [parts for _, _, _, parts in spans] == [2, 2, 1, 1, 1]
    for start, end, _, _ in spans[:2]:
        assert all(other_end <= start or other_start >= end for other_start, other_end, _, _ in spans
                   if (other_start, other_end) != (start, end))
    assert _most_at_once([(start, end) for start, end, _, _ in spans[2:]]) == 2
    assert set(target.iter_objects()) == set(source.iter_objects())
