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

from clawstore.canonical import canonical_json
from clawstore.errors import UsageError
from clawstore.trust import keys

FIELD = "signature"
_CONTEXT = b"clawstore signed manifest v1\n"  # a signature made for something else never fits here


def _message(manifest: dict[str, Any]) -> bytes:
    return _CONTEXT + canonical_json({k: v for k, v in manifest.items() if k != FIELD})


def sign(manifest: dict[str, Any]) -> dict[str, Any]:
    """`manifest` with a `signature` field made with the user's key."""
    private = keys.signing_key()
    signature = private.sign(_message(manifest))
    return {**manifest, FIELD: {"key": keys.public_text(private.public_key()),
                                "ed25519": base64.b64encode(signature).decode()}}


def signer(manifest: dict[str, Any]) -> str | None:
    """The key whose valid signature the manifest carries; None if unsigned. UsageError if the
    signature is malformed or does not verify (the content changed after signing, or it was forged)."""
    field = manifest.get(FIELD)
    if field is None:
        return None
    if not isinstance(field, dict) or not isinstance(field.get("key"), str) or not isinstance(
            field.get("ed25519"), str):
        raise UsageError("its signature is malformed")
    public = keys.parse_public(field["key"])
    try:
        public.verify(base64.b64decode(field["ed25519"], validate=True), _message(manifest))
    except (InvalidSignature, binascii.Error, ValueError):
        raise UsageError(f"its signature by {field['key']} does not verify (changed after signing, "
                         "or forged)") from None
    return keys.public_text(public)
