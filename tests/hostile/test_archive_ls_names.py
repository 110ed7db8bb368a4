"""`claw archive ls` prints the config files an archive's manifest lists, and the manifest is the archive's word alone
(`ls` reads no object): a path there holding terminal escapes or a newline was printed as it was, so a file someone
sent could retitle the terminal, hide text or forge lines of the listing (a `ref` line, a config file). Such a path is
printed escaped, on its one line; a name the tree rule allows (spaces, accents) is printed as it is."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from clawstore.cli import main
from clawstore.store import Store
from clawstore.store.services.archive import write_archive

FORGED = "configs/\x1b]0;pwned\x07a\x1b[2J\nref       campaigns/fake -> blake3:" + "0" * 64
PLAIN = "configs/cases/ça va/notes de réunion.txt"


def test_config_paths_from_a_manifest_cannot_write_to_the_terminal(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    blob = store.put_bytes(b"x")
    files = [{"path": path, "type": "file", "mode": 0o100644, "size": 1, "object": blob} for path in (FORGED, PLAIN)]
    archive = tmp_path / "a.claw"
    write_archive(store, archive, {"configs": {"files": files}}, [blob])

    result = CliRunner().invoke(main, ["archive", "ls", str(archive)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert not any(ch in out for ch in "\x1b\x07"), repr(out)
    assert not any(line.startswith("ref ") for line in out.splitlines()), out  # no line forged
    assert f"  {PLAIN}  1" in out.splitlines()
    assert any("\\x1b]0;pwned" in line and "campaigns/fake" in line for line in out.splitlines()), out
