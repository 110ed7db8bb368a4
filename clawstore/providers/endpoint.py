"""Where a chat request goes: an OpenAI-compatible base URL and the variable holding its API key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from clawstore.errors import ConfigError, UsageError, quoted
from clawstore.providers.errors import MissingApiKeyError
from clawstore.values.urls import chat_url_problem, credential_in_url, is_env_name, is_http_url, shown_url

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_API_KEY_ENV = "OPENROUTER_API_KEY"
BASE_URL_ENV = "OPENROUTER_BASE_URL"


def _normalise_base_url(url: str) -> str:
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint: `base_url` is the part before `/chat/completions`; `api_key_env` names the key's
    environment variable (None: no key sent), `key_optional` sends it only when set. The key itself is read only when a
    request is made."""

    base_url: str
    api_key_env: str | None = DEFAULT_API_KEY_ENV
    key_optional: bool = False

    @property
    def is_openrouter(self) -> bool:
        return urlsplit(self.base_url).netloc.endswith("openrouter.ai")

    @property
    def gateway(self) -> str:
        return "openrouter" if self.is_openrouter else "openai_compatible"

    @property
    def chat_url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def identity(self) -> dict[str, str]:
        """The part of a run's identity that names where it ran (never the key)."""
        return {"base_url": self.base_url}

    def key_env_in_use(self) -> str | None:
        """The variable whose key requests carry: None when none is (no key, or an optional one unset).
        Read without failing: a required key that is missing is `api_key()`'s error."""
        if self.api_key_env is None or (self.key_optional and not os.environ.get(self.api_key_env, "").strip()):
            return None
        return self.api_key_env

    def api_key(self) -> str | None:
        """The key from the environment; raises MissingApiKeyError if it is required but unset."""
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env, "").strip()
        if not value and self.key_optional:
            return None
        if not value:
            raise MissingApiKeyError(self.api_key_env, self.base_url)
        if not value.isascii():  # an HTTP header cannot carry it: a placeholder such as "sk-or-…" left as is
            raise MissingApiKeyError(self.api_key_env, self.base_url, "holds non-ASCII characters: not a real key")
        if not value.isprintable():  # a newline pasted with it: httpx's refusal would quote the key, escaped
            raise MissingApiKeyError(self.api_key_env, self.base_url, "holds control characters: not a real key")
        return value


def default_endpoint() -> Endpoint:
    """OpenRouter, or `$OPENROUTER_BASE_URL` when set (read now, at resolve time). OpenRouter needs its
    key; another server gets `$OPENROUTER_API_KEY` if it is set, and no Authorization header if not."""
    base = _normalise_base_url(os.environ.get(BASE_URL_ENV, "").strip() or DEFAULT_BASE_URL)
    credential = credential_in_url(base)
    if credential is not None:  # (the URL is in every run's identity and record, and pushed with them)
        raise UsageError(f"${BASE_URL_ENV} carries a credential ({credential}): the URL is stored with every run; "
                         f"put the key in ${DEFAULT_API_KEY_ENV} instead")
    if not is_http_url(base):  # (`not-a-url`: every run failed "Name or service not known", exit 1, costs unknown)
        raise UsageError(f"${BASE_URL_ENV} {quoted(shown_url(os.environ[BASE_URL_ENV]))}: must be an http(s) URL "
                         "such as http://127.0.0.1:8000/v1")
    if (problem := chat_url_problem(base)) is not None:
        raise UsageError(f"${BASE_URL_ENV} {quoted(shown_url(os.environ[BASE_URL_ENV]))}: {problem}")
    return Endpoint(base, DEFAULT_API_KEY_ENV, key_optional=base != DEFAULT_BASE_URL)


def resolve_endpoint(
    extras: Mapping[str, Any] | None = None, *, path: str | None = None, field: str | None = None
) -> Endpoint:
    """The endpoint a suite model entry names through its extras `base_url` / `api_key_env` (neither: the default,
    OpenRouter or `$OPENROUTER_BASE_URL`). `path`/`field` locate the entry in ConfigError messages. The cases:
    docs/runners.md (Details by module)."""
    extras = extras or {}
    prefix = f"{field}." if field else ""
    base_url = extras.get("base_url")
    has_key_env = "api_key_env" in extras
    key_env = extras.get("api_key_env")
    if key_env is not None and not isinstance(key_env, str):
        raise ConfigError("must be the name of an environment variable", path, f"{prefix}api_key_env")
    key_env = key_env.strip() if isinstance(key_env, str) else None
    if key_env and not is_env_name(key_env):  # (never echoed: most often the key itself, pasted here)
        raise ConfigError("must be the name of an environment variable (letters, digits and _), not its value", path,
                          f"{prefix}api_key_env")
    if base_url is None:
        endpoint = default_endpoint()
        if has_key_env:  # the model asks for a key: required
            endpoint = Endpoint(endpoint.base_url, key_env or None)
        return endpoint
    if not isinstance(base_url, str) or not is_http_url(base_url):
        raise ConfigError("must be an http(s) URL such as http://127.0.0.1:8000/v1", path,
                          f"{prefix}base_url")
    credential = credential_in_url(base_url)
    if credential is not None:
        raise ConfigError(f"carries a credential ({credential}): name the key's environment variable with "
                          "'api_key_env' instead", path, f"{prefix}base_url")
    if (problem := chat_url_problem(base_url)) is not None:
        raise ConfigError(problem, path, f"{prefix}base_url")
    return Endpoint(_normalise_base_url(base_url), key_env or None)
