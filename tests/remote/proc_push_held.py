"""A real `claw push ARGS` that stops right before it swaps the remote's refs (everything sent, the refs read): it
prints "at swap" on stderr and waits for a line on stdin (tests/remote/test_push_beside_push.py).

    python proc_push_held.py push REMOTE ...   (in the workspace; CLAW_STORE names the store)
"""

from __future__ import annotations

import os
import sys
from typing import Any

from clawstore.remote import push

_move_refs = push._move_refs


def _held(*args: Any, **kwargs: Any) -> None:
    os.write(2, b"at swap\n")
    sys.stdin.readline()
    _move_refs(*args, **kwargs)


push._move_refs = _held

from clawstore.cli import main  # noqa: E402

sys.argv = ["claw", *sys.argv[1:]]
main()
