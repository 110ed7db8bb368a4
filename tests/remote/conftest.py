from __future__ import annotations

from collections.abc import Iterator

import pytest

from clawstore.testing.standin import StandIn
from tests.support.s3server import FAKE_CREDENTIALS, s3_server
from tests.support.workspace import SECRET


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    with s3_server() as url:
        yield url


@pytest.fixture
def aws_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for name, value in FAKE_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    return s3_endpoint


@pytest.fixture
def provider(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    return standin
