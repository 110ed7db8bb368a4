"""What a build asks before every paid node it runs one by one (builder/claimed.py `_in_batch`): the keys the store's
pending provider batches stand for. The refs are listed each time, so a batch another process submits meanwhile is
seen; the documents are read again only when a batch's ref moved (docs/scale/building.md, session 61)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clawstore.builder import batch_doc
from clawstore.store import Store
from clawstore.store.core.ids import oid_hex


def _batch(store: Store, name: str, *keys: str) -> None:
    doc = batch_doc.BatchDoc(name=name, kind="judge", base_url="http://127.0.0.1:9/v1", api_key_env=None, model="m",
                             campaign_id="c", build_id="b", input_file_id="file-1", keys=[oid_hex(k) for k in keys],
                             submitted_at=1.0)
    batch_doc.write_new(store, doc)


def test_the_covered_keys_follow_the_refs_and_their_documents_are_read_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "store")
    a, b, c = (store.put_json({"node": n}) for n in "abc")
    assert batch_doc.covered_now(store) == {}
    _batch(store, "one", a, b)
    reads: list[str] = []
    real = Store.get_json

    def counted(self: Store, oid: str) -> object:
        reads.append(oid)
        return real(self, oid)

    monkeypatch.setattr(Store, "get_json", counted)
    assert {k: d.name for k, d in batch_doc.covered_now(store).items()} == {oid_hex(a): "one", oid_hex(b): "one"}
    assert len(reads) == 1
    for _ in range(3):  # nothing moved: nothing read
        assert set(batch_doc.covered_now(store)) == {oid_hex(a), oid_hex(b)}
    assert len(reads) == 1
    batch_doc.mark(store, "one", done={oid_hex(a)})  # its ref moves
    assert set(batch_doc.covered_now(store)) == {oid_hex(b)}
    # Another process submits a batch meanwhile: seen at the next ask.
    code = ("import sys; from clawstore.store import Store; sys.path.insert(0, sys.argv[2]); "
            "from test_batches_covered_now import _batch; s = Store(sys.argv[1]); "
            "_batch(s, 'two', s.put_json({'node': 'c'}))")
    subprocess.run([sys.executable, "-c", code, str(store.root), str(Path(__file__).parent)], check=True)
    assert {k: d.name for k, d in batch_doc.covered_now(store).items()} == {oid_hex(b): "one", oid_hex(c): "two"}
    batch_doc.mark(store, "one", done={oid_hex(b)})  # nothing left: its ref goes
    batch_doc.mark(store, "two", released={oid_hex(c)})
    assert batch_doc.covered_now(store) == {}
    assert batch_doc.pending(store) == []
