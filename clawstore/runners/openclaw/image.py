"""Image identity: the digest a tag points at, so a re-tagged image makes runs stale."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

QUERY_TIMEOUT_S = 30.0


def _digest_of(repo_digests: Any, image_id: Any) -> str | None:
    # A registry digest (`repo@sha256:…`) names the manifest; an image loaded or built locally has
    # none, and its id (the digest of its config) identifies its content instead.
    if isinstance(repo_digests, list):
        for entry in repo_digests:
            if isinstance(entry, str) and "@" in entry:
                return entry.split("@", 1)[1]
    if isinstance(image_id, str) and image_id.startswith("sha256:"):
        return image_id
    return None


def _via_sdk(image: str) -> str | None:
    import docker  # the SDK talks to $DOCKER_HOST directly; only for the docker engine

    client = docker.from_env(version="auto", timeout=int(QUERY_TIMEOUT_S))
    try:
        found = client.images.get(image)
        return _digest_of(found.attrs.get("RepoDigests"), found.attrs.get("Id"))
    finally:
        client.close()


def _via_cli(image: str, docker_cli: str) -> str | None:
    try:
        done = subprocess.run([docker_cli, "image", "inspect", image], capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return None
    first = data[0] if isinstance(data, list) and data else {}
    if not isinstance(first, dict):
        return None
    return _digest_of(first.get("RepoDigests"), first.get("Id"))


def engine_name(docker_cli: str) -> str:
    """The container engine a run profile's `docker_cli` names: its basename (`/usr/bin/docker` -> `docker`). A run's
    key holds this, not where the CLI is installed (docs/openclaw.md); the CLI runs as written."""
    return Path(docker_cli.strip()).name


def resolve_image_digest(image: str, docker_cli: str = "docker") -> str | None:
    """`sha256:…` for `image` in the local engine, or None when it cannot be resolved (no engine,
    image not present). Never raises."""
    if engine_name(docker_cli) == "docker":
        try:
            digest = _via_sdk(image)
            if digest:
                return digest
        except Exception:  # noqa: BLE001 - SDK missing, socket unreachable, image absent: try the CLI
            pass
    return _via_cli(image, docker_cli)
