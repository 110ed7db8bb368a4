"""Forging campaign archives: edit what an exported archive holds and re-seal it, so the result has a
valid seal and valid frames (the format is clawstore/store/services/archive.py's: a strict ustar stream of the
canonical manifest, the objects' zstd frames in id order, and a BLAKE3 seal)."""

from __future__ import annotations

import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import zstandard

from clawstore.store.services.archive import MANIFEST, OBJECTS, SEAL
from clawstore.store.services.archive_tar import TRAILER, header, padding
from clawstore.values.canonical import canonical_json

PREFIX = "blake3:"


@dataclass
class Forgery:
    manifest: dict[str, Any]
    frames: dict[str, bytes]  # hex -> stored zstd frame

    @classmethod
    def read(cls, path: Path) -> Forgery:
        frames: dict[str, bytes] = {}
        with tarfile.open(path) as tar:
            manifest = json.loads(tar.extractfile(MANIFEST).read())  # type: ignore[union-attr]
            for member in tar.getmembers():
                if member.name.startswith(OBJECTS):
                    frames[member.name[len(OBJECTS):]] = tar.extractfile(member).read()  # type: ignore[union-attr]
        return cls(manifest, frames)

    def content(self, oid: str) -> bytes:
        return zstandard.ZstdDecompressor().decompress(self.frames[oid[len(PREFIX):]])

    def json(self, oid: str) -> Any:
        return json.loads(self.content(oid))

    def add(self, content: bytes | Any) -> str:
        """Add an object (bytes, or a value stored as canonical JSON); returns its id."""
        data = content if isinstance(content, bytes) else canonical_json(content)
        hexdigest = blake3.blake3(data).hexdigest()
        self.frames[hexdigest] = zstandard.ZstdCompressor(write_content_size=True).compress(data)
        return PREFIX + hexdigest

    def resign(self) -> None:
        """Sign the edited manifest with this user's own key ($XDG_CONFIG_HOME/claw/): the forger is
        someone the importer trusts, so only the content checks stand in the way."""
        from clawstore.trust import signature

        manifest = {k: v for k, v in self.manifest.items() if k != signature.FIELD}
        manifest["objects"] = [[h, len(self.frames[h])] for h in sorted(self.frames)]
        self.manifest = signature.sign(manifest)

    def write(self, path: Path) -> Path:
        listing = [[h, len(self.frames[h])] for h in sorted(self.frames)]
        manifest = {**self.manifest, "objects": listing}
        out, hasher = bytearray(), blake3.blake3()

        def member(name: str, data: bytes) -> None:
            chunk = header(name, len(data)) + data + padding(len(data))
            out.extend(chunk)
            hasher.update(chunk)

        member(MANIFEST, canonical_json(manifest))
        for hexdigest, _ in listing:
            member(OBJECTS + hexdigest, self.frames[hexdigest])
        seal = f"{PREFIX}{hasher.hexdigest()}\n".encode()
        out.extend(header(SEAL, len(seal)) + seal + padding(len(seal)) + TRAILER)
        path.write_bytes(bytes(out))
        return path
