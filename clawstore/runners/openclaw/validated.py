"""Configs `openclaw config validate` accepted, remembered in the store (`validated/<64 hex>.json`): a run whose
validate container would see exactly what an accepted one saw skips it (2-5 s of wall, ~2 s of a core, which every
run paid before). What the key covers, why, and how far an entry is trusted: docs/openclaw.md (Details by module)."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from clawstore.host.durable import write_file_atomic
from clawstore.runners.openclaw.config import CONTAINER_KEY_ENV
from clawstore.runners.openclaw.container import (
    MOUNT_POINT,
    OPENCLAW_ENV,
    PROXY_VARS,
    EngineSettings,
    engine_address_shown,
    engine_env,
)
from clawstore.values.canonical import canonical_json

if TYPE_CHECKING:
    from clawstore.store.store import Store

DIRECTORY = "validated"  # in the store
FORMAT = 1  # of the key's document and of an entry: a change here remembers nothing an older claw accepted
ENTRY_MAX = 4096  # bytes; an entry is ~150: what is longer is damaged, not read whole
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Remembered:
    """An accepted validation: how long its container took (None: the entry does not say)."""

    duration_s: float | None


def validation_key(image: str, image_digest: str | None, settings: EngineSettings, argv: Sequence[str],
                   env: Mapping[str, str], root: Path) -> str | None:
    """The BLAKE3 of everything the validate container can see or depend on, or None when it cannot be known (no
    image digest: a tag alone names no content, nor does it under `CLAW_OPENCLAW_PULL=always`, which runs what the
    registry holds then; an entry of the mounted root that is not a file, directory or link).
    `env`: the container's environment, of which only the names enter, each with whether it is set (never a value:
    the provider key is one). The mounted root is read whole, its workspace included."""
    if not image_digest or settings.pull == "always":
        return None
    try:
        listing = root_listing(root)
    except (OSError, ValueError):  # (a file it cannot read, a name no UTF-8 spells: validated as before)
        return None
    if listing is None:
        return None
    names = {*PROXY_VARS, *settings.extra_env, CONTAINER_KEY_ENV, *OPENCLAW_ENV, *env}
    doc: dict[str, Any] = {
        "format": FORMAT,
        "image": image,
        "image_digest": image_digest,
        # The CLI as written, network, pull policy, user, resource limits, the allowed variables' names.
        "settings": dataclasses.asdict(settings),
        # Which engine the CLI talks to: its address as a container record keeps it (a credential masked).
        "engine": {name: engine_address_shown(value) for name, value in sorted(engine_env().items())},
        "argv": list(argv),
        "mount": MOUNT_POINT,
        "env_set": {name: name in env for name in sorted(names)},
        "fixed_env": dict(OPENCLAW_ENV),  # (claw's own constants, no secret)
        "root": listing,
    }
    try:
        return blake3.blake3(canonical_json(doc)).hexdigest()
    except ValueError:
        return None


def root_listing(root: Path) -> list[list[Any]] | None:
    """Every entry under `root`, sorted: `[path, "d", mode]`, `[path, "f", mode, size, blake3 of the bytes]`,
    `[path, "l", target]`; None if one is none of those (a pipe, a socket, a device: nothing a run writes)."""
    found: list[list[Any]] = []
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                path = prefix + entry.name
                info = entry.stat(follow_symlinks=False)
                mode = stat.S_IMODE(info.st_mode)
                if stat.S_ISDIR(info.st_mode):
                    found.append([path, "d", mode])
                    pending.append((Path(entry.path), path + "/"))
                elif stat.S_ISLNK(info.st_mode):
                    found.append([path, "l", os.readlink(entry.path)])
                elif stat.S_ISREG(info.st_mode):
                    found.append([path, "f", mode, info.st_size, _file_digest(entry.path)])
                else:
                    return None
    return sorted(found, key=lambda item: item[0].encode("utf-8", "surrogateescape"))


def _file_digest(path: str) -> str:
    digest = blake3.blake3()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _entry_path(store: Store, key: str) -> Path:
    return store.root / DIRECTORY / f"{key}.json"


def lookup(store: Store, key: str) -> Remembered | None:
    """The accepted validation remembered under `key`; None when there is none, or the entry is not one this claw
    wrote for that key (torn, emptied, another format): then the container runs, as it would have."""
    try:
        with open(_entry_path(store, key), "rb") as fh:
            data = fh.read(ENTRY_MAX + 1)
    except OSError:
        return None
    if len(data) > ENTRY_MAX:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # (a UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key \
            or doc.get("valid") is not True:
        return None
    duration = doc.get("duration_s")
    known = isinstance(duration, int | float) and not isinstance(duration, bool) and 0 <= duration < 1e9
    return Remembered(float(duration) if known else None)


def remember(store: Store, key: str, duration_s: float) -> bool:
    """Remember that the validation keyed `key` was accepted: written whole or not at all (a temp file renamed, as two
    builds validating the same config at once both may; the same bytes but for the duration). Derived data, not made
    durable: a crash may lose it, never tear it, and a lost one costs one validation. False when it could not be
    written (a read-only store, a full disk): nothing is remembered, the run goes on."""
    body = canonical_json({"format": FORMAT, "key": key, "valid": True, "duration_s": round(duration_s, 3)})
    path = _entry_path(store, key)
    try:
        path.parent.mkdir(exist_ok=True)
        write_file_atomic(path, body, store.tmp_dir, durable=False)
    except OSError:
        return False
    return True
