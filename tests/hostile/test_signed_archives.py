"""Signed provenance: what another user exported or pushed is reused only once its signer is trusted.

Each "user" is a real `claw` process with an $XDG_CONFIG_HOME of its own (its signing key and trust
list); the archives are real files, the forgeries re-sealed with tests/faults/forge.py.
"""

from __future__ import annotations

import base64
import json
import shutil
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from clawstore.testing.standin import StandIn
from clawstore.trust import keys
from clawstore.values.canonical import canonical_json
from tests.faults.forge import Forgery
from tests.faults.test_hostile_archives import snapshot
from tests.hostile.conftest import RUNS, User
from tests.support.workspace import Workspace, standard


@pytest.fixture
def exported(alice: User, tmp_path: Path) -> Path:
    ws = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=ws.root)
    archive = tmp_path / "alice.claw"
    alice.here("archive", "export", *RUNS, "-o", str(archive), cwd=ws.root)
    return archive


def _fresh(tmp_path: Path, name: str) -> Workspace:
    return standard(tmp_path / name)


def test_threads_making_the_first_key_at_once_agree_on_one() -> None:
    # A push signs its bundles from 8 threads: on a fresh machine they all make the key at once.
    from concurrent.futures import ThreadPoolExecutor

    def public() -> str:
        return keys.public_text(keys.signing_key().public_key())

    with ThreadPoolExecutor(max_workers=16) as pool:
        made = set(pool.map(lambda _: public(), range(64)))
    assert made == {keys.own_public()}
    assert sorted(p.name for p in keys.config_dir().iterdir()) == [keys.PRIVATE_FILE]


def test_users_adding_trust_at_once_lose_no_key() -> None:
    # Two `claw trust add` at once read the list, add their key and write it back: without a lock one
    # of the keys was silently dropped.
    import subprocess
    import sys

    wanted = [keys.public_text(Ed25519PrivateKey.generate().public_key()) for _ in range(12)]
    code = "import sys; from clawstore.trust import keys; keys.add_trusted(sys.argv[1])"
    procs = [subprocess.Popen([sys.executable, "-c", code, key]) for key in wanted]
    assert [proc.wait(timeout=60) for proc in procs] == [0] * len(wanted)
    assert set(wanted) <= keys.trusted()
    assert not [p.name for p in keys.config_dir().iterdir() if "tmp" in p.name], "no temp file left behind"


def test_the_key_is_made_once_private_and_never_shipped(alice: User, exported: Path, tmp_path: Path) -> None:
    public = alice.key(tmp_path)
    assert public.startswith(keys.KEY_PREFIX) and "\n" not in public and public == alice.key(tmp_path)
    private_file = alice.home / "claw" / keys.PRIVATE_FILE
    assert stat.S_IMODE(private_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((alice.home / "claw").stat().st_mode) == 0o700
    secret = private_file.read_bytes().strip()
    raw = base64.b64decode(secret)
    for path in [exported, *(p for p in (tmp_path / "alice" / "store").rglob("*") if p.is_file())]:
        data = path.read_bytes()
        assert secret not in data and raw not in data, path
    listed = alice.here("trust", "list", cwd=tmp_path)  # (reads back what the key made: in this process)
    assert listed.strip() == f"{public}  (yours)"


def test_untrusted_refused_kept_apart_then_trusted(alice: User, bob: User, exported: Path, tmp_path: Path,
                                                   standin: StandIn) -> None:
    campaign_requests = len(standin.requests)
    assert campaign_requests > 0
    signer = alice.key(tmp_path)

    # refused by default: one line naming the signer, and not even an empty store is left
    b1 = _fresh(tmp_path, "bob1")
    refused = bob.claw("archive", "import", str(exported), cwd=b1.root)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert f"signed by {signer}, a key you do not trust" in refused.stderr
    assert not (b1.root / "store").exists()

    # --untrusted: imported, kept apart, and a build re-runs every node
    b2 = _fresh(tmp_path, "bob2")
    kept = bob.claw("archive", "import", str(exported), "--untrusted", cwd=b2.root)
    assert kept.returncode == 0, kept.stderr
    assert "kept apart" in kept.stderr
    before = len(standin.requests)
    bob.ok("build", *RUNS, cwd=b2.root)
    assert len(standin.requests) - before == campaign_requests

    # the same import, then `claw trust add`: the next build sends no request
    b3 = _fresh(tmp_path, "bob3")
    bob.here("archive", "import", str(exported), "--untrusted", cwd=b3.root)
    assert bob.here("trust", "add", signer, cwd=tmp_path).strip() == f"trusted {signer}"
    before = len(standin.requests)
    built = bob.ok("build", *RUNS, cwd=b3.root)
    assert len(standin.requests) == before, built
    bob.here("fsck", cwd=b3.root)  # (exit 0: here asserts it)

    # trusted now: a plain import into a fresh workspace just works; removing trust refuses again
    b4 = _fresh(tmp_path, "bob4")
    bob.ok("archive", "import", str(exported), cwd=b4.root)
    bob.here("trust", "remove", signer, cwd=tmp_path)
    assert bob.claw("archive", "import", str(exported), cwd=_fresh(tmp_path, "bob5").root).returncode == 2


def _resign(forgery: Forgery, private: Ed25519PrivateKey) -> None:
    """What an attacker with a key of their own does after editing the manifest."""
    from clawstore.trust.signature import MESSAGE_PREFIX

    manifest = {k: v for k, v in forgery.manifest.items() if k != "signature"}
    manifest["objects"] = [[h, len(forgery.frames[h])] for h in sorted(forgery.frames)]
    signature = private.sign(MESSAGE_PREFIX + canonical_json(manifest))
    forgery.manifest["signature"] = {"key": keys.public_text(private.public_key()),
                                     "ed25519": base64.b64encode(signature).decode()}


def test_forged_signatures_are_refused_and_the_store_is_unchanged(alice: User, exported: Path,
                                                                   tmp_path: Path) -> None:
    ws = tmp_path / "alice"
    before = snapshot(ws / "store")
    mallory = Ed25519PrivateKey.generate()
    attacks = {
        "changed after signing": (lambda f: f.manifest.update(build_id="another-build"), "does not verify"),
        "re-signed by another key": (lambda f: (f.manifest.update(build_id="another-build"), _resign(f, mallory)),
                                     f"signed by {keys.public_text(mallory.public_key())}, a key you do not trust"),
        "signature removed": (lambda f: f.manifest.pop("signature"), "not signed"),
        "signature of another archive": (lambda f: f.manifest.update(
            signature={**f.manifest["signature"], "ed25519": base64.b64encode(b"x" * 64).decode()}),
            "does not verify"),
    }
    for what, (attack, words) in attacks.items():
        forgery = Forgery.read(exported)
        attack(forgery)
        forged = forgery.write(tmp_path / "forged.claw")
        done = alice.claw("archive", "import", str(forged), cwd=ws)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, (what, done.stderr)
        assert words in done.stderr, (what, done.stderr)
        assert snapshot(ws / "store") == before, what


def test_a_pull_of_another_users_push_needs_their_key_trusted(alice: User, bob: User, tmp_path: Path,
                                                               standin: StandIn) -> None:
    a = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=a.root)
    remote = tmp_path / "remote"
    alice.here("push", str(remote), cwd=a.root)
    b = standard(tmp_path / "bob")
    refused = bob.claw("pull", str(remote), cwd=b.root)
    assert refused.returncode == 2 and f"signed by {alice.key(tmp_path)}" in refused.stderr, refused.stderr
    bob.here("trust", "add", alice.key(tmp_path), cwd=tmp_path)
    shutil.rmtree(b.root / "store", ignore_errors=True)
    bob.ok("pull", str(remote), cwd=b.root)
    before = len(standin.requests)
    bob.here("build", *RUNS, cwd=b.root)
    assert len(standin.requests) == before


def test_pull_untrusted_is_kept_apart_until_the_pusher_is_trusted(alice: User, bob: User, tmp_path: Path,
                                                                  standin: StandIn) -> None:
    a = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=a.root)
    campaign_requests = len(standin.requests)
    remote = str(tmp_path / "remote")
    alice.here("push", remote, cwd=a.root)

    b1 = standard(tmp_path / "bob1")
    pulled = bob.ok("pull", remote, "--untrusted", cwd=b1.root)
    assert f"kept apart (signed by {alice.key(tmp_path)}" in pulled
    before = len(standin.requests)
    bob.ok("build", *RUNS, cwd=b1.root)  # nothing of alice's is reused: every node runs here
    assert len(standin.requests) - before == campaign_requests
    again = bob.claw("pull", remote, cwd=b1.root)  # a plain pull refuses them again, refs stay put
    assert again.returncode == 2 and "a key you do not trust" in again.stderr

    b2 = standard(tmp_path / "bob2")
    bob.here("pull", remote, "--untrusted", cwd=b2.root)
    bob.here("trust", "add", alice.key(tmp_path), cwd=tmp_path)
    before = len(standin.requests)
    bob.ok("build", *RUNS, cwd=b2.root)  # moved in first, then reused
    assert len(standin.requests) == before
    bob.here("fsck", cwd=b2.root)  # (exit 0: here asserts it)
    assert bob.ok("pull", remote, cwd=b2.root)  # trusted now: a plain pull just works


def test_kept_apart_results_are_queryable_viewable_and_marked(alice: User, bob: User, exported: Path,
                                                              tmp_path: Path) -> None:
    signer = alice.key(tmp_path)
    b = _fresh(tmp_path, "bob")
    bob.here("archive", "import", str(exported), "--untrusted", cwd=b.root)
    sql = "select trusted, signer, count(*) as n from runs group by all order by all"

    report = bob.ok("report", *RUNS, cwd=b.root)
    assert report.splitlines()[0].startswith(f"UNTRUSTED: kept apart, signed by {signer}")
    # the report materialised the kept-apart head and named it so, as a query does
    current = json.loads((b.root / "store" / "manifest" / "heads" / "current.json").read_text())
    [(campaign, entry)] = current["untrusted"].items()
    assert campaign == "main__rp__none" and entry["signer"] == signer
    assert (b.root / "store" / "manifest" / "heads" / entry["head"]).is_dir()

    queried = bob.claw("query", sql, "--format", "csv", cwd=b.root)
    assert queried.returncode == 0, queried.stderr
    lines = queried.stdout.strip().splitlines()
    assert lines[0] == "trusted,signer,n" and len(lines) == 2 and lines[1].startswith(f"false,{signer},")
    assert int(lines[1].rsplit(",", 1)[1]) > 0
    assert "kept apart as untrusted" in queried.stderr and "where trusted" in queried.stderr
    as_json = bob.ok("report", *RUNS, "--output", "json", cwd=b.root)
    assert '"trusted": false' in as_json and signer in as_json
    page = b.root / "page.html"
    bob.ok("view", *RUNS, "--out", str(page), cwd=b.root)
    assert f"UNTRUSTED: kept apart, signed by {signer}" in page.read_text(encoding="utf-8")
    compared = json.loads(bob.ok("compare", "main__rp__none", "campaigns/main__rp__none", "--output", "json",
                                 cwd=b.root))
    assert compared["a"]["trusted"] is False and compared["b"]["signer"] == signer, compared["a"]
    assert compared["a"]["ref"].startswith("campaigns/main__rp__none (UNTRUSTED: kept apart, signed by")

    # trusted: the next build moves it in, and the same rows are trusted now, with no note
    bob.here("trust", "add", signer, cwd=tmp_path)
    bob.ok("build", *RUNS, cwd=b.root)
    queried = bob.claw("query", sql, "--format", "csv", cwd=b.root)
    assert queried.stdout.strip().splitlines()[1].startswith("true,,"), queried.stdout
    assert "untrusted" not in queried.stderr
    assert "UNTRUSTED" not in bob.ok("report", *RUNS, cwd=b.root)
    compared = json.loads(bob.ok("compare", "main__rp__none", "main__rp__none", "--output", "json", cwd=b.root))
    assert compared["a"]["trusted"] is True and compared["a"]["ref"] == "campaigns/main__rp__none"
