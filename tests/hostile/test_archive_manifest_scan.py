"""An archive's manifest is read with its listing and entries scanned from their bytes (store/services/archive.py
_parse_canonical, archive_listing.py): only their canonical spelling is taken so; anything else is parsed whole, as
before, and refused in the same one line (naming the archive and the field, exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import blake3
import pytest

from clawstore.store import Store
from clawstore.store.core.ids import PREFIX
from clawstore.store.services.archive import MANIFEST, SEAL, ArchiveError, read_manifest, verify_archive, write_archive
from clawstore.store.services.archive_import import archive_signer, import_into
from clawstore.store.services.archive_tar import BLOCK, TRAILER, header, padding, parse_header

REPO = Path(__file__).resolve().parents[2]


def _archive(tmp_path: Path) -> tuple[Path, list[str], dict[str, str]]:
    """A signed archive of 40 objects (ids with an 'a' among them), a few of them input documents with an entry
    pointing at a record for each (entries an import verifies)."""
    store = Store(tmp_path / "origin")
    actions: dict[str, str] = {}
    with store.batch():
        ids = [store.put_bytes(b"object %d" % n) for n in range(34)]
        for n in range(3):
            key = store.put_bytes(b'{"input document":%d}' % n)
            actions[key] = store.put_bytes(b'{"input":"%s","key":"%s"}' % (key.encode(), key.encode()))
            ids += [key, actions[key]]
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {"refs": {"pins/p": ids[0]}, "actions": actions, "head": ids[0],
                                   "campaign": {"id": "c"}, "build_id": "b"}, ids)
    store.close()
    return archive, sorted(oid[len(PREFIX):] for oid in ids), actions


def _body(archive: Path) -> bytes:
    data = archive.read_bytes()
    name, size = parse_header(data[:BLOCK])
    assert name == MANIFEST
    return data[BLOCK:BLOCK + size]


def _resealed(archive: Path, body: bytes, out: Path) -> Path:
    """`archive` with this manifest, its objects as they were, and a seal that matches."""
    data = archive.read_bytes()
    _, size = parse_header(data[:BLOCK])
    rest = data[BLOCK + size + len(padding(size)):]
    at, members = 0, b""
    while True:
        name, length = parse_header(rest[at:at + BLOCK])
        if name == SEAL:
            break
        end = at + BLOCK + length + len(padding(length))
        members += rest[at:end]
        at = end
    before = header(MANIFEST, len(body)) + body + padding(len(body)) + members
    seal = f"{PREFIX}{blake3.blake3(before).hexdigest()}\n".encode()
    out.write_bytes(before + header(SEAL, len(seal)) + seal + padding(len(seal)) + TRAILER)
    return out


def _nth(body: bytes, hexes: list[str], n: int) -> tuple[int, int]:
    """Where the listing's n-th id is in the manifest's bytes (its first digit, its end)."""
    at = body.index(b'["' + hexes[n].encode() + b'"')
    return at + 2, at + 66


def _edit_id(body: bytes, hexes: list[str], n: int, edit: Callable[[bytes], bytes]) -> bytes:
    start, end = _nth(body, hexes, n)
    return body[:start] + edit(body[start:end]) + body[end:]


def _swapped(body: bytes, hexes: list[str], n: int) -> bytes:
    """The listing's n-th and next entries in each other's place."""
    start, _ = _nth(body, hexes, n)
    middle = body.index(b"]", start) + 1
    end = body.index(b"]", middle + 1) + 1
    return body[:start - 2] + body[middle + 1:end] + b"," + body[start - 2:middle] + body[end:]


def _size_of(body: bytes, hexes: list[str], n: int, spelled: bytes) -> bytes:
    _, end = _nth(body, hexes, n)
    close = body.index(b"]", end)
    return body[:end + 2] + spelled + body[close:]


def _hostile(body: bytes, hexes: list[str]) -> dict[str, tuple[bytes, str]]:
    """Each: the manifest's bytes, and the end of the line the reader says."""
    with_a = next(n for n, h in enumerate(hexes) if "a" in h[1:])
    objects_at = body.index(b'"objects":[')
    listing_end = body.index(b"]]", objects_at) + 2
    not_canonical = "damaged manifest (not in canonical form)"
    first_action = body.index(b'"actions":{"') + len(b'"actions":{"')
    return {
        "a space": (body.replace(b'],["', b'], ["', 1), not_canonical),
        "an escape in an id": (_edit_id(body, hexes, with_a, lambda h: h.replace(b"a", b"\\u0061", 1)),
                               not_canonical),
        "uppercase hex": (_edit_id(body, hexes, 3, bytes.upper),
                          "manifest field 'objects[3]' is not [<64 hex>, <size>]"),
        "a leading zero": (_size_of(body, hexes, 4, b"012"), "damaged manifest (not JSON)"),
        "a float size": (_size_of(body, hexes, 5, b"12.0"), "manifest field 'objects[5]' is not [<64 hex>, <size>]"),
        "a negative size": (_size_of(body, hexes, 6, b"-12"),
                            "manifest field 'objects[6]' is not [<64 hex>, <size>]"),
        "a bool size": (_size_of(body, hexes, 7, b"true"), "manifest field 'objects[7]' is not [<64 hex>, <size>]"),
        "a huge size": (_size_of(body, hexes, 8, b"1" + b"0" * 30),
                        "manifest field 'objects[8]' is not [<64 hex>, <size>]"),
        "a repeated id": (_edit_id(body, hexes, 10, lambda _h: hexes[9].encode()),
                          "manifest field 'objects[10]' is out of order or repeated"),
        "ids out of order": (_swapped(body, hexes, 11), "manifest field 'objects[12]' is out of order or repeated"),
        "objects twice": (body.replace(b'{"actions"', b'{"objects":[],"actions"', 1), not_canonical),
        "objects not a list": (body[:objects_at] + b'"objects":{}' + body[listing_end:],
                               "manifest field 'objects' is not a list"),
        "no objects": (body[:objects_at] + body[listing_end + 1:], "manifest field 'objects' is not a list"),
        "a space after": (body + b" ", not_canonical),
        "trailing garbage": (body + b"x", "damaged manifest (not JSON)"),
        "an uppercase entry": (body[:first_action] + body[first_action:first_action + 71].upper()
                               + body[first_action + 71:],
                               f"manifest field 'actions.{body[first_action:first_action + 71].upper().decode()}' "
                               "is not a key mapped to a record of the archive"),
        "entries out of order": (body.replace(b'"actions":{"', b'"actions":{"blake3:' + b"f" * 64 + b'":"'
                                              + PREFIX.encode() + hexes[0].encode() + b'","', 1), not_canonical),
    }


def test_hostile_manifests_are_refused_in_one_line_naming_the_field(tmp_path: Path) -> None:
    archive, hexes, _ = _archive(tmp_path)
    body = _body(archive)
    for name, (changed, why) in _hostile(body, hexes).items():
        assert changed != body, name
        path = _resealed(archive, changed, tmp_path / (name.replace(" ", "-") + ".claw"))
        for read in (read_manifest, verify_archive):
            with pytest.raises(ArchiveError) as caught:
                read(path)
            assert str(caught.value) == f"archive {path}: {why}", (name, str(caught.value))
        target = tmp_path / ("into-" + name.replace(" ", "-"))
        with pytest.raises(ArchiveError) as caught:
            import_into(target, path)
        assert str(caught.value) == f"archive {path}: {why}", (name, str(caught.value))
        assert not target.exists()
    done = subprocess.run([sys.executable, "-c", "from clawstore.cli import entry; entry()", "archive", "verify",
                           str(tmp_path / "uppercase-hex.claw")], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2 and done.stdout == ""
    said = f"archive {tmp_path / 'uppercase-hex.claw'}: manifest field 'objects[3]' is not [<64 hex>, <size>]"
    assert done.stderr.strip().splitlines() == [f"claw: error: {said}"]


def test_a_listing_nested_or_in_a_string_elsewhere_is_not_the_archives(tmp_path: Path) -> None:
    """Only the top-level `objects` is the listing, however another field spells one (both readers agree)."""
    archive, hexes, actions = _archive(tmp_path)
    body = _body(archive)
    objects_at = body.index(b'"objects":[')
    listing = body[objects_at + len(b'"objects":'):body.index(b"]]", objects_at) + 2]
    fake = b'[["' + b"0" * 64 + b'",1]]'
    for name, changed in {
        "nested": body.replace(b'"campaign":{"id":"c"}', b'"campaign":{"id":"c","objects":' + fake + b"}", 1),
        "in a string": body.replace(b'"campaign":{"id":"c"}', b'"campaign":{"id":"c","x":",\\"objects\\":'
                                    + fake.replace(b'"', b'\\"') + b'"}', 1),
        "a key spelled so": body.replace(b'"campaign":{"id":"c"}', b'"campaign":{",\\"objects\\":[":1,"id":"c"}', 1),
    }.items():
        assert changed != body and listing in changed, name
        path = _resealed(archive, changed, tmp_path / (name.replace(" ", "-") + ".claw"))
        manifest = read_manifest(path)
        assert [hexdigest for hexdigest, _ in manifest.objects] == hexes, name
        assert dict(manifest.actions.items()) == actions, name
        assert verify_archive(path).objects == len(hexes), name


def test_the_signature_is_checked_over_the_manifests_bytes(tmp_path: Path) -> None:
    """A valid signature verifies (its field cut out of the bytes read); any change to what it covers, anywhere in
    the document, does not."""
    from clawstore.trust import keys

    archive, hexes, _ = _archive(tmp_path)
    assert archive_signer(archive) == keys.own_public()
    store, report = import_into(tmp_path / "into", archive)
    store.close()
    assert report.signer is not None and report.new_objects == len(hexes)
    body = _body(archive)
    first_key_end = body.index(b'"actions":{"blake3:') + len(b'"actions":{"blake3:') + 64
    for name, changed in {
        "a size": _size_of(body, hexes, 2, b"99"),
        "an entry": body[:first_key_end - 1] + (b"0" if body[first_key_end - 1:first_key_end] != b"0" else b"1")
        + body[first_key_end:],
        "the build": body.replace(b'"build_id":"b"', b'"build_id":"c"', 1),
        "the version's place": body,  # (unchanged: verifies)
    }.items():
        path = _resealed(archive, changed, tmp_path / (name.replace(" ", "-").replace("'", "") + ".claw"))
        if changed == body:
            assert archive_signer(path) == report.signer
            continue
        with pytest.raises(ArchiveError, match="does not verify"):
            archive_signer(path)


def test_the_scan_and_the_whole_parse_read_the_same_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the scan reads (listing, entries, the other fields, the signature's verdict) is what the whole parse,
    which anything not canonical falls back to, reads of the same bytes."""
    from clawstore.store.services import archive

    path, hexes, actions = _archive(tmp_path)
    scanned = read_manifest(path, signature=True)
    monkeypatch.setattr(archive, "_parse_canonical", lambda *_args: None)
    parsed = read_manifest(path, signature=True)
    assert scanned.signature is not None and scanned.signature.signer is not None
    for manifest in (scanned, parsed):
        assert [hexdigest for hexdigest, _ in manifest.objects] == hexes
        assert dict(manifest.actions.items()) == actions and list(manifest.actions) == sorted(actions)
    assert list(scanned.objects.sizes) == list(parsed.objects.sizes)
    assert scanned.signed == parsed.signed and scanned.signature == parsed.signature
    assert scanned.document() == parsed.document() and scanned.head == parsed.head
