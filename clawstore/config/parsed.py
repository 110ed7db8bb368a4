"""Case files parsed before, by the BLAKE3 of their bytes: a campaign's read commands take a case's YAML mapping from
here instead of parsing it again when its file holds the same bytes (a stale campaign's `claw status` at 10,000 cases
spent a fifth of its time parsing YAML that had not changed since the build).

A build that plans (no stamp answered it) parses every case file (what it sends is what the files hold, never an entry
of derived data) and writes what it parsed into its store's `stamps/` directory (derived data, as the stamp: deleting
it costs a parse; builder/parsed_cases.py); `claw status`, `explain`, `build --dry-run` and `plan` read it and never
write it. It is sound because a file's mapping is a function of its bytes and of claw's code: each
entry is the mapping parsed from the bytes its digest names (JSON text: a parsed config holds JSON values alone,
config/yamlio.py), and the whole file is trusted only by the claw that wrote it (the code's digest as the stamp takes
it, and Python's version) and only when its own digest holds (damaged: not read). The bytes looked up are the bytes
read once: a file edited meanwhile is the old bytes or the new, each parsed as itself. Everything after the parse
(validation, sources, attachments, paths, duplicate ids) runs as before. docs/building.md ("Every node stale: the
parsed cases").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import blake3


class ParsedCases:
    """The entries read (by digest: each mapping's JSON text; none for a build, which parses every case), and the digest
    of each case file parsed or taken by this load (by path: what a build writes)."""

    def __init__(self, known: dict[bytes, str] | None = None):
        self.known = known or {}
        self.digests: dict[str, bytes] = {}

    def parse(self, path: Path, data: bytes) -> Any:
        """The YAML `data` (the bytes of the case file `path`) parsed: from an entry of the same bytes when there is
        one, else by the parser (YamlProblem as config/yamlio.py says it)."""
        from clawstore.config.yamlio import decoded, parse_yaml_text

        digest = blake3.blake3(data).digest()
        self.digests[str(path)] = digest
        text = self.known.get(digest)
        if text is not None:
            try:
                found = json.loads(text)
            except ValueError:  # (not as written: parse)
                found = None
            if isinstance(found, dict):
                return found
        return parse_yaml_text(decoded(data))

    def loaded(self, writes: bool) -> None:
        """The load is over: the entries read let go (a mapping's text and its digest a case: 4.7 MB at 10,000 cases),
        and what this load parsed too unless it is written (`writes`: a build)."""
        self.known = {}
        if not writes:
            self.digests = {}
