"""Fixtures every test directory may use: the stand-in provider server and one provider client."""

import gc
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import clawstore
from clawstore.providers import ProviderClient
from clawstore.testing.standin import StandIn
from tests.support.descriptors import described, left_open, open_descriptors, still_open
from tests.support.edited import edited_note
from tests.support.reaped import reap  # noqa: F401 - a fixture every test may use

_CONFIG_HOMES = itertools.count()


@pytest.fixture(scope="session")
def config_homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of every test's own config directory, one in the worker's temporary root."""
    return tmp_path_factory.mktemp("xdg-config")


@pytest.fixture(autouse=True)
def own_config_dir(config_homes: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test is a user of its own: a fresh $XDG_CONFIG_HOME (signing key, trust list), inherited by
    the claw processes it starts, so no test reads or writes the machine's real ~/.config/claw. Made by a count, not
    `tmp_path_factory.mktemp`: that lists the worker's temporary root to number each directory, and one a test there
    made each test's mktemp and tmp_path list twice as many (a worker's ~1,300 tests: O(n²), seconds of its CPU)."""
    home = config_homes / str(next(_CONFIG_HOMES))
    home.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


# A test may leave this many descriptors open: a module's shared client keeps the connection a test's request
# opened, alive for the next test (tests/providers/test_wire.py). They must be closed by the module's end.
LEFT_BY_A_TEST = 2


CALL_FAILED = pytest.StashKey[bool]()
SET_UP_AT = pytest.StashKey[int]()  # time.time_ns() when the test's setup began


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "setup":
        item.stash[SET_UP_AT] = int(call.start * 1e9)
    if report.when == "call" and report.failed:
        item.stash[CALL_FAILED] = True
        # (looked for only when a test failed: the package's ~500 stats are not paid by every test)
        note = edited_note(Path(clawstore.__file__).parent, item.stash.get(SET_UP_AT, int(call.start * 1e9)))
        if note is not None:
            report.sections.append(("claw's code edited during the test", note))
    return report


@pytest.fixture(scope="module", autouse=True)
def no_descriptor_left_by_a_module() -> Iterator[dict[int, tuple[str, str]]]:
    """The few descriptors each test of the module left (what each is, which test), failed on at the module's
    end if still open once its module-scoped fixtures are gone: a leak of one a test is found here."""
    kept: dict[int, tuple[str, str]] = {}
    yield kept
    leaks = still_open({fd: what for fd, (what, _) in kept.items()})
    if leaks:
        tests = ", ".join(dict.fromkeys(kept[fd][1][:80] for fd in leaks))
        pytest.fail(f"the module's tests left {len(leaks)} descriptors open: {described(leaks)}; left by {tests}",
                    pytrace=False)


@pytest.fixture(autouse=True)
def no_descriptor_left_open(request: pytest.FixtureRequest,
                            no_descriptor_left_by_a_module: dict[int, tuple[str, str]]) -> Iterator[None]:
    """A test that leaves descriptors open (a server, client, pipe or file never closed) fails at its teardown:
    left, they pile up in its xdist worker until a later test runs out ("Too many open files", session 62's CI).
    Module and session fixtures are set up before it and torn down after: only the test's own are counted."""
    before = open_descriptors()
    yield
    if request.node.stash.get(CALL_FAILED, False):
        return  # (its traceback holds what it opened: the failure is what to read)
    # The item holds the values of the test's fixtures until its teardown is over; the fixtures are torn down by
    # now (this one, set up first, is torn down last): let go of them, so what only needs collecting is closed.
    request.node.funcargs.clear()
    # An in-process claw command freezes the collector's heap (builder/cyclic_gc.py: right for a process that runs
    # one command): in a worker, every cycle alive then, a store's or build's files among them, would never be freed.
    # Unfrozen unasked: gc.unfreeze() moves the frozen list whole (nothing frozen: nothing moved), while
    # gc.get_freeze_count() counted it object by object, the worker's whole heap after each such test (16 ms a test in
    # tests/config/test_schema_table.py, 2.4 of its 7.7 s).
    gc.unfreeze()
    left = left_open(before, LEFT_BY_A_TEST)
    if len(left) > LEFT_BY_A_TEST:
        pytest.fail(f"the test left {len(left)} descriptors open: {described(left)}", pytrace=False)
    for fd, what in left.items():
        no_descriptor_left_by_a_module[fd] = (what, request.node.name)


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def client() -> Iterator[ProviderClient]:
    # A tiny backoff base keeps retry tests fast; Retry-After is still honoured in full.
    with ProviderClient(backoff_base=0.01, backoff_cap=0.05) as shared:
        yield shared


# The suite runs on three xdist workers (`-n 3`, pyproject's addopts). Tests that share one heavy
# machine-wide resource run on one worker, one after the other: the private Docker engine of the
# real-engine OpenClaw tests, the Ray clusters (Ray's side ports are per host, not per cluster), and
# the llama-cpp-python server of the real-server tier (one per worker session: spread over workers, each would
# start its own).
# (xdist's own `--dist loadgroup` marks cannot do it: pytest 9.2 ignores the node-id rewrite they use.)
# The first prefix a test's id starts with decides. The image's second build needs no engine: alone, it
# runs beside the engine's tests instead of after them.
_SERIAL_GROUPS = {
    "tests/openclaw/test_image_reproducible.py": "image-build",
    "tests/openclaw/": "docker-engine",
    "tests/distributed/": "ray-cluster",
    "tests/realserver/": "llama-server",
}


def serial_group(nodeid: str) -> str:
    """The unit of work a test is scheduled in: its group, or the test alone."""
    return next((group for prefix, group in _SERIAL_GROUPS.items() if nodeid.startswith(prefix)), nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class SerialGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return serial_group(nodeid)

    return SerialGroupScheduling(config, log)
