"""Containers a killed build left running: found by the build id they are labelled with, stopped once that build is
dead. When and how: docs/openclaw.md (Details by module)."""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from clawstore.host.durable import write_file_atomic
from clawstore.runners.openclaw.container import (
    LABEL,
    EngineSettings,
    engine_address_shown,
    engine_env,
    labelled_containers,
    remove_container,
)
from clawstore.values.canonical import canonical_json
from clawstore.values.urls import shown_text

if TYPE_CHECKING:
    from clawstore.store.store import Store

RECORDS = "containers"  # in the store
BUILD_LABEL = f"{LABEL}.build"
STORE_LABEL = f"{LABEL}.store"
ATTEMPT_LABEL = f"{LABEL}.attempt"  # one run of a case on a Ray node: stopped by the driver if its worker dies
BUILD_LEASE = "build "  # + the build id: the purpose of a build's lease (builder/engine.py)


@dataclass
class OrphanReport:
    stopped: list[str] = field(default_factory=list)  # containers removed, as `<name> (build <id>)`
    unanswered: list[str] = field(default_factory=list)  # engines that could not be asked: records kept


def owner_labels(store: Store, build_id: str, settings: EngineSettings) -> tuple[str, ...]:
    """The labels naming the build a container belongs to, recorded in the store first (once per build,
    CLI and engine) so that whoever finds the build dead knows where to look."""
    engine = {name: engine_address_shown(value) for name, value in engine_env().items()}  # (see _engine_to_ask)
    doc = {"build_id": build_id, "docker_cli": settings.docker_cli, "engine": engine, "host": socket.gethostname()}
    body = canonical_json(doc)
    path = store.root / RECORDS / f"{build_id}.{blake3.blake3(body).hexdigest()[:16]}.json"
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        write_file_atomic(path, body, store.tmp_dir)  # durable before the container it names exists
    return f"{BUILD_LABEL}={build_id}", f"{STORE_LABEL}={store.root.resolve()}"


def stop_orphans(store: Store, build_id: str | None = None) -> OrphanReport:
    """Remove the containers of this store's dead builds (started on this host), or only of `build_id` (an
    interrupted build's own, once its lease is let go); see the module's text."""
    report = OrphanReport()
    directory = store.root / RECORDS
    try:
        records = sorted(directory.glob("*.json"))
    except OSError:
        return report
    if not records:
        return report
    live = {lease.purpose[len(BUILD_LEASE):] for lease in store.list_leases()
            if lease.alive and lease.purpose.startswith(BUILD_LEASE)}  # (read after the records: above)
    host = socket.gethostname()
    for path in records:
        record = _read_record(path)
        if record is None:  # a damaged record names nothing to stop
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        if record.host != host or record.build_id in live or build_id not in (None, record.build_id):
            continue
        settings = EngineSettings(docker_cli=record.docker_cli)
        engine = _engine_to_ask(record.engine)
        names, why = stop_labelled(settings, f"{BUILD_LABEL}={record.build_id}", engine)
        if names is None:
            report.unanswered.append(f"{record.docker_cli}: {shown_text(why)}")
            continue
        report.stopped += [f"{name} (build {record.build_id})" for name in names]
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return report


def stop_labelled(settings: EngineSettings, label: str,
                  engine: dict[str, str] | None = None) -> tuple[list[str] | None, str]:
    """Remove every container carrying `label` (`key=value`); the names removed, or (None, why) when the engine
    cannot be asked."""
    names, why = labelled_containers(settings, label, engine)
    for name in names or ():
        remove_container(settings, name, engine)
    return names, why


def _engine_to_ask(recorded: dict[str, str]) -> dict[str, str]:
    """The engine variables a record names, each as this process has it when it is the same address but for the
    credential the record masks (`tcp://***@host:2375`; an ssh login's name is kept): a record never holds a password,
    and an engine behind one is reached from the environment that built (else its record waits, unanswered)."""
    current = engine_env()
    return {name: current[name] if name in current and engine_address_shown(current[name]) == value else value
            for name, value in recorded.items()}


@dataclass(frozen=True)
class _Record:
    build_id: str
    docker_cli: str
    engine: dict[str, str]
    host: str


def _read_record(path: Path) -> _Record | None:
    try:
        doc = json.loads(path.read_bytes())
        record = _Record(doc["build_id"], doc["docker_cli"], dict(doc["engine"]), doc["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    strings = [record.build_id, record.docker_cli, record.host, *record.engine.keys(), *record.engine.values()]
    return record if all(isinstance(v, str) for v in strings) else None
