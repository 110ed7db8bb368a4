"""Crash-test writer caught between creating its pack file and writing the pack's header: it prints
"opened" there and waits for a line on stdin (the test SIGKILLs it, or lets it go on), then stores
one object and prints its id."""

from __future__ import annotations

import sys

from clawstore.store import Store
from clawstore.store.core.packfile import HEADER, PackWriter

_write = PackWriter._write


def _held_write(self: PackWriter, parts: list[bytes | memoryview]) -> None:
    if self.size == 0 and parts == [HEADER]:
        print("opened", flush=True)
        sys.stdin.readline()
    _write(self, parts)


def main() -> None:
    PackWriter._write = _held_write  # type: ignore[method-assign]
    store = Store(sys.argv[1])
    print(store.put_bytes(b"written after the wait"), flush=True)


if __name__ == "__main__":
    main()
