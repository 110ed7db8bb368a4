"""Holds a lease (and optionally an exclusive lock) until killed; prints 'held' once it has them."""

from __future__ import annotations

import sys
import time

from clawstore.store import Store


def main() -> None:
    store = Store(sys.argv[1])
    with store.lease(sys.argv[2]):
        if len(sys.argv) > 3:
            with store.exclusive(sys.argv[3]):
                print("held", flush=True)
                time.sleep(600)
        print("held", flush=True)
        time.sleep(600)


if __name__ == "__main__":
    main()
