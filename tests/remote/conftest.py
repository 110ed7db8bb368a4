from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawstore.testing.standin import StandIn
from tests.support.s3server import FAKE_CREDENTIALS, make_bucket, s3_server
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


@pytest.fixture(params=["dir", "s3"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh remote: a directory, then a bucket on the loopback S3 server. Tests of what happens above
    the backend run on S3 alone (`parametrize("remote_url", ["s3"], indirect=True)`): a directory
    remote is proven end to end by the team round trip and `build --remote`'s pull, and file by file by
    test_backends.py and test_packs.py; each run of both costs the suite seconds of real `claw` builds."""
    if request.param == "dir":
        return str(tmp_path / "shared-remote")
    endpoint = request.getfixturevalue("aws_env")
    bucket = "team-" + secrets.token_hex(4)
    make_bucket(endpoint, bucket)
    return f"s3://{bucket}/bench"


@pytest.fixture
def provider(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    monkeypatch.setenv("OPENROUTER_BASE_URL", standin.base_url)
    return standin
