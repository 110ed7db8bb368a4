"""Concurrency test worker: increments the `counter` ref N times with compare-and-set retries."""

from __future__ import annotations

import sys

from clawstore.store import RefConflict, Store


def main() -> None:
    store, times = Store(sys.argv[1]), int(sys.argv[2])
    conflicts = 0
    for _ in range(times):
        while True:
            current = store.get_ref("counter")
            value = store.get_json(current)["n"] if current else 0
            new = store.put_json({"n": value + 1})
            try:
                store.set_ref("counter", new, expected=current)
                break
            except RefConflict:
                conflicts += 1
    print(conflicts)


if __name__ == "__main__":
    main()
