"""A real `claw gc` that stops at one phase of its work, prints "at PHASE" and waits for a line on stdin:
the test SIGKILLs it there. Its packs are sealed at 4 KiB (a build's limits shrunk) or 8 blobs (gc.COPY_PACK_BLOBS),
so a small store's copy fills several. Phases, in the order a gc reaches them:

    plan      the held plan begins (the kept objects about to be listed)
    copy      two new packs sealed, a third open with a copied object in it
    entries   the kept entries' copy under way: two packs sealed since it began, the next open with an entry in it
    copied    every copy sealed, the index segment naming them not yet written
    segment   the new segment's temp file half-written (the index swap under way)
    swapped   the new segment published, the segments it replaces not yet removed
    delete    the first old pack and its edges file gone, the second pack gone but not its edges file
    none      not stopped (an uninterrupted gc at the same limits)

    python proc_gc_held.py PHASE   (in the workspace; CLAW_STORE names the store)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from clawstore.store.core import index, runtime
from clawstore.store.services import gc

PHASE = sys.argv[1]
_sealed = [0]
_calls: dict[str, int] = {}


def _stop() -> None:
    os.write(1, f"at {PHASE}\n".encode())
    sys.stdin.readline()


def _stopping(name: str, at_call: int, original: Callable[..., Any], before: bool = True) -> Callable[..., Any]:
    """`original`, which stops the process before (or after) its `at_call`-th call."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _calls[name] = _calls.get(name, 0) + 1
        if before and _calls[name] == at_call:
            _stop()
        result = original(*args, **kwargs)
        if not before and _calls[name] == at_call:
            _stop()
        return result

    return wrapped


def _plan(*args: Any, held: bool = True, **kwargs: Any) -> Any:
    if held:
        _stop()
    return _original_plan(*args, held=held, **kwargs)


def _seal(self: gc._Writers) -> bool:
    _sealed[0] += self._open is not None
    return _original_seal(self)


def _children_in(content: bytes) -> Any:
    if _sealed[0] == 2:  # (the third pack has this object's blob: stopped once)
        _sealed[0] += 1
        _stop()
    return _original_children_in(content)


def _encode_action(*args: Any) -> Any:
    _calls["entries"] = _calls.get("entries", 0) + 1
    if _calls["entries"] == 2 * gc.COPY_PACK_BLOBS + 2:  # (the pack its objects' copy left open, then two of entries)
        _stop()
    return _original_encode_action(*args)


def _parts(*args: Any) -> Iterator[bytes]:
    parts = _original_parts(*args)
    yield next(parts)  # (its header)
    _stop()
    yield from parts


_original_plan, _original_seal, _original_children_in = gc._plan, gc._Writers.seal, gc.children_in
_original_parts, _original_encode_action = index.segment_parts, gc.encode_action
runtime.PACK_TARGET = 4 << 10
gc.COPY_PACK_BLOBS = 8
if PHASE == "plan":
    gc._plan = _plan  # type: ignore[assignment]
elif PHASE == "copy":
    gc._Writers.seal = _seal  # type: ignore[method-assign]
    gc.children_in = _children_in
elif PHASE == "entries":
    gc.encode_action = _encode_action
elif PHASE == "copied":
    gc.write_rows_segment = _stopping("write_rows_segment", 1, gc.write_rows_segment)
elif PHASE == "segment":
    index.segment_parts = _parts  # type: ignore[assignment]
elif PHASE == "swapped":
    gc.remove_segments = _stopping("remove_segments", 1, gc.remove_segments)
elif PHASE == "delete":
    gc.edges_path = _stopping("edges_path", 2, gc.edges_path)
elif PHASE != "none":
    sys.exit(f"unknown phase {PHASE}")

if __name__ == "__main__":
    from clawstore.cli import main

    sys.argv = ["claw", "gc", "--json"]
    main()
