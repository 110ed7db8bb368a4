"""Listings (remote/listing.py): format 4, a signed line of JSON naming the pack's own table (its object ids) by
BLAKE3, then the raw entries it names by BLAKE3; format 3 carried the ids too. Whoever can write to a remote can write
any bytes there: each way to bend one is refused with the listing named; remotes written by an older claw (formats 3
and 2) are still pulled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pytest

from clawstore.errors import UsageError
from clawstore.remote import backends, listing, pull, push
from clawstore.remote.config import Remote
from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.packfile import KIND_OBJECT, PackWriter
from clawstore.store.face import pack_table
from clawstore.trust import keys, signature
from tests.remote.test_packs import _filled

PACK = "ab" * 32


def _ids(count: int) -> list[bytes]:
    return [os.urandom(32) for _ in range(count)]


def _entries(count: int) -> dict[bytes, bytes]:
    return {os.urandom(32): os.urandom(32) for _ in range(count)}


def _table(tmp_path: Path, ids: list[bytes]) -> bytes:
    """The table of a real sealed pack holding these ids (its frames are no content: only the table counts)."""
    writer = PackWriter(tmp_path)
    writer.append_many([(KIND_OBJECT, oid, [b"x"]) for oid in ids])
    writer.seal(durable=False)
    writer.close()
    return pack_table(writer.path)


def _v3(pack: str, size: int, objects: list[bytes], pairs: bytes, document: str | None) -> bytes:
    """A listing as claw wrote it before format 4 (the object ids in the body)."""
    body = b"".join((*objects, pairs))
    fields = {"format": 3, "pack": pack, "size": size, "objects": len(objects), "actions": len(pairs) // 64,
              "body": blake3.blake3(body).hexdigest(), **({"document": document} if document else {})}
    return signature.signed_json(fields) + b"\n" + body


def test_a_listing_decodes_to_what_was_encoded_and_is_signed_by_its_pusher(tmp_path: Path) -> None:
    objects, actions, document = _ids(1000), _entries(300), os.urandom(32)
    table = _table(tmp_path, [*objects, document])
    encoded = listing.encode(PACK, 123456, table, 1000, listing.entries(actions), document.hex())
    doc = listing.decode(encoded, PACK)
    assert doc.objects is None and doc.count == 1000  # in the pack's own table
    assert listing.object_ids(doc, table) == objects  # in pack order, the document left out
    assert doc.actions == {PREFIX + k.hex(): PREFIX + v.hex() for k, v in actions.items()}
    assert (doc.format, doc.size, doc.document) == (4, 123456, document.hex())
    assert listing.signer(doc, PACK) == keys.public_text(keys.signing_key().public_key())
    # the entries after one line: format 3 also carried 32 bytes an object
    assert len(encoded) < 64 * 300 + 1024


def test_a_format_3_listing_is_still_read(tmp_path: Path) -> None:
    objects, actions = _ids(10), _entries(3)
    doc = listing.decode(_v3(PACK, 12345, objects, listing.entries(actions), "cd" * 32), PACK)
    assert doc.objects == [oid.hex() for oid in objects] and doc.count == 10
    assert doc.actions == {PREFIX + k.hex(): PREFIX + v.hex() for k, v in actions.items()}
    assert (doc.format, doc.size, doc.document) == (3, 12345, "cd" * 32)


def test_a_table_that_is_not_the_one_signed_is_refused(tmp_path: Path) -> None:
    objects = _ids(5)
    doc = listing.decode(listing.encode(PACK, 1 << 20, _table(tmp_path, objects), 5, b"", None), PACK)
    for other, why in ((_table(tmp_path, _ids(5)), "not the one the listing names"),
                       (_table(tmp_path, objects)[:-49], "not the one the listing names")):
        with pytest.raises(listing.ListingError, match=why):
            listing.object_ids(doc, other)
    lying = listing.decode(listing.encode(PACK, 1 << 20, _table(tmp_path, objects), 4, b"", None), PACK)
    with pytest.raises(listing.ListingError, match="5 objects, the listing says 4"):
        listing.object_ids(lying, _table(tmp_path, objects))


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
    ("a body cut short", "expected 3 entries"),
    ("bytes after the body", "expected 3 entries"),
])
def test_a_body_that_is_not_the_one_signed_is_refused(bend: str, why: str, tmp_path: Path) -> None:
    encoded = listing.encode(PACK, 1 << 20, _table(tmp_path, _ids(10)), 10, listing.entries(_entries(3)), None)
    with pytest.raises(listing.ListingError, match=why):
        listing.decode(_bent(encoded, bend), PACK)
    with pytest.raises(listing.ListingError, match=why.replace("expected", "expected 10 ids and")):
        listing.decode(_bent(_v3(PACK, 1, _ids(10), listing.entries(_entries(3)), None), bend), PACK)


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


@pytest.mark.parametrize("fields", [
    {"rows": 10 ** 30},  # no ranged read of that size
    {"rows": 1},  # fewer rows than objects
    {"rows": -1},
    {"table": "../x"},
    {"size": 100},  # a table bigger than the pack
])
def test_a_format_4_header_naming_no_table_its_pack_can_hold_is_refused(fields: dict[str, object]) -> None:
    pairs = listing.entries(_entries(2))
    header = {"format": 4, "pack": PACK, "size": 1 << 20, "objects": 2, "table": "ef" * 32, "rows": 3, "actions": 2,
              "body": blake3.blake3(pairs).hexdigest(), **fields}
    with pytest.raises(listing.ListingError, match="expected the BLAKE3 of its pack's table and its rows"):
        listing.decode(_signed(header, pairs), PACK)


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
    encoded = _v3(PACK, 1, _ids(3), b"", None)
    head, _, _ = encoded.partition(b"\n")
    doc = listing.decode(encoded, PACK)
    forged = head.replace(doc.signed["body"].encode(), b"0" * 64) + b"\n" + b"".join(_ids(3))
    with pytest.raises(listing.ListingError, match="BLAKE3"):
        listing.decode(forged, PACK)
    header = json.loads(head)
    header["body"] = "0" * 64
    with pytest.raises(UsageError, match="does not verify"):
        listing.signer(listing.Listing([], {}, header), PACK)


def _pushed_ids(path: Path) -> list[bytes]:
    """The object ids of a pushed pack (its listing at `path`), from the pack's table."""
    doc = listing.decode(path.read_bytes(), path.name[:-4])
    return listing.object_ids(doc, pack_table(path.with_suffix(".pack")))


def _as_format_2(path: Path) -> None:
    """Rewrite a pushed listing as an older claw wrote it (format 2, signed as a whole)."""
    doc = listing.decode(path.read_bytes(), path.name[:-4])
    fields = {"format": 2, "pack": doc.pack, "size": doc.size, "objects": b"".join(_pushed_ids(path)).hex(),
              "actions": doc.actions, **({"document": doc.document} if doc.document is not None else {})}
    path.write_bytes(signature.signed_json(fields))


def _as_format_3(path: Path) -> None:
    doc = listing.decode(path.read_bytes(), path.name[:-4])
    pairs = listing.entries({bytes.fromhex(k[len(PREFIX):]): bytes.fromhex(v[len(PREFIX):])
                             for k, v in doc.actions.items()})
    path.write_bytes(_v3(path.name[:-4], doc.size or 0, _pushed_ids(path), pairs, doc.document))


@pytest.mark.parametrize("older", [2, 3])
def test_a_remote_an_older_claw_pushed_to_is_still_pulled(tmp_path: Path, older: int) -> None:
    source = _filled(tmp_path / "a", 20)
    remote = Remote("team", str(tmp_path / "remote"))
    push.push(source, remote)
    written = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    for path in written:
        (_as_format_2 if older == 2 else _as_format_3)(path)
    assert all(listing.decode(path.read_bytes(), path.name[:-4]).format == older for path in written)
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


def _no_ranged_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    read: list[str] = []
    real = backends.DirectoryBackend.read_tail

    def counted(self: backends.DirectoryBackend, name: str, length: int) -> bytes:
        read.append(name)
        return real(self, name, length)

    monkeypatch.setattr(backends.DirectoryBackend, "read_tail", counted)
    return read


def test_the_ids_travel_in_the_packs_and_only_a_store_that_never_saw_a_pack_reads_its_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full pull takes each pack's ids from the pack it downloads; the pusher keeps the tables of what it sent; a
    store that neither pushed nor pulled a pack learns its objects from the table at its end (one ranged read),
    without downloading it, and then keeps that table too."""
    read = _no_ranged_reads(monkeypatch)
    remote = Remote("team", str(tmp_path / "remote"))
    source = _filled(tmp_path / "a", 20)
    push.push(source, remote)
    listings = sorted((tmp_path / "remote" / "packs").glob("*.ids"))
    assert sum(path.stat().st_size for path in listings) < 64 * 20 + 1024 * len(listings)  # the entries, the lines
    target = Store(tmp_path / "b")
    pull.pull(target, remote)
    assert set(target.iter_objects()) == set(source.iter_objects())
    assert dict(target.iter_actions()) == dict(source.iter_actions())
    assert push.push(source, remote).objects == 0 and push.push(target, remote).objects == 0
    assert read == []
    other = _filled(tmp_path / "c", 25)  # the same 20 and 5 more
    assert push.push(other, remote).objects == 5 * 3
    assert sorted(read) == sorted(f"packs/{path.name[:-4]}.pack" for path in listings)
    assert push.push(other, remote).objects == 0 and len(read) == len(listings)  # (kept: not read again)


def test_a_listing_re_signed_over_another_table_is_refused_whole_and_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer of the remote re-signs a pack's listing naming another pack's table (so the pack would bring objects
    the listing does not name): a pull that downloads it refuses it, one that reads its table refuses that."""
    monkeypatch.setattr(push, "PACK_OBJECTS", 10)  # packs of 10 objects each: tables of the same size
    remote = Remote("team", str(tmp_path / "remote"))
    source = _filled(tmp_path / "a", 20)
    push.push(source, remote)
    packs = tmp_path / "remote" / "packs"
    path, twin = [p for p in sorted(packs.glob("*.ids")) if listing.decode(p.read_bytes(), p.name[:-4]).count][:2]
    doc = listing.decode(path.read_bytes(), path.name[:-4])
    other = pack_table(twin.with_suffix(".pack"))
    pairs = listing.entries({bytes.fromhex(k[len(PREFIX):]): bytes.fromhex(v[len(PREFIX):])
                             for k, v in doc.actions.items()})
    path.write_bytes(listing.encode(path.name[:-4], doc.size or 0, other, doc.count, pairs, doc.document))
    target = Store(tmp_path / "b")
    with pytest.raises(UsageError, match=f"remote pack {path.name[:-4]}: holds other objects than its listing names"):
        pull.pull(target, remote)
    assert list(target.iter_objects()) == []
    with pytest.raises(UsageError, match=f"remote pack {path.name[:-4]}: .*not a table|not the one"):
        push.push(_filled(tmp_path / "c", 3), remote)
