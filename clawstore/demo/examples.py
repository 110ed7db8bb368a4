"""The demo's example configs as shipped: their BLAKE3 list, checked before `claw demo` uses them.

A checkout's `configs/` is the user's to edit; the demo runs its packaged copy, and says so plainly if
that copy was changed (the demo's promises — "explain names the edited prompt" — hold for it alone).
After changing the examples on purpose: `python3 -m clawstore.demo.examples --write`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import blake3

EXAMPLE_CONFIGS = Path(__file__).parent / "configs"
LISTING = Path(__file__).parent / "configs.blake3"


def digests(root: Path) -> dict[str, str]:
    """{path relative to root: BLAKE3 hex} of every file under root."""
    return {path.relative_to(root).as_posix(): blake3.blake3(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def recorded() -> dict[str, str]:
    pairs = (line.split("  ", 1) for line in LISTING.read_text(encoding="utf-8").splitlines() if line.strip())
    return {name: digest for digest, name in pairs}


def changes(root: Path | None = None) -> list[str]:
    """What differs under `root` (the packaged examples) from the list as shipped ("changed: x", "added: y",
    "missing: z"), in path order."""
    now, shipped = digests(root or EXAMPLE_CONFIGS), recorded()
    found = [f"changed: {name}" for name in now if name in shipped and now[name] != shipped[name]]
    found += [f"added: {name}" for name in now if name not in shipped]
    found += [f"missing: {name}" for name in shipped if name not in now]
    return sorted(found, key=lambda item: item.split(": ", 1)[1])


def write_listing() -> None:
    LISTING.write_text("".join(f"{digest}  {name}\n" for name, digest in digests(EXAMPLE_CONFIGS).items()),
                       encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_listing()
    else:
        print("\n".join(changes()) or "the example configs are as shipped")
