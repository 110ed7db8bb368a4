"""A real `claw ARGS` that stops the first time it is about to read, in function STOP_IN, a campaign head it found in a
ref (the ref read, the head not yet): it prints "at head" on stderr and waits for a line on stdin. Meanwhile the test
moves the ref on and runs `claw gc` (tests/gc/test_head_readers.py).

    STOP_IN=_read_head python proc_head_read.py report --suite ...   (in the workspace; CLAW_STORE names the store)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from clawstore.store import refs
from clawstore.store.core import objects

_heads: set[str] = set()
_stopped = [False]
_get_ref = refs.get_ref
_get_bytes = objects.ObjectStore.get_bytes


def _stop(oid: str) -> None:
    if oid in _heads and not _stopped[0] and _within(os.environ["STOP_IN"]):
        _stopped[0] = True
        os.write(2, b"at head\n")
        sys.stdin.readline()


def _within(function: str) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == function:
            return True
        frame = frame.f_back
    return False


def get_ref(store: Any, name: str) -> str | None:
    value = _get_ref(store, name)
    if name.startswith("campaigns/") and value is not None:
        _heads.add(value)
    return value


def get_bytes(self: objects.ObjectStore, oid: str) -> bytes:
    _stop(oid)
    return _get_bytes(self, oid)


refs.get_ref = get_ref
objects.ObjectStore.get_bytes = get_bytes  # type: ignore[method-assign]

from clawstore.cli import main  # noqa: E402

sys.argv = ["claw", *sys.argv[1:]]
main()
