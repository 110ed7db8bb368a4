"""A real `claw pull ARGS` that stops right before it moves its first ref (every pack fetched and checked, the store's
value of that ref read): it prints "at refs" on stderr and waits for a line on stdin
(tests/remote/test_pull_beside_pull.py).

    python proc_pull_held.py pull REMOTE ...   (in the workspace; CLAW_STORE names the store)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from clawstore.remote import pull

_pull_ref = pull._pull_ref
_waited = []


def _held(store: Any, *args: Any, **kwargs: Any) -> None:
    """`_pull_ref`, its first move of a ref (the store's value read) held until a line comes."""
    set_ref = store.set_ref

    def held_set_ref(name: str, value: str, **options: Any) -> Any:
        if "expected" in options and not _waited:
            _waited.append(True)
            os.write(2, b"at refs\n")
            sys.stdin.readline()
        return set_ref(name, value, **options)

    store.set_ref = held_set_ref
    try:
        _pull_ref(store, *args, **kwargs)
    finally:
        store.set_ref = set_ref


pull._pull_ref = _held

from clawstore.cli import main  # noqa: E402

sys.argv = ["claw", *sys.argv[1:]]
main()
