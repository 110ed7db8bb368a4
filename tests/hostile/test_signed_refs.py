"""Signed remote refs: whoever can write to the bucket cannot move a team's campaign head.

A real remote directory written to as an attacker with write access would (a ref file rewritten, a
statement forged or copied, another user's bundles dropped in), and real `claw pull` processes of a
user who trusts only Alice. Each refused pull must leave the puller's store unchanged.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from clawstore.remote.refsign import KIND, statement_path
from clawstore.testing.standin import StandIn
from clawstore.trust import keys, signature
from clawstore.values.canonical import canonical_json
from tests.faults.test_hostile_archives import snapshot
from tests.hostile.conftest import RUNS, User
from tests.support.workspace import Workspace, standard

HEAD = "campaigns/main__rp__none"


def _store_state(ws: Workspace) -> dict[str, bytes | str]:
    """The store's files, but for the copies of the remote's bundle listings pull caches (derived)."""
    return {name: data for name, data in snapshot(ws.root / "store").items() if not name.startswith("remotes/")}


def _pushed_here(alice: User, tmp_path: Path) -> tuple[Workspace, Path]:
    """Alice's build and push made in this test: her store then tracks this remote, and she can push to it again
    (the `pushed` fixture's copy tracks the remote where it was made)."""
    a = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=a.root)
    remote = tmp_path / "remote"
    alice.here("push", str(remote), cwd=a.root)
    return a, remote


def _puller(alice: User, bob: User, remote: Path, tmp_path: Path) -> Workspace:
    """Bob, who trusts Alice and has pulled her campaign once."""
    bob.here("trust", "add", alice.key(tmp_path), cwd=tmp_path)
    b = standard(tmp_path / "bob")
    bob.here("pull", str(remote), cwd=b.root)
    return b


def _statement(private: Ed25519PrivateKey, name: str, value: str) -> bytes:
    from clawstore.trust.signature import MESSAGE_PREFIX

    doc = {"kind": KIND, "name": name, "value": value}
    signature = private.sign(MESSAGE_PREFIX + canonical_json(doc))
    return canonical_json({**doc, "signature": {"key": keys.public_text(private.public_key()),
                                                "ed25519": base64.b64encode(signature).decode()}})


def test_push_signs_each_ref_it_moves(alice: User, pushed: tuple[Workspace, Path], tmp_path: Path) -> None:
    _, remote = pushed
    value = (remote / "refs" / HEAD).read_text().strip()
    statement = (remote / statement_path(HEAD, value)).read_text()
    assert alice.key(tmp_path) in statement and value in statement


def test_a_rewritten_ref_is_refused_before_anything_is_fetched(alice: User, bob: User, tmp_path: Path) -> None:
    a, remote = _pushed_here(alice, tmp_path)
    b = _puller(alice, bob, remote, tmp_path)
    mallory = Ed25519PrivateKey.generate()
    ref = remote / "refs" / HEAD
    honest = ref.read_text().strip()
    # a head of Alice's the attacker wants back: her previous build, which she pushed and moved on from
    a.case("alpha", "What is 3 + 3?")
    alice.here("build", *RUNS, cwd=a.root)
    alice.here("push", str(remote), cwd=a.root)
    newest = ref.read_text().strip()
    assert newest != honest
    bob.here("pull", str(remote), cwd=b.root)
    forged = "blake3:" + "ab" * 32

    attacks = {
        "no statement": (forged, None, "not signed"),
        "statement by the attacker's key": (
            forged, _statement(mallory, HEAD, forged),
            f"signed by {keys.public_text(mallory.public_key())}, a key you do not trust"),
        "Alice's statement copied to another value": (
            forged, (remote / statement_path(HEAD, newest)).read_bytes(), "about another ref or value"),
        "a statement about another ref": (
            forged, _statement(mallory, "campaigns/other", forged), "about another ref or value"),
    }
    for what, (value, statement, expected) in attacks.items():
        before = _store_state(b)
        ref.write_text(value + "\n")
        if statement is not None:
            (remote / statement_path(HEAD, value)).parent.mkdir(parents=True, exist_ok=True)
            (remote / statement_path(HEAD, value)).write_bytes(statement)
        refused = bob.claw("pull", str(remote), cwd=b.root)
        assert refused.returncode == 2, (what, refused.stderr)
        assert refused.stderr.count("\n") == 1 and f"remote ref {HEAD}" in refused.stderr, (what, refused.stderr)
        assert expected in refused.stderr, (what, refused.stderr)
        assert _store_state(b) == before, what
        (remote / statement_path(HEAD, value)).unlink(missing_ok=True)

    # what a signature cannot stop (docs/trust.md): putting back an older value Alice once signed
    ref.write_text(honest + "\n")
    assert bob.claw("pull", str(remote), cwd=b.root).returncode == 0


def test_an_unsigned_ref_pulled_untrusted_is_reported_as_not_signed(alice: User, bob: User,
                                                                     pushed: tuple[Workspace, Path],
                                                                     tmp_path: Path) -> None:
    _, remote = pushed
    b = _puller(alice, bob, remote, tmp_path)
    shutil.copy(remote / "refs" / HEAD, remote / "refs" / "campaigns" / "planted")  # no statement signs it
    pulled = bob.ok("pull", str(remote), "--untrusted", cwd=b.root)
    assert "kept apart (not signed):" in pulled and "signed by" not in pulled, pulled


def test_a_pull_refused_for_one_pack_imports_none(alice: User, bob: User, tmp_path: Path,
                                                    standin: StandIn) -> None:
    a, remote = _pushed_here(alice, tmp_path)
    b = _puller(alice, bob, remote, tmp_path)
    # Alice pushes new results, and someone Bob does not trust drops packs of their own in the bucket
    a.case("beta", "Name a fruit.")
    alice.here("build", *RUNS, cwd=a.root)
    alice.here("push", str(remote), cwd=a.root)
    mallory = User(tmp_path / "mallory-config", standin)
    m = standard(tmp_path / "mallory")
    m.case("alpha", "What is 5 + 5?")
    mallory.here("build", *RUNS, cwd=m.root)
    elsewhere = tmp_path / "mallory-remote"
    mallory.here("push", str(elsewhere), cwd=m.root)
    for pack in (elsewhere / "packs").iterdir():
        shutil.copy(pack, remote / "packs" / pack.name)

    before = _store_state(b)
    refused = bob.claw("pull", str(remote), cwd=b.root)
    assert refused.returncode == 2 and "remote pack" in refused.stderr, refused.stderr
    assert f"signed by {mallory.key(tmp_path)}" in refused.stderr and refused.stderr.count("\n") == 1
    assert _store_state(b) == before  # not even Alice's new pack, fetched in the same round


def test_a_manifest_signed_and_encoded_once_verifies_and_no_field_can_change() -> None:
    """signature.signed_json (remote listings): one encoding serves signing and writing; a reader
    parses it and checks the signature over the canonical form, so any change is caught."""
    manifest = {"format": 2, "objects": "ab" * 64, "actions": {"blake3:" + "1" * 64: "blake3:" + "2" * 64}}
    parsed = json.loads(signature.signed_json(manifest))
    assert signature.signer(parsed) == keys.public_text(keys.signing_key().public_key())
    assert {k: v for k, v in parsed.items() if k != signature.FIELD} == manifest
    for field, value in (("objects", "ab" * 63 + "cd" * 1), ("format", 3), ("actions", {})):
        with pytest.raises(signature.BadSignature, match="does not verify"):
            signature.signer({**parsed, field: value})
    with pytest.raises(ValueError):
        signature.signed_json(parsed)  # signed already
