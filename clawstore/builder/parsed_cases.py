"""The store's file of case files parsed before (config/parsed.py): written by a build that plans, in its store's
`stamps/` directory (derived data, as the stamp), read by the commands that load a campaign. Trusted only by the claw
that wrote it (the code's digest, as the stamp takes it, and Python's version) and only whole (a BLAKE3 of its body)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import blake3

from clawstore.builder import stamp
from clawstore.config.parsed import ParsedCases

FILE = "parsed-cases"  # in the store's stamps/ directory
_MAGIC = "claw-parsed-cases 1"


def _header() -> str:
    return json.dumps([_MAGIC, stamp.code_digest(), sys.version])


def path_of(store_root: Path) -> Path:
    return Path(store_root) / stamp.STAMPS_DIR / FILE


def read(store_root: Path) -> ParsedCases:
    """The entries of the store's file when this claw wrote it and it is whole; else none (every case parsed)."""
    try:
        data = path_of(store_root).read_bytes()
    except OSError:
        return ParsedCases()
    body, _, digest = data.rpartition(b"\n")
    lines = body.split(b"\n")
    if blake3.blake3(body).hexdigest().encode() != digest or lines[0].decode(errors="replace") != _header():
        return ParsedCases()  # (another claw's, or damaged: parse)
    known = {}
    try:
        for line in lines[1:]:
            name, _, text = line.partition(b"\t")
            known[bytes.fromhex(name.decode())] = text.decode()
    except ValueError:  # (whole, yet not as written: parse)
        return ParsedCases()
    return ParsedCases(known)


def write(store_root: Path, parsed: ParsedCases, mappings: dict[str, bytes]) -> bool:
    """Write the entries of the case files `mappings` names (path -> its mapping, pickled: config/catalog.py CaseEntry;
    `parsed`: their digests) unless the file holds those already; False when nothing was written."""
    import pickle

    from clawstore.host.durable import write_file_atomic
    from clawstore.store.core.layout import StoreLayout

    wanted = {parsed.digests[file]: pickled for file, pickled in mappings.items() if file in parsed.digests}
    if not wanted:
        return False
    entries: dict[bytes, str] = {}
    for digest, pickled in wanted.items():
        text = json.dumps(pickle.loads(pickled), separators=(",", ":"))  # (ASCII: one line, whatever it holds)
        if json.dumps(json.loads(text), separators=(",", ":")) == text:  # (else not JSON as written: parsed each time)
            entries[digest] = text
    body = "\n".join([_header(), *(f"{digest.hex()}\t{text}" for digest, text in sorted(entries.items()))]).encode()
    target = path_of(store_root)
    with contextlib.suppress(OSError):
        if target.read_bytes() == body + b"\n" + blake3.blake3(body).hexdigest().encode():
            return False  # (what the last build wrote: the same entries, each as this build parsed it)
    try:
        target.parent.mkdir(exist_ok=True)
        write_file_atomic(target, [body, b"\n", blake3.blake3(body).hexdigest().encode()], StoreLayout(store_root).tmp,
                          durable=False)
    except OSError:
        return False
    return True


def for_store(store_root: Path | None) -> ParsedCases:
    """The store's entries (none without a store: every case parsed)."""
    return ParsedCases() if store_root is None else read(store_root)
