"""`claw cat ID`: an object's bytes on stdout, verified first."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO

import click

from clawstore.cli.common import store_option
from clawstore.cli.store_access import existing_object, open_store_of, os_errors
from clawstore.errors import UsageError
from clawstore.store.core.codec import CHUNK

_VERIFY_FIRST_MAX = 64 << 20  # cat buffers (verified) objects up to this size; larger ones: two passes


@click.command("cat")
@click.argument("oid", metavar="ID")
@store_option
@os_errors
def cat_cmd(oid: str, store_dir: Path | None) -> None:
    """Write an object's bytes to stdout, verified before they are written."""
    store = open_store_of(store_dir)
    existing_object(store, oid)
    if sys.stdout is None:  # (`claw cat ID >&-`: click's RuntimeError, a traceback, before session 72)
        raise UsageError("stdout is closed: nowhere to write the object's bytes")
    out = click.get_binary_stream("stdout")
    logical, _ = store.object_sizes(oid)
    try:
        if logical <= _VERIFY_FIRST_MAX:
            out.write(store.get_bytes(oid))
        else:
            with store.open_object(oid) as reader:  # pass 1: verify without output
                while reader.read(CHUNK):
                    pass
            with store.open_object(oid) as reader:
                _copy(reader, out)
        out.flush()
    except BrokenPipeError:  # `claw cat ID | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _copy(reader: BinaryIO, out: BinaryIO) -> None:
    while chunk := reader.read(CHUNK):
        out.write(chunk)


def register(group: click.Group) -> None:
    group.add_command(cat_cmd)
