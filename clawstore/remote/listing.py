"""A pack's listing on a remote (`packs/<hex>.ids`): what the pack holds, signed by its pusher.

Formats and how they are read: docs/remote.md (Details by module); every listing is
decoded into one typed document (`decode`: `Listing`)."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import blake3

from clawstore.errors import UsageError
from clawstore.store import face
from clawstore.store.core.ids import PREFIX, is_hex64, is_oid
from clawstore.values import jsontext

FORMAT = 4
FORMATS = (2, 3, FORMAT)  # the listings of packs; one without a format is a bundle's
_LOWER_HEX = re.compile(r"[0-9a-f]*")


@dataclass(frozen=True, slots=True)
class Listing:
    """A decoded listing, whatever its format: the hex ids of the pack's objects (None in format 4: the pack's own
    table names them, `table` and `rows` name that table; `object_ids` reads them from it), its entries {key id:
    record id}, `signed`: what its signature covers; `format` None: a bundle's (an older claw's campaign archive,
    imported whole: no pack, no size); `document`: the hex id of the entries document the pack also holds."""

    objects: list[str] | None
    actions: dict[str, str]
    signed: dict[str, Any]
    format: int | None = FORMAT
    pack: str | None = None
    size: int | None = None
    document: str | None = None
    table: str | None = None
    rows: int = 0

    @property
    def is_bundle(self) -> bool:
        return self.format is None

    @property
    def count(self) -> int:
        """How many objects the pack holds besides its entries document."""
        return len(self.objects) if self.objects is not None else self.signed["objects"]

    @property
    def unadopted(self) -> bool:
        """Are its entries marked as what the pusher's killed builds finished, no build adopted yet (`encode`)?"""
        return self.signed.get(UNADOPTED) is True and self.format == FORMAT

    @property
    def campaigns(self) -> frozenset[str]:
        """The campaigns whose killed builds finished a marked listing's entries (`encode`): a pull narrowed to one of
        them takes the listing; empty (no field, or not a list of names: a listing marked before the field) for whole
        pulls only."""
        names = self.signed.get(CAMPAIGNS) if self.unadopted else None
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            return frozenset()
        return frozenset(names)

    @property
    def document_ids(self) -> list[str]:
        """The id of the entries document the pack also holds ([] for most listings)."""
        return [] if self.document is None else [self.document]


class ListingError(ValueError):
    """A listing that cannot be read (`not_json`: not even its JSON)."""

    def __init__(self, why: str, not_json: bool = False):
        super().__init__(why)
        self.not_json = not_json


def entries(actions: dict[bytes, bytes]) -> bytes:
    """Entries (key digest -> record digest) as a listing carries them: key and record, by key."""
    return b"".join(sorted(map(bytes.__add__, actions.keys(), actions.values())))


UNADOPTED = "unadopted"  # a listing's field: its entries are what the pusher's killed builds finished (remote/push.py)
CAMPAIGNS = "campaigns"  # a marked listing's field: the campaigns of those killed builds (a narrowed pull's choice)


def encode(pack: str, size: int, table: bytes, count: int, pairs: bytes, document: str | None,
           unadopted: bool = False, campaigns: Collection[str] = ()) -> bytes:
    """The signed listing of a pack (its BLAKE3 hex name and size) whose `table` (face.pack_table) names `count`
    objects besides its entries `document`, carrying the entries `pairs` (made by `entries`). `unadopted`: marked as
    what the pusher's killed builds finished and no build adopted yet (`"unadopted": true`: a field a claw before
    session 77 does not read, taking the entries as any listing's); `campaigns`: of those killed builds (`"campaigns":
    [...]`, sorted; none: no field), so that a pull narrowed to one of them takes the listing too."""
    from clawstore.trust import signature

    fields: dict[str, Any] = {"format": FORMAT, "pack": pack, "size": size, "objects": count,
                              "table": blake3.blake3(table).hexdigest(), "rows": face.table_rows(table),
                              "actions": len(pairs) // 64, "body": blake3.blake3(pairs).hexdigest()}
    if document is not None:
        fields["document"] = document
    if unadopted:
        fields[UNADOPTED] = True
        if campaigns:
            fields[CAMPAIGNS] = sorted(campaigns)
    return signature.signed_json(fields) + b"\n" + pairs


def object_ids(doc: Listing, table: bytes, read: list[bytes] | None = None) -> list[bytes]:
    """The ids (digests) of the objects a listing of format 4 names, from its pack's `table`, each once in table
    order, its entries document left out; ListingError if `table` is not the one the listing names. `read`: the ids
    of the table's objects in table order (face.table_object_ids) when the caller has them already (a pull's check
    read them from this very table: not read again)."""
    if len(table) != face.table_tail_size(doc.rows) - face.table_tail_size(0) \
            or blake3.blake3(table).hexdigest() != doc.table:
        raise ListingError("table: not the one the listing names (its BLAKE3)")
    ids = dict.fromkeys(face.table_object_ids(table) if read is None else read)
    if doc.document is not None:
        if bytes.fromhex(doc.document) not in ids:
            raise ListingError("table: its pack does not hold the entries document the listing names")
        del ids[bytes.fromhex(doc.document)]
    if len(ids) != doc.count:
        raise ListingError(f"table: {len(ids)} objects, the listing says {doc.count}")
    return list(ids)


def decode(data: bytes, pack: str) -> Listing:
    """The listing of `pack`; ListingError naming what a hostile one gets wrong."""
    head, newline, body = data.partition(b"\n")
    try:
        doc = jsontext.loads(head)
    except ValueError:
        raise ListingError("not JSON", not_json=True) from None
    if not isinstance(doc, dict):
        raise ListingError("not an object")
    if doc.get("format") in (3, FORMAT):
        return _decode_binary(doc, body, pack)
    if newline:
        raise ListingError(f"format {doc.get('format')!r}: expected one line of JSON")
    why = _json_listing_problem(doc, pack)
    if why is not None:
        raise ListingError(why)
    if "format" not in doc:  # a bundle's
        return Listing(doc["objects"], doc["actions"], doc, None)
    ids = doc["objects"]  # format 2 lists the ids as one string (as signed)
    return Listing([ids[i:i + 64] for i in range(0, len(ids), 64)], doc["actions"], doc, doc["format"], pack,
                   doc["size"], doc.get("document"))


def _decode_binary(head: dict[str, Any], body: bytes, pack: str) -> Listing:
    """Formats 3 (the object ids, then the entries) and 4 (the entries alone: the ids are in the pack's table)."""
    version, objects, actions = head["format"], head.get("objects"), head.get("actions")
    if head.get("pack") != pack or not _count(head.get("size")) or not _count(objects) or not _count(actions):
        raise ListingError(f"format {version}: expected the pack's name, its size and the counts of its ids")
    if "document" in head and not (isinstance(head["document"], str) and is_hex64(head["document"])):
        raise ListingError("document: expected a hex id")
    if version == FORMAT and not (isinstance(head.get("table"), str) and is_hex64(head["table"])
                                  and _count(head.get("rows")) and objects <= head["rows"]
                                  and face.table_tail_size(head["rows"]) <= head["size"]):
        raise ListingError(f"format {FORMAT}: expected the BLAKE3 of its pack's table and its rows (as many as "
                           "its objects at least, within the pack's size)")
    listed = 32 * objects if version == 3 else 0
    if len(body) != listed + 64 * actions:
        raise ListingError(f"body: {len(body)} bytes, expected {f'{objects} ids and ' if version == 3 else ''}"
                           f"{actions} entries")
    if head.get("body") != blake3.blake3(body).hexdigest():
        raise ListingError("body: its BLAKE3 is not the one the listing names")
    pairs = body[listed:]
    keys = [pairs[i:i + 32] for i in range(0, len(pairs), 64)]
    if any(a >= b for a, b in pairwise(keys)):
        raise ListingError("actions: expected entries in increasing key order, one per key")
    ids = body[:listed].hex() if version == 3 else None
    return Listing(None if ids is None else [ids[i:i + 64] for i in range(0, len(ids), 64)],
                   {PREFIX + key.hex(): PREFIX + pairs[i + 32:i + 64].hex()
                    for i, key in zip(range(0, len(pairs), 64), keys, strict=True)},
                   head, version, pack, head["size"], head.get("document"), head.get("table"), head.get("rows", 0))


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _json_listing_problem(doc: dict[str, Any], pack: str) -> str | None:
    """Why a listing of format 2, or a bundle's, is not one (None: it is)."""
    objects, actions = doc.get("objects"), doc.get("actions")
    if not isinstance(actions, dict) or not all(is_oid(k) and is_oid(v) for k, v in actions.items()):
        return "actions: expected {key id: record id}"
    if "format" not in doc:  # a bundle's
        if not isinstance(objects, list) or not all(isinstance(h, str) and is_hex64(h) for h in objects):
            return "objects: expected a list of hex ids"
        return None
    if doc["format"] not in FORMATS or doc.get("pack") != pack or not isinstance(doc.get("size"), int):
        return f"format {doc['format']!r}: expected format {FORMAT}, 3 or 2 naming this pack and its size"
    if not isinstance(objects, str) or len(objects) % 64 or not _LOWER_HEX.fullmatch(objects):
        return "objects: expected the hex ids, as one string"
    if "document" in doc and not (isinstance(doc["document"], str) and is_hex64(doc["document"])):
        return "document: expected a hex id"
    return None


def signer(doc: Listing, pack: str) -> str | None:
    """The key whose signature a decoded listing carries (None: unsigned); UsageError if it does not verify."""
    from clawstore.trust import signature

    try:
        return signature.signer(doc.signed)
    except signature.BadSignature as exc:
        raise UsageError(f"remote pack {pack}: its listing: {exc}") from None
