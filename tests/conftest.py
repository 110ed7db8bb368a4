"""Fixtures every test directory may use: the stand-in provider server and one provider client."""

from collections.abc import Iterator

import pytest

from clawstore.providers import ProviderClient
from clawstore.testing.standin import StandIn


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def client() -> Iterator[ProviderClient]:
    # A tiny backoff base keeps retry tests fast; Retry-After is still honoured in full.
    with ProviderClient(backoff_base=0.01, backoff_cap=0.05) as shared:
        yield shared
