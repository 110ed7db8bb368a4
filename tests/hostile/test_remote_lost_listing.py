"""A remote whose listings do not cover what its ref reaches: a pack's listing (`.ids`) removed or lost while the pack
and the ref stay. `claw pull` fetched the packs it could list and moved the ref to a head most of whose records it
never got (fsck: dozens of missing records; a build would have found them missing). Now the ref stays where it was
and the report says why, the tracking ref too, so a pull once the remote is whole moves it. Nor is an action-cache
entry added whose record names outputs that were in the unlisted pack (fsck named them): a later pull adds it."""

from __future__ import annotations

import shutil
from pathlib import Path

from clawstore.store import Store
from tests.hostile.conftest import RUNS, User
from tests.support.workspace import standard

REF = "campaigns/main__rp__none"


def test_a_head_the_remote_cannot_give_whole_is_not_pulled(alice: User, tmp_path: Path) -> None:
    a = standard(tmp_path / "alice")
    alice.here("build", *RUNS, cwd=a.root)
    remote = tmp_path / "share" / "remote"
    alice.here("push", str(remote), cwd=a.root)
    first = set((remote / "packs").glob("*.pack"))  # (beta's runs, which the next head still reaches)
    a.edit("cases/alpha/test.yaml", lambda d: d["input"]["messages"][1].update(content="What is 3 + 3?"))
    alice.here("build", *RUNS, cwd=a.root)
    alice.here("push", str(remote), cwd=a.root)
    pack = max(first, key=lambda p: p.stat().st_size)
    listing = pack.with_suffix(".ids")
    shutil.move(listing, tmp_path / "kept.ids")

    b = standard(tmp_path / "bob")
    out = alice.ok("pull", str(remote), cwd=b.root)
    assert "0 ref(s) moved" in out and f"{REF}: remote head " in out and "no pack the remote lists" in out, out
    assert REF not in alice.here("refs", cwd=b.root)  # (nor its tracking ref)
    alice.here("fsck", cwd=b.root)  # (no entry was added whose outputs were in the unlisted pack: left for later)

    shutil.move(tmp_path / "kept.ids", listing)
    assert "1 ref(s) moved" in alice.ok("pull", str(remote), cwd=b.root)
    alice.here("fsck", cwd=b.root)
    # (the entries left out come with the pull that has their outputs)
    assert dict(Store(b.root / "store").iter_actions()) == dict(Store(a.root / "store").iter_actions())
