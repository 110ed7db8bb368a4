"""One OpenAI-compatible chat-completions client (httpx) shared by runners and the judge.

Retries only transient failures (408/409/425/429/5xx, a 402 with a `Retry-After`, timeouts, transport errors) with
exponential backoff plus jitter, honouring `retry-after-ms` and `Retry-After`. A single request is retried, never a
whole conversation.
The API key is read from the environment per call and never logged, stored or put in an error.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import math
import random
import re
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import httpx

from clawstore.host.machine_settings import BACKOFF_CAP_S
from clawstore.providers.decoding import decoded, reply_text, text_encoding
from clawstore.providers.endpoint import Endpoint
from clawstore.providers.errors import ProviderError
from clawstore.providers.httpx_path import SharedCheck, Streams, Watchdog, close_reply
from clawstore.providers.pacing import Pacer, current_pacer
from clawstore.providers.reply_check import message_problem, usage_problem
from clawstore.providers.usage import SENT_UNANSWERED, UNREADABLE_REPLY, Usage, tokens_reported
from clawstore.providers.wire import RequestHead, Wire
from clawstore.values import jsontext
from clawstore.values.urls import shown_url

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
BODY_EXCERPT_CHARS = 2000
DEFAULT_TIMEOUT_S = 120.0
MAX_BODY_BYTES = 64 * 1024 * 1024
_SECONDS = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")  # Retry-After's delta-seconds (a fraction and a sign tolerated)


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date); None if absent/bad.

    Only a decimal number counts as seconds: float() also reads "nan", "inf" and "1e400", and a NaN wait
    compares false with every deadline (a build's paused run waited forever)."""
    if not value:
        return None
    value = value.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
        return max(seconds, 0.0) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = time.time() if now is None else now
    return max(when.timestamp() - now, 0.0)


def reply_wait(headers: httpx.Headers) -> float | None:
    """Seconds a reply asks to wait: OpenAI's (and Azure OpenAI's) `retry-after-ms` first, as their SDK reads it, then
    `Retry-After`; None if neither is a wait (an `-ms` value as `Retry-After`'s seconds: a decimal number)."""
    millis = headers.get("retry-after-ms")
    if millis is not None and _SECONDS.fullmatch(millis.strip()):
        seconds = float(millis) / 1000
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return parse_retry_after(headers.get("retry-after"))


@dataclass(frozen=True)
class ChatResult:
    """A successful chat completion.

    `usage` sums every attempt of this call (failed attempts that reported usage included);
    `raw_usage` is the successful response's own `usage` object, and `own_usage` that object read (once, here: the
    runner and the judge add it to what their answers spent, runners/llm_probe.py, evaluate/judge.py; None when
    `raw_usage` is); `attempt_log` lists the failed attempts before it (code, status, wait) for the run's trace.
    """

    message: dict[str, Any]
    usage: Usage
    provider_meta: dict[str, Any]
    attempts: int
    attempt_log: list[dict[str, Any]] = field(default_factory=list)
    raw_usage: dict[str, Any] | None = None
    latency_s: float = 0.0
    own_usage: Usage | None = None


class _ReplyCookies(httpx.Cookies):
    """A client's cookies, read from a reply only when it sets some: httpx wraps every reply and its request in
    urllib's cookie objects (a URL parse, the headers copied twice) to find none, a tenth of an exchange's CPU."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers or "set-cookie2" in response.headers:
            super().extract_cookies(response)


class _Client(httpx.Client):
    """httpx's client with _ReplyCookies: the same cookies kept and sent (tests/providers: a Set-Cookie).

    A leased one also holds a `Wire` (h11 over a plain socket, providers/wire.py) its requests go through while
    httpx would send them as they are: no proxy from the environment, no cookie kept; and the `Streams` its
    connections through httpx were opened on, for the watchdog that ends an exchange at its deadline."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._cookies = _ReplyCookies(self._cookies)
        self.wire: Wire | None = None
        self.streams: Streams | None = None

    def close(self) -> None:
        if self.wire is not None:
            self.wire.close()
        super().close()


class _DeferredTLS(ssl.SSLContext):
    """The TLS context a leased httpx client holds: it hands each socket to the real one (`ProviderClient._tls_context`,
    made, and the CA bundle loaded, ~20 ms of CPU, at the first connection that speaks TLS), so a client whose requests
    all go to http:// servers (a local model server, the stand-in) or through its Wire never loads it. Itself it
    trusts no CA and requires a verified peer: a handshake made without the hand-over fails, never goes unverified."""

    _real: Callable[[], ssl.SSLContext]

    def __new__(cls, real: Callable[[], ssl.SSLContext]) -> _DeferredTLS:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)  # (CERT_REQUIRED, check_hostname: as the real one)
        context._real = real
        return context

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:  # type: ignore[override]
        return self._real().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:  # type: ignore[override]
        return self._real().wrap_bio(*args, **kwargs)  # (TLS through an https proxy)


@dataclass
class _Failure:
    code: str
    message: str
    retryable: bool
    status_code: int | None = None
    timed_out: bool = False
    provider_code: str | None = None
    retry_after: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class ProviderClient:
    """Thread-safe: one client for every thread of a build (an httpx client leased per request in flight).

    `backoff_base`/`backoff_cap` shape the backoff, `retry_after_cap` bounds a `Retry-After` wait, which holds back this
    model at this provider only. `close()` wakes threads in a backoff. Details: docs/runners.md (Details by module)."""

    def __init__(
        self,
        *,
        backoff_base: float = 0.5,
        backoff_cap: float = BACKOFF_CAP_S,
        retry_after_cap: float = 60.0,
        default_timeout: float = DEFAULT_TIMEOUT_S,
        max_connections: int = 64,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
    ):
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.default_timeout = default_timeout
        self._rng = rng or random.Random()
        self._rng_lock = threading.Lock()
        self._closed = threading.Event()
        self._resume_at: dict[tuple[str, str], float] = {}  # (base URL, model) -> when its Retry-After passed
        self._resume_lock = threading.Lock()
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        # A pool of httpx clients, one per request in flight, instead of every thread on one: a shared pool
        # polls each of its idle connections twice per request under one lock (httpcore), which cost a build
        # with 16 threads more CPU than the request itself. A given transport is one shared client, as before.
        self._idle: list[httpx.Client] = []
        self._clients: list[httpx.Client] = []
        self._clients_lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None  # see _tls_context
        # Made once per chat URL and per timeout, not per request: httpx parses a URL given as text, and makes
        # a Timeout of a Timeout, on every request it builds.
        self._urls: dict[str, httpx.URL] = {}
        self._timeouts: dict[float, tuple[httpx.Timeout, dict[str, Any]]] = {}
        self._heads: dict[tuple[tuple[str, str], ...], list[tuple[bytes, bytes]]] = {}  # see _request
        self._wire_heads: dict[tuple[str, tuple[tuple[str, str], ...]], RequestHead] = {}
        self._watchdog = Watchdog()  # ends an exchange through httpx at its deadline (providers/httpx_path.py)
        self._shared = _Client(limits=self._limits, transport=transport, follow_redirects=False) \
            if transport is not None else None

    def __enter__(self) -> ProviderClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        with self._clients_lock:
            clients, self._clients, self._idle = self._clients, [], []
        for http in clients + ([self._shared] if self._shared is not None else []):
            http.close()
        self._watchdog.stop()

    def _lease(self) -> httpx.Client:
        """An httpx client no other request is using now (made when none is free)."""
        if self._shared is not None:
            return self._shared
        with self._clients_lock:
            if self._idle:
                return self._idle.pop()
            if self._closed.is_set():
                raise ProviderError("cancelled", _cancelled_text(self._closed))
            http = _Client(limits=self._limits, verify=_DeferredTLS(self._tls_context), follow_redirects=False)
            http.streams = Streams()
            if not http._mounts:  # no proxy in the environment: its requests go through a Wire
                http.wire = Wire(self._tls_context)
            self._clients.append(http)
            return http

    def _tls_context(self) -> ssl.SSLContext:
        """Made once: each client would load the CA bundle again (HTTP/1.1 offered by ALPN, as httpcore does)."""
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls

    def _give_back(self, http: httpx.Client) -> None:
        if http is self._shared:
            return
        with self._clients_lock:
            if not self._closed.is_set():
                self._idle.append(http)

    def backoff_delay(self, attempt: int) -> float:
        """Wait before retry number `attempt` (0-based): half fixed, half random ("equal jitter")."""
        ceiling = min(self.backoff_cap, self.backoff_base * (2**attempt))
        with self._rng_lock:
            jitter = self._rng.uniform(0, ceiling / 2)
        return ceiling / 2 + jitter

    def chat(
        self,
        endpoint: Endpoint,
        body: dict[str, Any],
        timeout: float | None = None,
        retries: int = 5,
    ) -> ChatResult:
        """POST `body` to `<base_url>/chat/completions`; up to `retries + 1` attempts.

        Raises MissingApiKeyError before any request if the endpoint's key variable is unset,
        ProviderError when the request fails for good.
        """
        api_key = endpoint.api_key()
        headers = {"Content-Type": "application/json", "X-Title": "clawstore"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        payload = request_payload(body)
        limit = self._timeout(timeout if timeout is not None else self.default_timeout)
        retries = max(int(retries), 0)
        held = (endpoint.base_url, str(body.get("model")))  # what a Retry-After holds back
        pacer = current_pacer()
        usage = Usage.unsent()  # (no attempt made yet: nothing sent)
        attempt_log: list[dict[str, Any]] = []
        started = time.monotonic()
        for attempt in range(retries + 1):
            if self._closed.is_set() or not self._wait_for(held, pacer):
                raise ProviderError("cancelled", _cancelled_text(self._closed), usage=usage,
                                    attempts=attempt, attempt_log=attempt_log)
            sent_at = time.monotonic()
            outcome = self._attempt(endpoint, payload, headers, limit, api_key)
            usage = usage + outcome[1]
            if isinstance(outcome[0], ChatResult):
                pacer.succeeded()
                result = outcome[0]
                return ChatResult(
                    message=result.message,
                    usage=usage,
                    provider_meta=result.provider_meta,
                    attempts=attempt + 1,
                    attempt_log=attempt_log,
                    raw_usage=result.raw_usage,
                    latency_s=time.monotonic() - started,
                    own_usage=result.own_usage,
                )
            failure = outcome[0]
            entry: dict[str, Any] = {"attempt": attempt + 1, "code": failure.code,
                                     "status_code": failure.status_code}
            attempt_log.append(entry)
            retrying = failure.retryable and attempt < retries
            rate_limited = failure.status_code == 429 or failure.retry_after is not None
            delay = 0.0
            if failure.retry_after is not None:
                delay = min(failure.retry_after, self.retry_after_cap)
            elif retrying or rate_limited:
                delay = self.backoff_delay(attempt)
            if rate_limited:  # the build holds this model back (a last attempt's 429 too) and learns from it
                pacer.throttled(delay, failure.retry_after, sent_at, halve=failure.status_code == 429)
            if not retrying:
                raise ProviderError(
                    failure.code,
                    failure.message + _timeouts_said(failure.code, attempt_log),
                    retryable=failure.retryable,
                    status_code=failure.status_code,
                    timed_out=failure.timed_out,
                    provider_code=failure.provider_code,
                    usage=usage,
                    attempts=attempt + 1,
                    attempt_log=attempt_log,
                    metadata=failure.metadata,
                )
            if failure.retry_after is not None:
                self._hold_back(held, delay)
            entry["wait_seconds"] = round(delay, 4)
            log.info("provider %s (status %s) from %s; retry %d/%d in %.2fs", failure.code,
                     failure.status_code, shown_url(endpoint.base_url), attempt + 1, retries, delay)
            # A rate limit's wait gives the build's slot to other models; a failing server's does not.
            resumed = pacer.pause(delay, self._closed) if rate_limited else not self._closed.wait(delay)
            if not resumed:
                raise ProviderError("cancelled", _cancelled_text(self._closed), usage=usage,
                                    attempts=attempt + 1, attempt_log=attempt_log)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _timeout(self, seconds: float) -> tuple[httpx.Timeout, dict[str, Any]]:
        """httpx's Timeout of `seconds` and the request extension it makes of it."""
        made = self._timeouts.get(seconds)
        if made is None:
            limit = httpx.Timeout(seconds)
            made = self._timeouts[seconds] = (limit, limit.as_dict())
        return made

    def _url(self, text: str) -> httpx.URL:
        url = self._urls.get(text)
        if url is None:
            url = self._urls[text] = httpx.URL(text)
        return url

    def _request(self, http: httpx.Client, url: httpx.URL, payload: bytes, headers: dict[str, str],
                 extensions: dict[str, Any]) -> httpx.Request:
        """The request `http.build_request` makes, header for header, without merging the client's default headers
        into ours again per request (a third of building it): every client here has httpx's defaults and no base
        URL or parameters, so the merged headers depend on ours only. A client holding cookies merges as before."""
        if http.cookies:
            return http.build_request("POST", url, content=payload, headers=headers, extensions=extensions)
        shape = tuple(headers.items())
        head = self._heads.get(shape)
        if head is None:
            merged = httpx.Headers(http.headers)
            merged.update(headers)
            head = self._heads[shape] = merged.raw
        return httpx.Request("POST", url, content=payload, headers=head, extensions=extensions)

    def _hold_back(self, held: tuple[str, str], delay: float) -> None:
        with self._resume_lock:
            self._resume_at[held] = max(self._resume_at.get(held, 0.0), time.monotonic() + delay)

    def _wait_for(self, held: tuple[str, str], pacer: Pacer) -> bool:
        """Wait until no Retry-After holds back requests for this model at this provider; False if
        closed (or the build interrupted) meanwhile."""
        while True:
            with self._resume_lock:
                wait = self._resume_at.get(held, 0.0) - time.monotonic()
            if wait <= 0:
                return True
            if not pacer.pause(wait, self._closed):
                return False

    def _attempt(
        self,
        endpoint: Endpoint,
        payload: bytes,
        headers: dict[str, str],
        limit: tuple[httpx.Timeout, dict[str, Any]],
        api_key: str | None,
    ) -> tuple[ChatResult | _Failure, Usage]:
        """One HTTP exchange → (result or failure, usage that this attempt reported).

        The timeout is a wall-clock bound on the whole exchange: httpx's own timeouts apply per
        network operation, so a server that drips bytes is also cut off at the deadline (through the wire
        before each read, its head's too; through httpx by a watchdog that shuts the connection down, and as the
        body arrives).
        """
        seconds = limit[0].read or self.default_timeout
        deadline = time.monotonic() + seconds
        timed_out = _Failure("timeout", f"no complete response from {endpoint.chat_url} within {seconds:g}s",
                             True, timed_out=True)
        http = self._lease()
        try:
            return self._exchange(http, endpoint, payload, headers, limit, api_key, deadline, timed_out)
        finally:
            self._give_back(http)

    def _exchange(self, http: httpx.Client, endpoint: Endpoint, payload: bytes, headers: dict[str, str],
                  limit: tuple[httpx.Timeout, dict[str, Any]], api_key: str | None, deadline: float,
                  timed_out: _Failure) -> tuple[ChatResult | _Failure, Usage]:
        url = self._url(endpoint.chat_url)
        wire = http.wire if http.wire is not None and not http.cookies else None
        streams = None
        try:
            if wire is None:
                extensions: dict[str, Any] = {"timeout": limit[1]}
                shared = None
                if http.streams is not None:
                    streams = http.streams
                    extensions["trace"] = streams.trace
                    self._watchdog.arm(streams, deadline)
                else:  # a given transport's client, shared by the threads: none of its own to cut
                    shared = SharedCheck()
                    extensions["trace"] = shared.trace
                streamed = http.send(self._request(http, url, payload, headers, extensions), stream=True)
                status, reply_headers, reason = streamed.status_code, streamed.headers, streamed.reason_phrase
                chunks = streamed.iter_bytes()  # (decompressed, if it was compressed)
                if shared is None:
                    finish = functools.partial(close_reply, streamed)
                else:
                    shared.reply, finish = streamed, streamed.close
            else:
                status, reason, raw = wire.send(url, self._wire_head(http, url, headers), payload, limit[0], deadline)
                reply_headers = httpx.Headers(raw)
                chunks, finish = decoded(wire.body(limit[0].read), reply_headers), wire.done
            try:
                body = bytearray()
                for chunk in chunks:
                    body += chunk
                    if time.monotonic() > deadline:
                        return timed_out, UNANSWERED
                    if len(body) > MAX_BODY_BYTES:
                        return _Failure("invalid_response", f"response from {endpoint.chat_url} is larger "
                                        f"than {MAX_BODY_BYTES} bytes", False, status_code=status), UNANSWERED
                if streams is not None and streams.expired:  # cut at the deadline: a body read until its
                    return timed_out, UNANSWERED  # connection closes ends there too, as far as it came
            except httpx.DecodingError as exc:  # a compressed body that does not decompress
                return _Failure("invalid_response", f"malformed reply from {endpoint.chat_url}: {exc}", False,
                                status_code=status), UNANSWERED
            finally:
                finish()
        except httpx.TimeoutException as exc:
            return timed_out, NOT_SENT if isinstance(exc, NOTHING_SENT) else UNANSWERED
        except httpx.TransportError as exc:
            if streams is not None and time.monotonic() >= deadline:  # the watchdog ended it
                return timed_out, NOT_SENT if isinstance(exc, NOTHING_SENT) else UNANSWERED
            text = _scrub(str(exc), api_key)
            return _Failure("transport_error", f"{type(exc).__name__} talking to {endpoint.chat_url}: {text}",
                            True), NOT_SENT if isinstance(exc, NOTHING_SENT) else UNANSWERED
        finally:
            if streams is not None:
                self._watchdog.disarm(streams)
        if wire is not None and ("set-cookie" in reply_headers or "set-cookie2" in reply_headers):
            # kept as httpx keeps them; this client's requests then go through httpx, which sends them
            http.cookies.extract_cookies(httpx.Response(status, headers=reply_headers, request=httpx.Request(
                "POST", url)))
        # The reply as read, not a second httpx.Response: one made of the read bytes would decompress
        # them again (and cost a request's worth of header parsing).
        encoding = streamed.encoding if wire is None else text_encoding(reply_headers)
        reply = _Reply(status, reply_headers, str(url), reason, reply_text(body, encoding))
        return _interpret(reply, api_key)

    def _wire_head(self, http: httpx.Client, url: httpx.URL, headers: dict[str, str]) -> RequestHead:
        """The headers httpx sends with a request, in its order (Host, the client's, ours, Content-Length): made by
        httpx once per URL and header set, the length put in per request (providers/wire.py)."""
        shape = (str(url), tuple(headers.items()))
        made = self._wire_heads.get(shape)
        if made is None:
            raw = self._request(http, url, b"-", headers, {"timeout": {}}).headers.raw
            where = next(i for i, (name, _) in enumerate(raw) if name.lower() == b"content-length")
            made = self._wire_heads[shape] = RequestHead(url.raw_path, raw, where)
        return made


# json.dumps(ensure_ascii=False, allow_nan=False) makes an encoder of its options each call (half of its time for a
# chat body); one made once writes the same bytes (its encode keeps no state between calls, so threads share it).
_PAYLOAD_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def request_payload(body: dict[str, Any]) -> bytes:
    """A chat body's bytes as sent: `json.dumps(body, ensure_ascii=False, allow_nan=False)` in UTF-8."""
    return _PAYLOAD_ENCODER.encode(body).encode("utf-8")


# A request that failed before a byte of it left (no connection made): it cost nothing, whatever the prices (its usage
# says so: `nothing_sent`). Any other failure after the request went out (a timeout, a lost connection, a reply too
# large or undecodable) may have been counted and billed: its usage is unknown, never 0 (a declared price would make 0
# tokens a known 0.0 USD).
NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
UNANSWERED = Usage.not_believed(SENT_UNANSWERED)
NOT_SENT = Usage.unsent()


def _timeouts_said(code: str, attempt_log: list[dict[str, Any]]) -> str:
    """How many attempts a timeout held, after its `within 0.3s`: alone, that read as a wrong limit beside the run's
    latency of two attempts and a backoff (session 78). Nothing for one attempt."""
    timed_out = sum(1 for entry in attempt_log if entry["code"] == "timeout")
    if code != "timeout" or len(attempt_log) < 2:
        return ""
    if timed_out == len(attempt_log):
        return f" (each of {timed_out} attempts)"
    return f" ({timed_out} of {len(attempt_log)} attempts timed out)"


def _cancelled_text(closed: threading.Event) -> str:
    return "the provider client was closed" if closed.is_set() else "the build was interrupted during a rate-limit wait"


# A key shorter than this is no secret worth hiding, and replacing it would mangle ordinary text
# (a key "k" would turn every "task" in a reply into "tas[redacted]").
MIN_SCRUB_LENGTH = 8


def _scrub(text: str, api_key: str | None) -> str:
    """Remove an echoed API key from provider text before it can reach a record or an error: as it is, as a repr
    spells it (h11 quotes a header value it refuses, a key pasted with a line break, as `b'…\\n…'`), and as a JSON
    text may escape it (`_escaped_key`)."""
    if not api_key or len(api_key) < MIN_SCRUB_LENGTH:
        return text
    for form in (api_key, repr(api_key)[1:-1], repr(api_key.encode())[2:-1]):
        text = text.replace(form, "[redacted]")
    escaped = _escaped_key(api_key) if "\\" in text else None
    return escaped.sub("[redacted]", text) if escaped is not None else text


@functools.lru_cache(maxsize=16)
def _escaped_key(api_key: str) -> re.Pattern[str] | None:
    """The key as a JSON text may write it, decoded back to the key by whoever reads the text (the reply's error
    message, its content): each character but an ASCII letter or digit as itself or `\\uXXXX` (either case), `/`
    also as `\\/` (PHP's json_encode writes `/` so, .NET's System.Text.Json `+` as `\\u002B`: before session 73 a
    key holding one was kept and printed). None for a key JSON never escapes."""
    if all(c.isascii() and c.isalnum() for c in api_key):
        return None
    parts = []
    for c in api_key:
        if c.isascii() and c.isalnum():
            parts.append(c)
            continue
        forms = {c, f"\\u{ord(c):04x}", f"\\u{ord(c):04X}"} | ({"\\/"} if c == "/" else set())
        parts.append("(?:" + "|".join(map(re.escape, sorted(forms))) + ")")
    return re.compile("".join(parts))


def _error_fields(data: Any) -> tuple[str | None, str | None, Any]:
    """(message, provider_code, numeric code) from an OpenAI/OpenRouter `error` object, or vLLM's error body (its
    error object itself: `{"object": "error", "message", "type", "code"}`)."""
    if isinstance(data, dict) and data.get("object") == "error" and not isinstance(data.get("error"), dict):
        data = {"error": data}
    if not isinstance(data, dict) or not isinstance(data.get("error"), dict):
        return None, None, None
    err = data["error"]
    message = err.get("message") if isinstance(err.get("message"), str) else None
    provider_code = err.get("type") if isinstance(err.get("type"), str) else None
    code = err.get("code")
    if provider_code is None and code is not None:
        provider_code = str(code)
    return message, provider_code, code


@dataclass(frozen=True)
class _Reply:
    """An HTTP reply read whole: what _interpret looks at."""

    status_code: int
    headers: httpx.Headers
    url: str
    reason_phrase: str
    text: str


def _unread(data: Any, bad_usage: str | None, usage: Usage) -> Usage:
    """The usage of a 2xx reply claw cannot read as an answer: it was answered, so maybe billed, and what it cost is
    unknown unless it counted its tokens in numbers claw believes (never the 0 of nothing read, which a declared price
    makes $0). Asked only on those failures, not on every answer."""
    if bad_usage or not (isinstance(data, dict) and tokens_reported(data.get("usage"))):
        return Usage.not_believed(UNREADABLE_REPLY)
    return usage


def _interpret(response: _Reply, api_key: str | None) -> tuple[ChatResult | _Failure, Usage]:
    status = response.status_code
    text = _scrub(response.text, api_key)
    request_id = response.headers.get("x-request-id")
    meta: dict[str, Any] = {"body_excerpt": text[:BODY_EXCERPT_CHARS]}
    if request_id:
        meta["request_id"] = request_id
    unreadable = None  # why the body is not JSON claw can keep
    try:
        data: Any = jsontext.loads_reply(text) if text else None
    except ValueError as exc:
        data, unreadable = None, str(exc)
    bad_usage = usage_problem(data.get("usage")) if isinstance(data, dict) else None
    # numbers that fail the bounds are not believed, not even as the cost of a failed call
    usage = Usage.from_raw(data.get("usage")) if isinstance(data, dict) and not bad_usage else Usage()
    message, provider_code, numeric = _error_fields(data)
    if not 200 <= status < 300:
        retryable = is_retryable_status(status)
        # A 402 that says when to come back is a wait (OpenRouter's in-flight spending budget); without, it is final.
        retry_after = reply_wait(response.headers) if retryable or status == 402 else None
        retryable = retryable or retry_after is not None
        return _Failure("http_error", f"HTTP {status} from {response.url}: "
                        f"{message or text[:200] or response.reason_phrase}", retryable,
                        status_code=status, provider_code=provider_code, retry_after=retry_after,
                        metadata=meta), usage
    if unreadable is not None:
        return _Failure("invalid_response", f"malformed reply from {response.url}: {unreadable}",
                        False, status_code=status, metadata=meta), _unread(data, bad_usage, usage)
    if not isinstance(data, dict):
        return _Failure("invalid_response", f"response from {response.url} is not a JSON object",
                        False, status_code=status, metadata=meta), _unread(data, bad_usage, usage)
    choices = data.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict)):
        if message is not None:
            # OpenRouter reports some upstream failures as 200 + `error` with the real status inside.
            inner = numeric if isinstance(numeric, int) and not isinstance(numeric, bool) else None
            retryable = inner is not None and is_retryable_status(inner)
            return _Failure("http_error", f"provider error from {response.url}: {message}",
                            retryable, status_code=inner or status, provider_code=provider_code,
                            metadata=meta), usage
        return _Failure("invalid_response", f"response from {response.url} has no choices[0].message",
                        False, status_code=status, metadata=meta), _unread(data, bad_usage, usage)
    choice = choices[0]
    if message is not None or choice.get("finish_reason") == "error" or isinstance(choice.get("error"), dict):
        # OpenRouter answers 200 once the model began and reports a failure after that in the body: `error` beside
        # the choice or in it, whose finish_reason is "error", its content what came before. No answer: the provider's
        # failure, retried as its inner status says (none: as a 502), and what it was billed counted (unknown if not
        # said).
        if isinstance(choice.get("error"), dict):
            said, said_code, said_numeric = _error_fields(choice)
            message, provider_code, numeric = said or message, said_code or provider_code, said_numeric or numeric
        inner = numeric if isinstance(numeric, int) and not isinstance(numeric, bool) else None
        return _Failure("http_error", f"provider error from {response.url}: "
                        f"{message or 'the reply ended with finish_reason error'}",
                        inner is None or is_retryable_status(inner), status_code=inner or status,
                        provider_code=provider_code, metadata=meta), _unread(data, bad_usage, usage)
    malformed = message_problem(choice["message"], choice.get("finish_reason"))
    if malformed:
        return _Failure("invalid_response", f"malformed reply from {response.url}: {malformed}",
                        False, status_code=status, metadata=meta), _unread(data, bad_usage, usage)
    if bad_usage:  # the answer is kept (failing it, every build paid for it again); its usage is unknown, never 0
        usage = Usage.not_believed(bad_usage)
    provider_name = data.get("provider")
    if not isinstance(provider_name, str):
        provider_name = data.get("provider_name") if isinstance(data.get("provider_name"), str) else None
    provider_meta = {
        "provider_name": provider_name,
        "provider_model_id": data.get("model") if isinstance(data.get("model"), str) else None,
        "request_id": request_id,
        "response_id": data.get("id") if isinstance(data.get("id"), str) else None,
        "finish_reason": choice.get("finish_reason"),
        "native_finish_reason": choice.get("native_finish_reason"),
        "status_code": status,
        "created": data.get("created"),
    }
    raw_usage = data.get("usage") if isinstance(data.get("usage"), dict) and not bad_usage else None
    result = ChatResult(message=choice["message"], usage=usage, provider_meta=provider_meta, attempts=1,
                        raw_usage=raw_usage, own_usage=usage if raw_usage is not None else None)
    return result, usage

