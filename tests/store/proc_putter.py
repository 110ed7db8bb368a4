"""Concurrency test worker: puts objects from an overlapping set, prints each id."""

from __future__ import annotations

import sys

from clawstore.store import Store
from tests.store.helpers import json_like


def main() -> None:
    store, worker = Store(sys.argv[1]), int(sys.argv[2])
    # objects 0..59 exist for every worker; each worker covers a window that overlaps its neighbours'
    base = json_like(1_300_000)
    for position in range(worker * 15, worker * 15 + 60):
        number = position % 60
        size = 1_200_000 if number % 4 == 0 else 300 + number  # a quarter cross the streaming threshold
        data = b"%d:" % number + base[:size]
        if number % 3 == 0:
            with store.batch():
                oid = store.put_bytes(data)
        else:
            oid = store.put_bytes(data)
        print(number, oid, flush=True)


if __name__ == "__main__":
    main()
