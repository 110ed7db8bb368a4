"""A config tree entry whose object is larger than the size the entry gives: an archive of 42 KB whose tree names a
file of 8 bytes holding 256 MiB of zeros (zstd packs them into a few KB). `claw archive import --configs-to` wrote
the object out whole before it compared the sizes (a few such entries fill a disk), after it had published the
import; it is refused before anything is written now, whether the object's frame declares its size or not (a real
`claw` process whose file size is capped)."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import blake3
import pytest
import zstandard

from clawstore.testing.standin import StandIn
from tests.faults.forge import Forgery
from tests.hostile.attack import CLAW
from tests.support.claw import Claw, claw, env, ws  # noqa: F401 (fixtures)
from tests.support.workspace import Workspace

RUNS = ("--suite", "main", "--run-profile", "rp")
CAP = 32 << 20  # what the import may write to any one file: the forged file is 8x that


def _cap_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (CAP, CAP))


def _sizeless(forgery: Forgery, content: bytes) -> str:
    """Add an object whose frame does not say its content's size (as a stream is compressed): its id."""
    hexdigest = blake3.blake3(content).hexdigest()
    compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    forgery.frames[hexdigest] = compressor.compress(content) + compressor.flush()
    return "blake3:" + hexdigest


@pytest.mark.parametrize("frame", ["declaring its size", "declaring no size"])
def test_a_config_file_larger_than_its_entry_says_is_refused_before_anything_is_written(
        ws: Workspace, claw: Claw, standin: StandIn, tmp_path: Path, frame: str) -> None:  # noqa: F811
    assert claw("build", *RUNS)[0] == 0
    archive = tmp_path / "good.claw"
    assert claw("archive", "export", *RUNS, "-o", str(archive))[0] == 0
    forgery = Forgery.read(archive)
    tree = forgery.json(forgery.manifest["configs"]["tree"])
    content = bytes(8 * CAP)
    made = forgery.add(content) if frame == "declaring its size" else _sizeless(forgery, content)
    tree["entries"].append({"path": "configs/cases/alpha/notes.txt", "type": "file", "mode": 0o100644, "size": 8,
                            "object": made})
    forgery.manifest["configs"]["tree"] = forgery.add(tree)
    forgery.resign()  # (signed by this user: only the content checks stand in the way)
    forged = forgery.write(tmp_path / "forged.claw")
    assert forged.stat().st_size < 100_000

    target = tmp_path / "new"
    done = subprocess.run([CLAW, "archive", "import", str(forged), "--configs-to", str(target)], cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "CLAW_STORE"}, capture_output=True,
                          text=True, preexec_fn=_cap_file_size, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stdout, done.stderr[-2000:])
    assert str(forged) in lines[0] and "configs/cases/alpha/notes.txt" in lines[0] and "size 8" in lines[0], lines
    assert not target.exists()  # nothing imported, no store made, no configs
