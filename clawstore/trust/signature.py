"""Signing and checking what travels: a manifest (an archive, a remote pack's listing) signed as a whole.

The signature covers the canonical JSON of the manifest without its `signature` field: the campaign
head, the refs, the action-cache entries and the id and size of every object in the file (each object
is checked against its id on import), so nothing can be swapped, added or left out after signing.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography.exceptions import InvalidSignature

from clawstore.errors import ClawError, UsageError
from clawstore.trust import keys
from clawstore.values.canonical import canonical_json

FIELD = "signature"
# What a signed message begins with, before the manifest's canonical JSON: a signature made for something else
# never fits here.
MESSAGE_PREFIX = b"clawstore signed manifest v1\n"


class BadSignature(ClawError):
    """A signature that is malformed or does not verify; the caller names the document that carried it."""


def _message(manifest: dict[str, Any]) -> bytes:
    return MESSAGE_PREFIX + canonical_json({k: v for k, v in manifest.items() if k != FIELD})


def signature_over(message: bytes | memoryview | Any) -> dict[str, str]:
    """The `signature` field for `message`: MESSAGE_PREFIX then the canonical JSON of the manifest without that
    field, as bytes or any buffer (an export signs its manifest from a file, mapped: never held as one value)."""
    private = keys.signing_key()
    return {"key": keys.public_text(private.public_key()), "ed25519": base64.b64encode(private.sign(message)).decode()}


def sign(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with a `signature` field made with the user's key."""
    return {**manifest, FIELD: signature_over(_message(manifest))}


def signed_json(manifest: dict[str, Any]) -> bytes:
    """`manifest` with its signature, as JSON: encoded once, for signing and writing alike (a reader
    parses it, so its `signature` need not sit where canonical order would put it)."""
    if FIELD in manifest:
        raise ValueError(f"a manifest to sign has no {FIELD!r} field yet")
    body = canonical_json(manifest)
    field = canonical_json(signature_over(MESSAGE_PREFIX + body))
    return body[:-1] + (b"," if manifest else b"") + f'"{FIELD}":'.encode() + field + b"}"


def signer(manifest: dict[str, Any]) -> str | None:
    """The key whose valid signature the manifest carries; None if unsigned. BadSignature if the
    signature is malformed or does not verify (the content changed after signing, or it was forged)."""
    return signer_of(manifest.get(FIELD), _message(manifest))


def signer_of(field: Any, message: bytes | bytearray | memoryview) -> str | None:
    """`signer` given the manifest's `signature` field (None: unsigned) and the message it signs: MESSAGE_PREFIX then
    the manifest's canonical JSON without that field, as received (an archive's manifest checked over its own bytes,
    the field cut out: never encoded again)."""
    if field is None:
        return None
    if not isinstance(field, dict) or not isinstance(field.get("key"), str) or not isinstance(
            field.get("ed25519"), str):
        raise BadSignature("its signature is malformed")
    try:
        public = keys.parse_public(field["key"])
    except UsageError as exc:  # (the key's own text, as `claw trust add` says it)
        raise BadSignature(str(exc)) from None
    try:
        public.verify(base64.b64decode(field["ed25519"], validate=True), message)
    except (InvalidSignature, binascii.Error, ValueError):
        raise BadSignature(f"its signature by {field['key']} does not verify (changed after signing, "
                           "or forged)") from None
    return keys.public_text(public)
