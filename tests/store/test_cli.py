"""The store commands, run as the real `claw` in separate processes (plus two in-process cases)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from clawstore.cli import cat_cmd, main
from clawstore.host.durable import temp_name
from clawstore.store import Store, oid_of
from clawstore.store.actions import key_digest, set_entries
from tests.store.helpers import claw, json_like
from tests.support.storefiles import flip_in_frame


def _one_error_line(proc: subprocess.CompletedProcess[bytes]) -> str:
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("claw: error: "), proc.stderr.decode()
    assert "Traceback" not in proc.stderr.decode()
    return lines[0]


def test_put_cat_ls_tree_checkout(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    src = tmp_path / "src"
    (src / "sub" / "empty").mkdir(parents=True)
    (src / "sub" / "x.txt").write_text("inside\n")
    (src / "tool").write_text("#!/bin/sh\n")
    (src / "tool").chmod(0o755)
    (src / "ln").symlink_to("sub/x.txt")
    blob = tmp_path / "blob.json"
    blob.write_bytes(json_like(300_000))

    put = claw("put", blob, src, "-", "--store", store_dir, input=b"from stdin")
    assert put.returncode == 0, put.stderr
    blob_id, tree_id, stdin_id = put.stdout.decode().split()
    assert blob_id == oid_of(blob.read_bytes()) and stdin_id == oid_of(b"from stdin")

    cat = claw("cat", blob_id, "--store", store_dir)
    assert cat.returncode == 0 and cat.stdout == blob.read_bytes()

    listing = claw("ls-tree", tree_id, "--store", store_dir)
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.decode().splitlines()
    assert [line.split("\t")[1] for line in lines] == ["ln -> sub/x.txt", "sub", "sub/empty", "sub/x.txt", "tool"]
    assert lines[-1].startswith("100755 file ")

    out = tmp_path / "out"
    checkout = claw("checkout", tree_id, out, "--store", store_dir)
    assert checkout.returncode == 0, checkout.stderr
    assert (out / "sub" / "x.txt").read_text() == "inside\n"
    assert (out / "sub" / "empty").is_dir() and os.readlink(out / "ln") == "sub/x.txt"
    assert os.access(out / "tool", os.X_OK)


def test_corrupt_object_cat_fsck_repair(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    good = store.put_bytes(b"fine")
    bad = store.put_bytes(json_like(100_000, seed=9))
    store.set_ref("pins/bad", bad)
    store.runtime.close_writer()  # as when the writing process ends: its pack is no longer written
    flip_in_frame(store, bad, 200)

    cat = claw("cat", bad, "--store", store.root)
    assert cat.returncode == 3 and cat.stdout == b""  # nothing unverified reaches stdout
    assert bad in _one_error_line(cat) and "corrupt" in cat.stderr.decode()

    check = claw("fsck", "--store", store.root)
    assert check.returncode == 1
    assert f"problem: object {bad} is corrupt" in check.stdout.decode()
    assert "ref pins/bad" in check.stdout.decode()
    assert good not in check.stdout.decode()

    repair = claw("fsck", "--repair", "--store", store.root)
    assert f"repaired: quarantined corrupt object {bad}" in repair.stdout.decode()
    assert "(its good blobs were kept)" in repair.stdout.decode()
    quarantined = os.listdir(store.root / "quarantine")  # the damaged pack, kept for a human
    assert len(quarantined) == 1 and ".pack." in quarantined[0]
    assert store.get_bytes(good) == b"fine"  # it shared the damaged pack: copied out first
    assert repair.returncode == 1  # the ref to it is left for a human: reported, not auto-deleted
    store.delete_ref("pins/bad")
    again = claw("fsck", "--store", store.root)
    assert again.returncode == 0, again.stdout
    assert "checked 1 objects" in again.stdout.decode()


def test_fsck_checks_records_and_tolerates_temp_files(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    output = store.put_bytes(b"an output")
    key = store.put_json({"node": "ok"})
    store.put_action(key, {"kind": "run", "key": key, "outputs": {"artifact": output}})
    # a record naming an object that is not there, written behind the store's back
    broken_key = store.put_json({"node": "broken"})
    missing = oid_of(b"lost output")
    record = store.put_json({"kind": "run", "key": broken_key, "outputs": {"files": [output, missing]}})
    set_entries(store, {key_digest(broken_key): (bytes.fromhex(record[7:]), time.time_ns())})
    # a leftover of a killed writer, and a temp file of a live one (this test process)
    dead = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    (store.tmp_dir / f"{dead.pid}-1-abcdef.tmp").write_bytes(b"partial")
    (store.tmp_dir / temp_name()).write_bytes(b"in flight")

    check = claw("fsck", "--store", store.root)
    assert check.returncode == 1
    text = check.stdout.decode()
    assert f"action-cache entry {broken_key}: output {missing} is missing" in text
    assert "temp files: 2 (1 stale)" in text

    repair = claw("fsck", "--repair", "--store", store.root)
    assert repair.returncode == 0, repair.stdout
    assert "removed 1 stale temp file(s)" in repair.stdout.decode()
    assert store.get_action_record_id(broken_key) is None  # will be rebuilt
    assert store.get_action_record_id(key) is not None
    assert len(os.listdir(store.tmp_dir)) == 1  # the live writer's file is kept
    assert claw("fsck", "--store", store.root).returncode == 0


def test_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    text_id = store.put_bytes(b"not a tree")
    for args in (("cat", "blake3:nothex"), ("ls-tree", text_id), ("cat", oid_of(b"absent")),
                 ("put", tmp_path / "no-such-file")):
        proc = claw(*args, "--store", store.root)
        assert proc.returncode == 2, (args, proc.stderr)
        _one_error_line(proc)
    missing_store = claw("fsck", "--store", tmp_path / "nowhere")
    assert missing_store.returncode == 3 and "no store at" in _one_error_line(missing_store)


def test_store_location_env_and_workspace_default(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "configs").mkdir(parents=True)
    (workspace / "deep" / "er").mkdir(parents=True)
    (workspace / "f.txt").write_text("hello")
    put = claw("put", workspace / "f.txt", cwd=workspace / "deep" / "er")
    assert put.returncode == 0, put.stderr
    oid = put.stdout.decode().strip()
    assert Store(workspace / "store", create=False).has(oid)  # store/ beside configs/

    env_store = tmp_path / "elsewhere"
    put = claw("put", workspace / "f.txt", cwd=workspace, extra_env={"CLAW_STORE": str(env_store)})
    assert put.returncode == 0 and Store(env_store, create=False).has(oid)

    stats = claw("store", "stats", "--json", cwd=workspace)
    assert stats.returncode == 0, stats.stderr
    numbers = json.loads(stats.stdout)
    assert numbers["objects"] == 1 and numbers["logical_bytes"] == 5
    assert numbers["stored_bytes"] == Store(workspace / "store").locate(oid)[2]
    assert numbers["packs"] == 1 and numbers["live_fraction"] == 1.0 and numbers["gc_would_free"] == 0
    assert numbers["disk_bytes"] >= 4096 and numbers["files"] >= 3


def test_rebuild_manifest_without_query_layer_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'clawstore.query.manifest':\n"
        "            raise ImportError('blocked for this test')\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    Store(tmp_path / "store")
    proc = claw("fsck", "--rebuild-manifest", "--store", tmp_path / "store",
                extra_env={"PYTHONPATH": f"{blocker}{os.pathsep}{Path(__file__).parents[2]}"})
    assert proc.returncode == 2
    assert "--rebuild-manifest" in _one_error_line(proc)


def test_cat_of_large_object_verifies_before_streaming(tmp_path: Path, monkeypatch) -> None:
    """Above the in-memory limit cat makes a verification pass first (limit lowered for speed)."""
    monkeypatch.setattr(cat_cmd, "_VERIFY_FIRST_MAX", 1000)
    store = Store(tmp_path / "store")
    data = json_like(3 << 20, seed=4)
    oid = store.put_bytes(data)
    runner = CliRunner()
    result = runner.invoke(main, ["cat", oid, "--store", str(store.root)])
    assert result.exit_code == 0 and result.stdout_bytes == data
    flip_in_frame(store, oid, -100)
    result = runner.invoke(main, ["cat", oid, "--store", str(store.root)])
    assert result.exit_code == 3 and result.stdout_bytes == b""


def test_stats_human_output(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.put_bytes(json_like(200_000))
    result = CliRunner().invoke(main, ["store", "stats", "--store", str(store.root)])
    assert result.exit_code == 0
    lines = dict(line.split(None, 1) for line in result.output.replace(" bytes", "_bytes").splitlines())
    assert lines["objects"] == "1" and lines["logical_bytes"].startswith("200000 (195.3 KiB)")
    assert float(lines["ratio"]) > 2
