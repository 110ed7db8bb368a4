"""Fixtures every test directory may use: the stand-in provider server and one provider client."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawstore.providers import ProviderClient
from clawstore.testing.standin import StandIn


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test is a user of its own: a fresh $XDG_CONFIG_HOME (signing key, trust list), inherited by
    the claw processes it starts, so no test reads or writes the machine's real ~/.config/claw."""
    home = tmp_path_factory.mktemp("xdg-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


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
