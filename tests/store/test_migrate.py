"""Format 1 -> format 2: a store of the previous release, its archives, a SIGKILL mid-way, a rebuild."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import tarfile
import time
from pathlib import Path

from clawstore.store import Store
from clawstore.store.core.layout import read_format
from clawstore.store.services.archive_import import import_archive
from clawstore.store.services.fsck import fsck
from clawstore.testing.standin import StandIn
from tests.store.helpers import claw as run_claw
from tests.store.helpers import json_like, script
from tests.support.claw import Claw
from tests.support.format1 import downgrade, write_action, write_object
from tests.support.workspace import Workspace

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture_store(tmp_path: Path) -> tuple[Path, dict]:
    """The format-1 store the previous release wrote (tests/store/fixtures, see its .json)."""
    with tarfile.open(FIXTURES / "format1_store.tar") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "store", json.loads((FIXTURES / "format1_store.json").read_text())


def test_a_format1_store_of_the_previous_release_is_upgraded_on_open(tmp_path: Path) -> None:
    root, expected = _fixture_store(tmp_path)
    assert read_format(root) == 1
    store = Store(root)  # the first open upgrades it
    assert read_format(root) == 2
    assert not (root / "objects").exists() and not (root / "ac").exists()
    assert sorted(store.iter_objects()) == expected["objects"]
    for oid in expected["objects"]:
        store.get_bytes(oid)  # verified read
    assert dict(store.iter_actions()) == expected["actions"]
    assert store.get_ref("campaigns/fixture") == expected["head"]
    report = fsck(store)
    assert report.clean and report.objects == len(expected["objects"]) and report.actions == 5
    assert len(os.listdir(root / "packs")) == 1 and len(os.listdir(root / "index")) <= 2  # 45 files before


def test_an_archive_of_a_format1_store_still_imports(tmp_path: Path) -> None:
    _, expected = _fixture_store(tmp_path / "unused")
    store = Store(tmp_path / "store")
    # made before archives were signed: its format is what is tested here, so its maker is trusted
    report = import_archive(store, FIXTURES / "format1_archive.claw", trusts=lambda signer: True)
    assert report.new_objects == report.summary.objects == 21
    assert store.get_ref("campaigns/fixture") == expected["head"]
    assert dict(store.iter_actions()) == expected["actions"]
    assert fsck(store).clean


def test_claw_store_migrate_command(tmp_path: Path) -> None:
    root, expected = _fixture_store(tmp_path)
    first = run_claw("store", "migrate", "--store", root)
    assert first.returncode == 0, first.stderr
    assert f"migrated {len(expected['objects'])} objects" in first.stdout.decode()
    again = run_claw("store", "migrate", "--store", root)
    assert again.returncode == 0 and "already format 2" in again.stdout.decode()
    missing = run_claw("store", "migrate", "--store", tmp_path / "nothing")
    assert missing.returncode == 3 and "no store" in missing.stderr.decode()


def _big_format1_store(root: Path) -> tuple[dict[str, bytes], dict[str, str]]:
    """A format-1 store with a few thousand objects (some large) and action entries."""
    import blake3
    import zstandard

    Store(root)  # a format-2 layout, then turned into format 1 by hand
    (root / "CLAWSTORE").write_text('{"format": 1}\n')
    rnd = random.Random(7)
    objects: dict[str, bytes] = {}
    cctx = zstandard.ZstdCompressor(level=1)
    for i in range(3000):
        data = json_like(rnd.randint(50, 3000), seed=i) if i % 500 else json_like(9 << 20, seed=i)
        hexdigest = blake3.blake3(data).hexdigest()
        objects[hexdigest] = data
        write_object(root, hexdigest, cctx.compress(data))
    actions = {}
    for i, output in enumerate(sorted(objects)[:400]):
        document = b'{"kind":"run","node":%d}' % i  # the node's input document: its id is the key
        key = blake3.blake3(document).hexdigest()
        objects[key] = document
        write_object(root, key, cctx.compress(document))
        record = json.dumps({"kind": "run", "key": "blake3:" + key, "outputs": {"o": "blake3:" + output}}).encode()
        hexdigest = blake3.blake3(record).hexdigest()
        objects[hexdigest] = record
        write_object(root, hexdigest, cctx.compress(record))
        write_action(root, key, "blake3:" + hexdigest)
        actions["blake3:" + key] = "blake3:" + hexdigest
    return objects, actions


def test_sigkill_during_migration_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    objects, actions = _big_format1_store(root)
    rnd = random.Random(11)
    # How long a whole migration takes on this machine (on a copy), so the kills land inside one.
    shutil.copytree(root, tmp_path / "copy")
    proc = script("proc_migrate.py", tmp_path / "copy")
    assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
    began = time.monotonic()
    proc.communicate(timeout=120)
    whole = time.monotonic() - began
    kills = 0
    for _ in range(6):
        proc = script("proc_migrate.py", root)
        assert proc.stdout.readline() == b"ready\n", proc.stderr.read()
        time.sleep(rnd.uniform(0.02, 0.8) * whole)
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=60)
        kills += proc.returncode == -signal.SIGKILL
        if read_format(root) == 2:
            break
        # still format 1: every loose file is still there for the next attempt
        assert sum(len(os.listdir(root / "objects" / shard)) for shard in os.listdir(root / "objects")) == 3800
    assert kills >= 1
    store = Store(root)  # finishes (or just cleans up after) the killed migration
    assert read_format(root) == 2 and not (root / "objects").exists()
    assert {oid[7:] for oid in store.iter_objects()} == set(objects)
    for hexdigest in rnd.sample(sorted(objects), 50):
        assert store.get_bytes("blake3:" + hexdigest) == objects[hexdigest]
    assert dict(store.iter_actions()) == actions
    assert fsck(store).clean


def test_a_campaign_built_in_format1_migrates_and_rebuilds_without_a_request(
        ws: Workspace, claw: Claw, standin: StandIn, env: dict[str, str]) -> None:
    assert claw.build()[0] == 0
    paid = len(standin.requests)
    store = Store(env["CLAW_STORE"])
    head = store.get_ref("campaigns/main__rp__none")
    counts = downgrade(store)  # the same store as the previous release would have written it
    assert read_format(Path(env["CLAW_STORE"])) == 1 and counts["actions"] >= 4
    code, out, err = claw.build("--output", "json")
    assert code == 0, err
    assert len(standin.requests) == paid  # every result was found: 0 requests
    assert {row["run"] for row in json.loads(out)["rows"]} == {"reuse"}
    store = Store(env["CLAW_STORE"])
    assert read_format(store.root) == 2 and store.get_ref("campaigns/main__rp__none") == head
    assert fsck(store).clean
