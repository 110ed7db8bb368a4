"""A model server on this machine's loopback, an agent in a container with a network of its own (the engine's default
bridge, or a named network): 127.0.0.1 there is the container itself. Each turn failed after OpenClaw's retries (106 s
a turn, its cost `?`); the run now fails before any container starts, saying so and the fix, its cost a known 0."""

from __future__ import annotations

import pytest

from clawstore.runners.openclaw import run_openclaw
from tests.openclaw.conftest import payload

LOOPBACK = ["http://127.0.0.1:9/v1", "http://localhost:11434/v1", "http://localhost.:8000", "http://[::1]:8000",
            "http://127.1.2.3", "http://model.localhost:8000/v1", "http://0.0.0.0:8000/v1",
            "https://user:pw-s3cr3t@127.0.0.1:8443/v1"]


@pytest.mark.parametrize("url", LOOPBACK)
@pytest.mark.parametrize("network", [None, "bridge", "my-net"])
def test_a_loopback_endpoint_from_a_private_network_fails_at_once(make_spec, fake_docker, store, tmp_path,
                                                                  monkeypatch, url, network):
    if network is None:
        monkeypatch.delenv("CLAW_OPENCLAW_NETWORK", raising=False)
    else:
        monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", network)
    fake_docker.script(turns=[{"payload": payload("ok", usage={"input": 5, "output": 3})}])
    outcome = run_openclaw(make_spec(provider_base_url=url), store, tmp_path)
    error = outcome.artifact["error"]
    assert outcome.status == "failed" and error["code"] == "openclaw_endpoint_unreachable", error
    assert error["error_type"] == "execution_error" and error["retryable"] is True
    assert "CLAW_OPENCLAW_NETWORK=host" in error["message"], error["message"]
    assert (network or "bridge") in error["message"]
    assert "pw-s3cr3t" not in error["message"]  # (shown as claw shows URLs)
    assert fake_docker.calls("run") == [], "no container may start"
    usage = outcome.artifact["usage"]
    assert usage["cost_usd"] == 0 and usage["cost_source"] != "unknown", usage


@pytest.mark.parametrize("network", ["host", "container:x", "ns:/run/netns/x"])
def test_a_shared_loopback_runs_as_before(make_spec, fake_docker, store, tmp_path, monkeypatch, network):
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", network)
    fake_docker.script(turns=[{"payload": payload("ok")}])
    outcome = run_openclaw(make_spec(provider_base_url="http://127.0.0.1:9/v1"), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    assert [c["flags"]["network"] for c in fake_docker.calls("run")][-1] == network


@pytest.mark.parametrize("url", ["http://10.1.2.3:8000/v1", "http://model.internal/v1",
                                 "https://openrouter.ai/api/v1", "http://notlocalhost:8000/v1",
                                 "http://localhost.example.com/v1"])
def test_an_endpoint_off_loopback_runs_on_the_default_network(make_spec, fake_docker, store, tmp_path,
                                                               monkeypatch, url):
    monkeypatch.delenv("CLAW_OPENCLAW_NETWORK", raising=False)
    fake_docker.script(turns=[{"payload": payload("ok")}])
    outcome = run_openclaw(make_spec(provider_base_url=url), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    assert fake_docker.calls("run")
