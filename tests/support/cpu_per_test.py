"""Opt-in pytest plugin: each test's wall time and CPU, its worker's own and its child processes', one row a test.

The suite is CPU-bound on two cores (docs/testing.md, "What the suite spends"): its wall time follows the CPU its
tests spend, which, unlike wall time, does not move with what else runs on the machine. Use:
`CPU_PER_TEST_DIR=/tmp/cpu python3 -m pytest -p tests.support.cpu_per_test ...`; each process writes
`<worker>-<pid>.tsv` there: node id, wall s, the worker's own CPU s, its reaped children's CPU s, its start (Unix
time: a worker's timeline shows which group ends the run last). A child is counted
when it is reaped: a server a session fixture starts shows at the test its teardown follows.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from typing import IO

import pytest

_rows: list[IO[str]] = []


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _out() -> IO[str]:
    if not _rows:
        folder = os.environ.get("CPU_PER_TEST_DIR", "cpu-per-test")
        os.makedirs(folder, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _rows.append(open(os.path.join(folder, f"{worker}-{os.getpid()}.tsv"), "a", buffering=1))  # noqa: SIM115
    return _rows[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    start, wall = time.time(), time.monotonic()
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    _out().write(f"{item.nodeid}\t{time.monotonic() - wall:.3f}\t{_cpu(resource.RUSAGE_SELF) - own:.3f}\t"
                 f"{_cpu(resource.RUSAGE_CHILDREN) - children:.3f}\t{start:.1f}\n")
