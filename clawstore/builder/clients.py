"""What a build asks of a provider client: the in-process one (providers/), the Ray cluster's (ray_client.py),
a batch line's answer (batch_layer.py), or one that captures a request (run_batch.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from clawstore.providers.client import ChatResult
    from clawstore.providers.endpoint import Endpoint
    from clawstore.runners.openclaw.runner import OpenClawOutcome, OpenClawSpec


class ChatClient(Protocol):
    def chat(self, endpoint: Endpoint, body: dict[str, Any], timeout: float | None = None,
             retries: int = 5) -> ChatResult: ...


class OpenClawCluster(Protocol):
    """Runs an OpenClaw case elsewhere, given the objects its agent tree names (builder/ray_client.py)."""

    def run_openclaw(self, spec: OpenClawSpec, objects: dict[str, bytes]
                     ) -> tuple[OpenClawOutcome, dict[str, bytes]]: ...


class ProviderConnection(ChatClient, Protocol):
    """One build's client, in-process or the Ray cluster's (which also runs OpenClaw cases): closed when
    the build ends."""

    def close(self) -> None: ...
