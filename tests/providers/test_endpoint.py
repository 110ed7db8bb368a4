"""Endpoint resolution from suite model extras and the environment."""

from __future__ import annotations

import pytest

from clawstore.errors import ConfigError
from clawstore.providers import DEFAULT_BASE_URL, Endpoint, MissingApiKeyError, default_endpoint, resolve_endpoint


def test_default_endpoint_reads_base_url_at_resolve_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    assert default_endpoint() == Endpoint(DEFAULT_BASE_URL, "OPENROUTER_API_KEY")
    assert default_endpoint().gateway == "openrouter"
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9999/v1/")
    endpoint = resolve_endpoint({})
    assert endpoint.identity() == {"base_url": "http://127.0.0.1:9999/v1"}
    assert endpoint.chat_url == "http://127.0.0.1:9999/v1/chat/completions"
    assert endpoint.api_key_env == "OPENROUTER_API_KEY" and endpoint.gateway == "openai_compatible"


def test_only_openrouter_requires_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another base URL gets OPENROUTER_API_KEY when it is set, and no key (no header) when it is not."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:8080/v1")
    assert resolve_endpoint({}).api_key() is None and resolve_endpoint({}).key_env_in_use() is None
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-for-the-proxy")
    assert resolve_endpoint({}).api_key() == "sk-for-the-proxy"
    assert resolve_endpoint({}).key_env_in_use() == "OPENROUTER_API_KEY"  # (an OpenClaw agent gets it too)
    monkeypatch.delenv("OPENROUTER_API_KEY")
    with pytest.raises(MissingApiKeyError, match="PROXY_KEY"):  # the model asks for a key
        resolve_endpoint({"api_key_env": "PROXY_KEY"}).api_key()
    for openrouter in (None, DEFAULT_BASE_URL + "/"):
        if openrouter is None:
            monkeypatch.delenv("OPENROUTER_BASE_URL")
        else:
            monkeypatch.setenv("OPENROUTER_BASE_URL", openrouter)
        with pytest.raises(MissingApiKeyError, match="OPENROUTER_API_KEY is not set"):
            resolve_endpoint({}).api_key()


def test_model_extras_name_another_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENROUTER_BASE_URL", raising=False)
    local = resolve_endpoint({"base_url": "http://localhost:11434/v1", "primary_params": {}})
    assert local == Endpoint("http://localhost:11434/v1", None)
    keyed = resolve_endpoint({"base_url": "https://api.example.net/v1", "api_key_env": "EXAMPLE_KEY"})
    assert keyed == Endpoint("https://api.example.net/v1", "EXAMPLE_KEY")
    other_key = resolve_endpoint({"api_key_env": "MY_OPENROUTER_KEY"})
    assert other_key == Endpoint(DEFAULT_BASE_URL, "MY_OPENROUTER_KEY")
    assert resolve_endpoint({"api_key_env": None}).api_key_env is None


def test_identity_never_holds_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_FOR_IDENTITY", "sk-identity-secret")
    endpoint = Endpoint("http://127.0.0.1:1/v1", "SECRET_FOR_IDENTITY")
    assert endpoint.api_key() == "sk-identity-secret"
    assert "sk-identity-secret" not in repr(endpoint.identity()) + repr(endpoint)


@pytest.mark.parametrize("extras,field", [
    ({"base_url": "localhost:8000"}, "models[m1].base_url"),
    ({"base_url": 42}, "models[m1].base_url"),
    ({"base_url": "ftp://x/v1"}, "models[m1].base_url"),
    ({"api_key_env": ["A"]}, "models[m1].api_key_env"),
])
def test_bad_extras_are_config_errors(extras: dict, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_endpoint(extras, path="configs/suites/s.yaml", field="models[m1]")
    assert caught.value.field == field and caught.value.path == "configs/suites/s.yaml"
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith(f"configs/suites/s.yaml: {field}: ")


def test_missing_key_names_the_variable_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMPTY_KEY_VAR", "  ")
    with pytest.raises(MissingApiKeyError, match="EMPTY_KEY_VAR"):
        Endpoint("http://127.0.0.1:1/v1", "EMPTY_KEY_VAR").api_key()
