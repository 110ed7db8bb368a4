"""Crash-test worker: migrate a format-1 store (the test SIGKILLs it at a random instant)."""

from __future__ import annotations

import sys
from pathlib import Path

from clawstore.store.services.migrate import migrate


def main() -> None:
    print("ready", flush=True)
    report = migrate(Path(sys.argv[1]))
    print(f"done {report.copied}", flush=True)


if __name__ == "__main__":
    main()
