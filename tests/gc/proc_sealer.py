"""A writer sealing a pack every 64 KiB, under a lease as a build: it stores a chain of 150 JSON objects (each naming
the one before), pins each as it goes (`pins/NAME`) and stores an object nothing names beside each. With `hold`, before
the edges file of its second pack it prints "sealed <pack id>" and waits for a line on stdin: the test SIGKILLs it
between that pack's seal and its edges file.

    python proc_sealer.py STORE NAME [hold]
"""

from __future__ import annotations

import os
import sys

from clawstore.store import Store
from clawstore.store.core import packfile, runtime

_write = packfile.write
_sealed: list[str] = []


def _held_write(*args: object) -> bytes:
    _sealed.append(str(args[2]))
    if len(_sealed) == 2:
        print(f"sealed {args[2]}", flush=True)
        sys.stdin.readline()
    return _write(*args)  # type: ignore[arg-type]


def main() -> None:
    root, name = sys.argv[1], sys.argv[2]
    if sys.argv[3:] == ["hold"]:
        packfile.write = _held_write  # type: ignore[assignment]
    runtime.PACK_TARGET = 64 << 10
    store = Store(root)
    with store.lease(f"build {name}"):  # (as a build holds one: gc keeps what is young while it lives)
        last = store.put_bytes(f"the first leaf of {name}".encode())
        for index in range(150):
            last = store.put_json({"i": index, "writer": name, "previous": last, "pad": os.urandom(400).hex()})
            store.set_ref(f"pins/{name}", last)
            store.put_bytes(f"garbage {index} of {name}".encode() + os.urandom(200))


if __name__ == "__main__":
    main()
