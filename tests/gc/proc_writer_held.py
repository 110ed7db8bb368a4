"""A real `claw ARGS` that stops the first time it calls HOLD_AT (`module:function` or `module:Class.method`), before
the call: it prints "held" on stderr and waits for a line on stdin, then goes on. Meanwhile the test runs a `claw gc
--grace 0` to its end (tests/gc/test_writers_beside_gc.py): a writer stopped between what it wrote or read and the
ref or record that names it.

    HOLD_AT=clawstore.remote.pull:_pull_ref python proc_writer_held.py pull origin   (in the workspace)
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

module_name, _, qualname = os.environ["HOLD_AT"].partition(":")
owner: Any = importlib.import_module(module_name)
*outer, name = qualname.split(".")
for part in outer:
    owner = getattr(owner, part)
_original = getattr(owner, name)
_held = [False]


def _holding(*args: Any, **kwargs: Any) -> Any:
    if not _held[0]:
        _held[0] = True
        os.write(2, b"held\n")
        sys.stdin.readline()
    return _original(*args, **kwargs)


setattr(owner, name, _holding)

from clawstore.cli import main  # noqa: E402

sys.argv = ["claw", *sys.argv[1:]]
main()
