"""Listings of format 3 (remote/listing.py): a signed line of JSON, then the raw ids and entries it names by
BLAKE3. Whoever can write to a remote can write any bytes there: each way to bend one is refused with the
listing named; remotes written by an older claw (format 2) are still pulled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pytest

from clawstore.errors import UsageError
from clawstore.remote import listing, pull, push
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.trust import keys, signature
from tests.remote.test_packs import _filled

PACK = "ab" * 32


def _ids(count: int) -> list[bytes]:
    return [os.urandom(32) for _ in range(count)]


def _entries(count: int) -> dict[bytes, bytes]:
    return {os.urandom(32): os.urandom(32) for _ in range(count)}


def test_a_listing_decodes_to_what_was_encoded_and_is_signed_by_its_pusher() -> None:
    objects, actions = _ids(1000), _entries(300)
    encoded = listing.encode(PACK, 12345, objects, listing.entries(actions), "cd" * 32)
    doc = listing.decode(encoded, PACK)
    assert doc.objects == [oid.hex() for oid in objects]  # in pack order
    assert doc.actions == {PREFIX + k.hex(): PREFIX + v.hex() for k, v in actions.items()}
    assert (doc.format, doc.size, doc.document) == (3, 12345, "cd" * 32)
    assert listing.signer(doc, PACK) == keys.public_text(keys.signing_key().public_key())
    # raw digests after one line: about half the bytes of format 2's hex in JSON
    assert len(encoded) < 32 * 1000 + 64 * 300 + 1024


def _bent(encoded: bytes, bend: str) -> bytes:
    head, _, body = encoded.partition(b"\n")
    if bend == "a flipped byte in the body":
        return head + b"\n" + body[:40] + bytes([body[40] ^ 1]) + body[41:]
    if bend == "a body cut short":
        return head + b"\n" + body[:-64]
    if bend == "bytes after the body":
        return encoded + b"\0" * 32
    raise AssertionError(bend)


@pytest.mark.parametrize("bend, why", [
    ("a flipped byte in the body", "its BLAKE3 is not the one the listing names"),
    ("a body cut short", "expected 10 ids and 3 entries"),
    ("bytes after the body", "expected 10 ids and 3 entries"),
])
def test_a_body_that_is_not_the_one_signed_is_refused(bend: str, why: str) -> None:
    encoded = listing.encode(PACK, 1, _ids(10), listing.entries(_entries(3)), None)
    with pytest.raises(listing.ListingError, match=why):
        listing.decode(_bent(encoded, bend), PACK)


def _signed(fields: dict[str, object], body: bytes) -> bytes:
    return signature.signed_json(fields) + b"\n" + body


@pytest.mark.parametrize("fields, why", [
    ({"pack": "cd" * 32}, "expected the pack's name"),  # another pack's listing, renamed
    ({"objects": 10 ** 30}, "expected 1000000000000000000000000000000 ids"),  # no allocation of that size
    ({"objects": -1}, "the counts of its ids"),
    ({"size": True}, "its size"),
    ({"actions": "2"}, "the counts of its ids"),
    ({"document": "../x"}, "document: expected a hex id"),
])
def test_a_header_that_does_not_describe_its_body_is_refused(fields: dict[str, object], why: str) -> None:
    body = b"".join(_ids(2)) + listing.entries(_entries(2))
    header = {"format": 3, "pack": PACK, "size": 1, "objects": 2, "actions": 2,
              "body": blake3.blake3(body).hexdigest(), **fields}
    with pytest.raises(listing.ListingError, match=why):
        listing.decode(_signed(header, body), PACK)


def test_entries_out_of_key_order_or_twice_for_one_key_are_refused() -> None:
    key, other = sorted(_ids(2))
    for pairs in (other + os.urandom(32) + key + os.urandom(32), key + os.urandom(32) + key + os.urandom(32)):
        header = {"format": 3, "pack": PACK, "size": 1, "objects": 0, "actions": 2,
                  "body": blake3.blake3(pairs).hexdigest()}
        with pytest.raises(listing.ListingError, match="increasing key order, one per key"):
            listing.decode(_signed(header, pairs), PACK)


def test_a_format_2_listing_with_a_second_line_is_refused() -> None:
    body = signature.signed_json({"format": 2, "pack": PACK, "size": 1, "objects": "", "actions": {}})
    assert listing.decode(body, PACK).objects == []
    with pytest.raises(listing.ListingError, match="expected one line of JSON"):
        listing.decode(body + b"\n" + os.urandom(64), PACK)


def test_a_listing_re_signed_over_another_body_names_who_signed_it() -> None:
    """A writer of the remote can swap the body and sign the header again: the signature then names that
    writer's key (pull refuses it unless trusted), never the original pusher's."""
    encoded = listing.encode(PACK, 1, _ids(3), b"", None)
    head, _, _ = encoded.partition(b"\n")
    doc = listing.decode(encoded, PACK)
    forged = head.replace(doc.signed["body"].encode(), b"0" * 64) + b"\n" + b"".join(_ids(3))
    with pytest.raises(listing.ListingError, match="BLAKE3"):
        listing.decode(forged, PACK)
    header = json.loads(head)
    header["body"] = "0" * 64
    with pytest.raises(UsageError, match="does not verify"):
        listing.signer(listing.Listing([], {}, header), PACK)


def _as_format_2(path: Path) -> None:
    """Rewrite a pushed listing as an older claw wrote it (format 2, signed as a whole)."""
    doc = listing.decode(path.read_bytes(), path.name[:-4])
    fields = {"format": 2, "pack": doc.pack, "size": doc.size, "objects": "".join(doc.objects),
              "actions": doc.actions, **({"document": doc.document} if doc.document is not None else {})}
    path.write_bytes(signature.signed_json(fields))


def test_a_remote_an_older_claw_pushed_to_is_still_pulled(tmp_path: Path) -> None:
    source = _filled(tmp_path / "a", 20)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    written = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    for path in written:
        _as_format_2(path)
    assert all(path.read_bytes().startswith(b"{") and b"\n" not in path.read_bytes() for path in written)
    target = Store(tmp_path / "b")
    pulled = pull.pull(target, remote)
    assert pulled.packs == len(written)
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    # and a push to it reads them: nothing is sent again
    assert push.push(source, remote).objects == 0


def test_a_pull_names_a_bent_listing_and_keeps_nothing_of_it(tmp_path: Path) -> None:
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(_filled(tmp_path / "a", 20), remote)
    path = max((tmp_path / "remote" / "packs").glob("*.ids"), key=lambda p: p.stat().st_size)
    path.write_bytes(_bent(path.read_bytes(), "a flipped byte in the body"))
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match=f"listing of pack {path.name[:-4]} is malformed .*BLAKE3"):
        pull.pull(target, remote)
    assert list(target.iter_objects()) == []
    assert not (target.root / "remotes" / "team" / path.name).exists()  # not cached either
