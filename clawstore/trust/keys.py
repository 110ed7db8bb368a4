"""The user's signing key and trust list, in `$XDG_CONFIG_HOME/claw/` (default `~/.config/claw/`).

    signing_key     the private key: 32 raw bytes, base64, mode 0600 (made on first use; never in a
                    store, an archive or a log)
    trusted_keys    one public key a line (`claw-ed25519:<base64 of 32 bytes>`); the user's own key is
                    trusted whether or not it is listed
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from clawstore.errors import UsageError
from clawstore.host.durable import naming, temp_name, write_file_atomic

KEY_PREFIX = "claw-ed25519:"
PRIVATE_FILE = "signing_key"
TRUST_FILE = "trusted_keys"


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "claw"


def public_text(key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return KEY_PREFIX + base64.b64encode(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()


def parse_public(text: str) -> Ed25519PublicKey:
    """A public key from its one-line form (UsageError naming what is wrong)."""
    text = text.strip()
    if not text.startswith(KEY_PREFIX):
        raise UsageError(f"not a claw public key: {text[:40]!r} (expected {KEY_PREFIX}<base64>)")
    try:
        raw = base64.b64decode(text[len(KEY_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 32:
        raise UsageError(f"not a claw public key: {text[:40]!r} (the base64 must hold 32 bytes)")
    return Ed25519PublicKey.from_public_bytes(raw)


def signing_key() -> Ed25519PrivateKey:
    """The user's private key, made on first use (processes or threads racing make one: the first link
    wins; each racer writes a temp file of its own, named by process, start time and a random token)."""
    directory = config_dir()
    path = directory / PRIVATE_FILE
    if not path.exists():
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

        fresh = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        tmp = directory / f".{PRIVATE_FILE}.{temp_name()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:  # (the write inside: a full disk left the temp file, with part of a private key, before session 72)
            with naming(path), os.fdopen(fd, "wb") as fh:  # (it said only "No space left on device", session 72)
                fh.write(base64.b64encode(fresh) + b"\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    try:
        raw = base64.b64decode(path.read_bytes().strip(), validate=True)
        return Ed25519PrivateKey.from_private_bytes(raw)
    except (OSError, binascii.Error, ValueError):
        raise UsageError(f"{path}: not a claw signing key (move it away to make a new one)") from None


def own_public() -> str:
    return public_text(signing_key().public_key())


def trusted() -> set[str]:
    """Every key the user trusts: their own and those in the trust list."""
    path = config_dir() / TRUST_FILE
    try:
        lines = _trust_text(path).splitlines()
    except FileNotFoundError:
        lines = []
    return {line.strip() for line in lines if line.strip()} | {own_public()}


def _trust_text(path: Path) -> str:
    """The trust list's text; one that is not UTF-8 is one line naming it (a UnicodeDecodeError's traceback of
    `claw trust`, `archive import` and `pull` before session 72)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start + 1}); it lists trusted keys, one a line "
                         "(claw trust add writes it)") from None


@contextlib.contextmanager
def _trust_list() -> Iterator[set[str]]:
    """The trust list, to change in place: read and written back under a lock, so two users of it at
    once (two `claw trust add`) never drop each other's key; written atomically and durably."""
    directory = config_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = os.open(directory / f".{TRUST_FILE}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = directory / TRUST_FILE
        listed = set(_trust_text(path).split()) if path.exists() else set()
        before = set(listed)
        yield listed
        if listed != before:
            data = "".join(f"{key}\n" for key in sorted(listed)).encode()
            write_file_atomic(path, data, directory, mode=0o600)
    finally:
        os.close(lock)  # releases the flock


def add_trusted(text: str) -> str:
    key = public_text(parse_public(text))
    with _trust_list() as listed:
        listed.add(key)
    return key


def remove_trusted(text: str) -> bool:
    key = public_text(parse_public(text))
    with _trust_list() as listed:
        if key not in listed:
            return False
        listed.discard(key)
    return True
