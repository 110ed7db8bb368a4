"""The real server of this tier: llama-cpp-python's, started once for the tier's modules (tests/conftest.py runs
them on one worker), behind a logging relay per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.openclaw.engine import in_ci
from tests.realserver.campaign import KEY_ENV
from tests.realserver.llama_server import LlamaServer, start_server
from tests.realserver.relay import Relay
from tests.realserver.tiny_model import write_model

N_CTX = 2048  # the judge's prompt (about 1,400 bytes, one token each) must fit
API_KEY = "sk-llama-test-key-0123456789"


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The server with the tiny model loaded. Without llama-cpp-python: a skip with the reason, and
    under CI=true a failure (CI must not pass with this tier silently not run)."""
    root = tmp_path_factory.mktemp("llama")
    server, reason = start_server(write_model(root / "tiny.gguf", N_CTX), N_CTX, API_KEY, root / "server.log")
    if server is None:
        message = f"llama-cpp-python server unavailable: {reason}"
        if in_ci():
            pytest.fail(f"{message} (CI=true: .ci/run installs it)", pytrace=False)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def relay(llama: LlamaServer) -> Iterator[Relay]:
    with Relay(llama.base_url) as running:
        yield running


@pytest.fixture
def server_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """claw's environment for this tier: the server's key, a store of the test's own, no OpenRouter key."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    monkeypatch.setenv("CLAW_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
