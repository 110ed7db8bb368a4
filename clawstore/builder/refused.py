"""Endpoints that refused this build for good: a final 402 (out of credit: no `Retry-After`) says the provider will not
serve this key, so no further request goes to that endpoint in this build, runs or judgements alike. The 402 may answer
a chat request of the build's client, a provider batch's upload or creation (builder/batching.py), or an OpenClaw
agent's own request (read in its transcript: runners/openclaw/runner.py `openclaw_out_of_credit`). Details:
docs/building.md (Outcomes and faults)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from clawstore.providers.errors import ProviderError
from clawstore.providers.usage import Usage
from clawstore.values.urls import shown_url

if TYPE_CHECKING:
    from clawstore.providers.endpoint import Endpoint

BUILD = "in this build"
COLLECTING = "while collecting the campaign's batches"  # `claw batch status`, `claw status` (builder/batch_collect.py)

EndpointKey = tuple[str, str | None]  # (base URL, the key's variable): credit is a key's at one provider


def _key(endpoint: Endpoint) -> EndpointKey:
    # The variable whose key is sent, not the one declared: a provider batch's record keeps the one in use (none for a
    # server $OPENROUTER_BASE_URL names, $OPENROUTER_API_KEY unset), a node's endpoint the declared one; one 402 is
    # one refusal whichever side met it (before session 77 it was filed twice, and the other name still asked)
    return endpoint.base_url, endpoint.key_env_in_use()


def _named(key: EndpointKey) -> str:
    url, variable = key
    return shown_url(url) + (f" (key ${variable})" if variable else "")


def is_final_402(error: BaseException) -> bool:
    """Out of credit: a 402 the provider gave no time to come back after (one with `Retry-After` is retried)."""
    return isinstance(error, ProviderError) and error.status_code == 402 and not error.retryable \
        and error.code == "http_error" and not error.metadata.get("not_sent")


class Refusals:
    """The endpoints a final 402 came from in this build, what each said, and what was not sent to them since."""

    def __init__(self, where: str = BUILD) -> None:
        # where nothing more was sent, as the words say it: a build, or `claw batch status` / `claw status` collecting
        # batch lines outside one (COLLECTING; before session 77 they said "in this build" there too)
        self.where = where
        self._lock = threading.Lock()
        self._said: dict[EndpointKey, str] = {}  # the first 402's message, per endpoint
        self.not_sent = 0  # requests refused here (a conversation's next turn, a judgement already started)
        self.not_started: dict[str, int] = {}  # node kind -> nodes not started for it

    def __bool__(self) -> bool:
        return bool(self._said)

    def refuses(self, endpoint: Endpoint | None) -> bool:
        return endpoint is not None and _key(endpoint) in self._said

    def note(self, endpoint: Endpoint, error: BaseException) -> None:
        """A request to `endpoint` failed with `error`: a final 402 refuses the endpoint from now on."""
        if is_final_402(error):
            assert isinstance(error, ProviderError)
            # (the provider's words: "HTTP 402 from <url>: <words>", or "provider error from <url>: <words>")
            said = error.message.split(": ", 1)[1] if " from " in error.message.split(": ", 1)[0] else error.message
            self.refuse(endpoint, said)

    def refuse(self, endpoint: Endpoint, said: str) -> None:
        """`endpoint` answered a final 402 saying `said` where claw's client did not send (an OpenClaw agent's own
        request, read in its transcript): refused from now on, as for a request of the client's."""
        with self._lock:
            self._said.setdefault(_key(endpoint), said[:200])

    def check(self, endpoint: Endpoint) -> None:
        """Raise, before anything is sent, for an endpoint that refused this build (nothing spent: 0, known)."""
        said = self._said.get(_key(endpoint))
        if said is None:
            return
        with self._lock:
            self.not_sent += 1
        raise ProviderError("http_error", f"not sent: {_named(_key(endpoint))} answered HTTP 402 earlier "
                            f"{self.where}: {said}", status_code=402, usage=Usage.unsent(), attempts=0,
                            metadata={"status_code": 402, "not_sent": True})

    def skipped(self, kind: str) -> None:
        with self._lock:
            self.not_started[kind] = self.not_started.get(kind, 0) + 1

    def message(self) -> str | None:
        """One line: which endpoints refused, and what was not done for it (None: none refused)."""
        if not self._said:
            return None
        names = "; ".join(f"{_named(key)} answered HTTP 402: {said.rstrip('.')}" for key, said in self._said.items())
        kinds = {"run": "run", "judge": "judgement"}
        undone = [f"{count} {kinds.get(kind, kind)}{'s' if count != 1 else ''}"
                  for kind, count in sorted(self.not_started.items())]
        if self.not_sent:
            undone.append(f"{self.not_sent} request{'s' if self.not_sent != 1 else ''} of nodes already started")
        return (f"out of credit: {names}. Nothing more was sent there {self.where}: not sent "
                f"{', '.join(undone) or 'nothing (none was left)'}; the next build sends "
                f"{'them' if self.where == BUILD else 'what was refused or not sent'}")
