"""The OpenAI Batch API: a JSONL file of chat requests → `/files`, `/batches`, an output file.

Served by OpenAI and by other OpenAI-compatible servers (docs/batch.md names them). Each line's
reply is read and checked exactly as a synchronous reply is (`client._interpret`: the same bounds on
usage and content), so a batch answer and a direct one become the same `ChatResult`.
The API key is read from the environment per call and never logged, stored or put in an error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from clawstore.providers.client import (
    ChatResult,
    _error_fields,
    _Failure,
    _interpret,
    _Reply,
    _scrub,
    is_retryable_status,
    reply_wait,
)
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.errors import ProviderError
from clawstore.values import jsontext
from clawstore.values.urls import shown_url

# OpenAI's documented limits per batch input file (its Batch API guide): 50,000 requests, 200 MB.
MAX_REQUESTS_PER_FILE = 50_000
MAX_BYTES_PER_FILE = 200 * 1024 * 1024
CHAT_PATH = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
CONTROL_TIMEOUT_S = 60.0
CONTROL_ATTEMPTS = 4


def request_line(custom_id: str, body: dict[str, Any]) -> bytes:
    """One line of a batch input file: a chat request under the id its answer comes back with."""
    line = {"custom_id": custom_id, "method": "POST", "url": CHAT_PATH, "body": body}
    return json.dumps(line, ensure_ascii=False, allow_nan=False, sort_keys=True).encode("utf-8") + b"\n"


def split_files(lines: list[bytes], max_requests: int = MAX_REQUESTS_PER_FILE,
                max_bytes: int = MAX_BYTES_PER_FILE) -> Iterator[list[bytes]]:
    """The lines in order, cut into files within the provider's limits (a line over the byte limit
    alone goes in a file of its own: the provider refuses it, the build says so)."""
    current: list[bytes] = []
    size = 0
    for line in lines:
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            yield current
            current, size = [], 0
        current.append(line)
        size += len(line)
    if current:
        yield current


@dataclass(frozen=True)
class LineAnswer:
    """One output (or error) line: its custom_id and the reply as a ChatResult, or why it failed.

    `retry`: the line was not answered (expired, cancelled, a server error): send it again."""

    custom_id: str
    result: ChatResult | None
    error: ProviderError | None
    retry: bool


def read_lines(data: bytes, url: str, api_key: str | None) -> list[LineAnswer]:
    """Every line of an output or error file, each reply checked like a synchronous one."""
    answers = []
    for raw in data.splitlines():
        if not raw.strip():
            continue
        try:
            line = jsontext.loads(raw)  # (a line nested too deeply: malformed, not a RecursionError)
        except ValueError:
            continue  # a line without its custom_id cannot be matched; its node is sent again
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        answers.append(_answer(line, url, api_key))
    return answers


def _answer(line: dict[str, Any], url: str, api_key: str | None) -> LineAnswer:
    custom_id = line["custom_id"]
    response = line.get("response")
    if not isinstance(response, dict):
        error = line.get("error") if isinstance(line.get("error"), dict) else {}
        code = str(error.get("code") or "batch_line_failed")
        text = _scrub(str(error.get("message") or code), api_key)
        return LineAnswer(custom_id, None, ProviderError("http_error", f"batch line {code}: {text}",
                                                         retryable=True, provider_code=code), True)
    status = response.get("status_code")
    status = status if isinstance(status, int) and not isinstance(status, bool) else 200
    headers = {"x-request-id": response["request_id"]} if isinstance(response.get("request_id"), str) else {}
    body = json.dumps(response.get("body"), allow_nan=False)
    outcome, _ = _interpret(_Reply(status, httpx.Headers(headers), url, httpx.codes.get_reason_phrase(status), body),
                            api_key)
    if isinstance(outcome, ChatResult):
        return LineAnswer(custom_id, outcome, None, False)
    return LineAnswer(custom_id, None, _error(outcome), outcome.retryable)


def _error(failure: _Failure) -> ProviderError:
    return ProviderError(failure.code, failure.message, retryable=failure.retryable,
                         status_code=failure.status_code, timed_out=failure.timed_out,
                         provider_code=failure.provider_code, metadata=failure.metadata)


class BatchApi:
    """The Batch API of one endpoint (its `/files` and `/batches`), with a few retries per call."""

    def __init__(self, endpoint: Endpoint, http: httpx.Client | None = None, backoff_s: float = 0.5):
        self.endpoint = endpoint
        self._http = http or httpx.Client(timeout=CONTROL_TIMEOUT_S, follow_redirects=False)
        self._own = http is None
        self.backoff_s = backoff_s

    def close(self) -> None:
        if self._own:
            self._http.close()

    def __enter__(self) -> BatchApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def chat_url(self) -> str:
        return self.endpoint.chat_url

    def upload(self, data: bytes) -> str:
        """Upload one input file; its file id."""
        reply = self._call("POST", "/files", data={"purpose": "batch"},
                           files={"file": ("batch.jsonl", data, "application/jsonl")})
        return str(_field(reply, "id", "/files"))

    def create(self, input_file_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        return self._call("POST", "/batches", json={"input_file_id": input_file_id, "endpoint": CHAT_PATH,
                                                    "completion_window": COMPLETION_WINDOW, "metadata": metadata})

    def get(self, batch_id: str) -> dict[str, Any]:
        return self._call("GET", f"/batches/{batch_id}")

    def cancel(self, batch_id: str) -> dict[str, Any]:
        return self._call("POST", f"/batches/{batch_id}/cancel")

    def find(self, input_file_id: str) -> dict[str, Any] | None:
        """The batch made from `input_file_id` (one a killed process created but did not record)."""
        listing = self._call("GET", "/batches", params={"limit": 100})
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and batch.get("input_file_id") == input_file_id:
                return batch
        return None

    def content(self, file_id: str) -> bytes:
        return self._send("GET", f"/files/{file_id}/content").content

    # ---- plumbing ---------------------------------------------------------------------------------
    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = self._send(method, path, **kwargs)
        try:
            value = jsontext.loads(response.content)  # (nested too deeply: not a JSON object, as below)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise ProviderError("invalid_response",
                                f"{method} {shown_url(self.endpoint.base_url)}{path}: not a JSON object",
                                status_code=response.status_code)
        return value

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        api_key = self.endpoint.api_key()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        url = f"{self.endpoint.base_url}{path}"
        for attempt in range(CONTROL_ATTEMPTS):
            try:
                response = self._http.request(method, url, headers=headers, **kwargs)
            except httpx.HTTPError as exc:
                failure = ProviderError("transport_error", f"{method} {shown_url(url)}: {_scrub(str(exc), api_key)}",
                                        retryable=True)
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return response
                # A 402 that says when to come back is a wait, as for a chat request (providers/client.py); without,
                # it is final: out of credit (builder/refused.py stops the build's requests to this endpoint).
                wait = reply_wait(response.headers) if status == 402 else None
                # (scrubbed whole, then cut: a key the cut crossed was no longer whole in the excerpt, its head kept)
                failure = ProviderError("http_error", f"HTTP {status} from {method} {shown_url(url)}: "
                                        f"{_said(_scrub(response.text, api_key))[:200]}",
                                        retryable=is_retryable_status(status) or wait is not None, status_code=status)
            if not failure.retryable or attempt == CONTROL_ATTEMPTS - 1:
                raise failure
            time.sleep(self.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")


def _said(text: str) -> str:
    """The error's message in a refusal's JSON body (`{"error": {"message": ...}}`), else the body."""
    try:
        message = _error_fields(jsontext.loads(text))[0]  # (nested too deeply: the body, as below)
    except ValueError:
        message = None
    return message if isinstance(message, str) and message else text


def _field(reply: dict[str, Any], name: str, path: str) -> Any:
    value = reply.get(name)
    if not isinstance(value, str) or not value:
        raise ProviderError("invalid_response", f"the reply to {path} has no {name}")
    return value
