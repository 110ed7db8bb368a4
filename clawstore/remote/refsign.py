"""Signed refs on a remote: who moved `refs/<name>` to a value, checked before a pull moves anything (a mutable ref
cannot carry its own signature). The statements and checks: docs/remote.md (Details by module)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from clawstore.errors import UsageError
from clawstore.host.scratch import writer_scratch_dir
from clawstore.remote.backends import Backend
from clawstore.store.core.ids import PREFIX
from clawstore.values import jsontext

SIGS = "refsigs/"
KIND = "remote-ref"
MAX_BYTES = 4096  # a statement is ~300 bytes: anything larger is not one


def statement_path(name: str, value: str) -> str:
    return f"{SIGS}{name}/{value[len(PREFIX):]}"


def publish(backend: Backend, name: str, value: str, work: Path) -> None:
    """Upload this user's signed statement that ref `name` is `value` (before the ref is swapped)."""
    from clawstore.trust import signature

    with tempfile.NamedTemporaryFile(dir=work, prefix="refsig-", suffix=".json") as fh:
        fh.write(signature.signed_json({"kind": KIND, "name": name, "value": value}))
        fh.flush()
        backend.upload(Path(fh.name), statement_path(name, value))


def signers(backend: Backend, refs: dict[str, str], tmp_dir: Path) -> dict[str, str | None]:
    """{ref name: the key that signed its current value, or None when no statement exists}.
    UsageError naming the ref when a statement is forged, damaged or about another ref or value."""
    listed = backend.list(SIGS)
    found: dict[str, str | None] = {}
    with writer_scratch_dir(tmp_dir, "refsigs") as work:
        for name, value in sorted(refs.items()):
            where = statement_path(name, value)
            if where not in listed:
                found[name] = None
                continue
            if listed[where] > MAX_BYTES:
                raise UsageError(f"remote ref {name}: its signed statement {where} is {listed[where]} bytes, "
                                 "not a statement")
            target = work / "statement.json"
            backend.download(where, target, listed[where])  # (no more than listed: it may have grown since)
            found[name] = _check(target.read_bytes(), name, value)
    return found


def _check(body: bytes, name: str, value: str) -> str | None:
    from clawstore.trust import signature

    try:
        doc = jsontext.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise UsageError(f"remote ref {name}: its signed statement is not JSON") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("name") != name or doc.get("value") != value:
        raise UsageError(f"remote ref {name}: its signed statement is about another ref or value (forged)")
    try:
        return signature.signer(doc)
    except signature.BadSignature as exc:
        raise UsageError(f"remote ref {name}: {exc}") from None
