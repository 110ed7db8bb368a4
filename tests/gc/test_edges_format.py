"""The edges file's format (CLAWEDG3, store/core/edgefile.py): small (rows of the pack's table and a table of the other
packs' ids, compressed), never trusted when it does not fit its pack's table even with its checksum whole, a file of
the previous format ignored and written anew."""

from __future__ import annotations

import random
import shutil
import struct
import sys
import tracemalloc
from array import array
from pathlib import Path

import blake3
import pytest

from clawstore.store import Store, edges
from clawstore.store.core import edgefile
from clawstore.store.core.edgefile import HEAD, ID, MAGIC, PackEdges
from clawstore.store.core.ids import PREFIX
from clawstore.store.core.packfile import iter_pack_ids, pack_path
from clawstore.store.reach import Reach
from clawstore.store.services.fsck import fsck
from tests.gc.helpers import store_once
from tests.gc.test_edges_sealed import Sealed, _sealed_store, sealed  # noqa: F401  (a fixture)
from tests.gc.test_reach_many import _reference_walk
from tests.support.fresh import measured_in_fresh_process


def _chain(store: Store) -> str:
    """A chain of 300 objects in one pack, each naming the one before, every 10th also an id no pack holds: the last."""
    last = store.put_bytes(b"the first leaf")
    for index in range(300):
        doc = {"i": index, "previous": last}
        last = store.put_json(doc if index % 10 else {**doc, "elsewhere": PREFIX + f"{index:064x}"})
    store.set_ref("pins/chain", last)
    store.runtime.close_writer()
    return last


@pytest.fixture
def one_pack(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Store, str, str]:
    """(a copy of the chain's store, its one pack, the chain's last object): the store made once in the run (one
    commit an object, as before: ~0.3 s of CPU and 0.7-3.7 s of fsyncs a test), the tests rewrite their copy's files."""
    made, last = store_once(tmp_path_factory, "edges-format-chain", _chain)
    shutil.copytree(made, tmp_path / "store", symlinks=True)
    store = Store(tmp_path / "store")
    (pack,) = iter_pack_ids(store.runtime.packs_dir)
    return store, pack, last


def _load(store: Store, pack: str) -> PackEdges | None:
    return edges.load(store.root, store.runtime.packs_dir, pack)


def test_a_file_takes_a_few_bytes_an_id_named_inside_its_pack(one_pack: tuple[Store, str, str]) -> None:
    store, pack, _ = one_pack
    found = _load(store, pack)
    assert found is not None and len(found.covered()) == 301 and len(found.tokens) == 330
    size = edges.edges_path(store.root, pack).stat().st_size
    # 30 ids of no pack: 32 bytes each; the 300 named inside the pack and the 301 objects: 4-byte rows, compressed.
    assert size <= HEAD.size + 30 * ID + 2 * (330 + 301) + ID
    old_layout = (ID + 12) * 301 + ID * 330  # (CLAWEDG2: ids, offsets and starts of the objects, 32 bytes an edge)
    assert size < old_layout / 5


def _previous_format(found: PackEdges, size: int, digest: bytes) -> bytes:
    """The file CLAWEDG2 wrote for the same pack (32 bytes an object and an id named): whole, its checksum right."""
    covered = found.covered()
    named = [found.children(digest_, offset) or [] for digest_, offset in covered]
    starts = array("I", [0])
    for children in named:
        starts.append(starts[-1] + len(children))
    body = (struct.pack("<8s16sQ32sQQQQ", b"CLAWEDG2", bytes.fromhex(found.pack), size, digest, len(covered),
                        starts[-1], 0, 0)
            + b"".join(d for d, _ in covered) + array("Q", [o for _, o in covered]).tobytes() + starts.tobytes()
            + b"".join(b"".join(children) for children in named))
    return body + blake3.blake3(body).digest()


def test_a_file_of_the_previous_format_is_ignored_and_the_walk_writes_it_anew(
        sealed: Sealed, tmp_path: Path) -> None:  # noqa: F811
    store, root = _sealed_store(sealed, tmp_path)  # (a 1,200-object graph, each pack's file as its writer wrote it)
    reached = _reference_walk(store, [root])[0]
    packs = list(iter_pack_ids(store.runtime.packs_dir))
    for pack in packs:
        found = _load(store, pack)
        assert found is not None
        path = pack_path(store.runtime.packs_dir, pack)
        edges.edges_path(store.root, pack).write_bytes(
            _previous_format(found, path.stat().st_size, edges.pack_digest(path)))
        assert _load(store, pack) is None
    walk = Reach(store, cached=True)
    walk.mark([root])
    assert walk.marked == reached
    for pack in packs:
        assert edges.edges_path(store.root, pack).read_bytes().startswith(MAGIC) and _load(store, pack) is not None
    assert fsck(store).problems == []


def _rewritten(store: Store, pack: str, change: str) -> None:
    """The pack's file made to lie in one way, its checksum made whole again (only the checksum is not enough)."""
    found = _load(store, pack)
    assert found is not None
    tokens, counts, known, offsets = array("I", found.tokens), array("I", found.counts), found.known, found.offsets
    covers = array("B", found.covers)
    if change == "a row past the table":
        tokens[0] = len(found.offsets) + len(found.others) // ID
    elif change == "the last id named past the table":
        tokens[-1] = len(found.offsets) + len(found.others) // ID
    elif change == "more ids than named":
        counts[0] += 1
    elif change == "a cover neither 0 nor 1":
        covers[len(covers) // 2] = 2
    elif change == "another table":
        rows = len(offsets)
        known, counts, covers = known[:rows * ID] + bytes(ID) + known[rows * ID:], counts + array("I", [0]), \
            covers + array("B", [0])
        offsets = offsets + array("Q", [offsets[-1] + 1])
        tokens = array("I", [token + (token >= rows) for token in tokens])
    lying = PackEdges(pack, False, offsets, known, covers, counts, tokens, array("H"), array("H"), array("H"))
    path = pack_path(store.runtime.packs_dir, pack)
    parts = lying.encode(path.stat().st_size, edges.pack_digest(path))
    edges.edges_path(store.root, pack).write_bytes(b"".join(parts))


@pytest.mark.parametrize("change", ["a row past the table", "more ids than named", "a cover neither 0 nor 1",
                                    "another table"])
def test_a_file_whose_checksum_holds_but_does_not_fit_its_pack_is_never_trusted(
        one_pack: tuple[Store, str, str], change: str) -> None:
    store, pack, last = one_pack
    _rewritten(store, pack, change)
    assert _load(store, pack) is None
    walk = Reach(store, cached=True)
    walk.mark([last])
    assert walk.marked == _reference_walk(store, [last])[0] and len(walk.marked) == 301
    assert _load(store, pack) is not None  # read whole and written anew


@pytest.mark.parametrize("numpy_loaded", [True, False])
def test_an_id_named_past_the_table_is_refused_with_numpy_loaded_or_not(
        one_pack: tuple[Store, str, str], monkeypatch: pytest.MonkeyPatch, numpy_loaded: bool) -> None:
    """The file's largest token is found by numpy once the process has it (gc's walk), by `max` otherwise: both
    refuse a token past the ids, wherever it is."""
    store, pack, _ = one_pack
    if numpy_loaded:
        from clawstore.store.core.lean_numpy import np  # noqa: F401
    else:
        monkeypatch.delitem(sys.modules, "numpy", raising=False)  # (put back when the test ends)
    found = _load(store, pack)
    assert found is not None and max(found.tokens) == edgefile._largest(found.tokens)
    _rewritten(store, pack, "the last id named past the table")
    assert _load(store, pack) is None


def test_a_file_loads_the_same_by_numpy_as_without_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the process has numpy (gc's walk by arrays), the pack's table is taken by one structured view and the
    rows' starts by a cumsum (packfile._table_columns_numpy, edgefile._starts): the same arrays as without it, a
    verified file's facts' starts too."""
    store = Store(tmp_path / "store")
    records = []
    for index in range(40):  # (records, their outputs and action entries' rows in one pack)
        key = store.put_json({"node": index})
        records.append(store.put_action(key, {"kind": "run", "key": key, "input": key,
                                              "outputs": {"artifact": store.put_bytes(f"a{index}".encode())}}))
    store.set_ref("pins/h", store.put_json({"nodes": [{"kind": "run", "record": record} for record in records]}))
    store.runtime.close_writer()
    (pack,) = iter_pack_ids(store.runtime.packs_dir)
    assert fsck(store).problems == []  # (its file verified: the records' facts)
    from clawstore.store.core import packfile
    from clawstore.store.core.lean_numpy import np  # noqa: F401

    by_numpy: list[int] = []
    taken = packfile._table_columns_numpy

    def counted(numpy: object, table: bytes) -> object:
        by_numpy.append(len(table))
        return taken(numpy, table)  # type: ignore[arg-type]

    monkeypatch.setattr(packfile, "_table_columns_numpy", counted)
    with_numpy = _load(store, pack)
    monkeypatch.setitem(sys.modules, "numpy", None)  # (as if never imported: `sys.modules.get` answers None)
    without = _load(store, pack)
    assert with_numpy is not None and without is not None and with_numpy.verified and len(by_numpy) == 1
    for name in ("offsets", "known", "covers", "counts", "tokens", "starts", "fact_keys", "fact_starts", "fact_outs"):
        mine, theirs = getattr(with_numpy, name), getattr(without, name)
        assert type(mine) is type(theirs) and mine == theirs, name
        assert not isinstance(mine, array) or mine.typecode == theirs.typecode, name
    assert len(with_numpy.offsets) == 161 and with_numpy.starts[-1] == len(with_numpy.tokens)
    assert len(with_numpy.fact_outs) == 40 and with_numpy.fact_starts[-1] == 40


def test_a_frame_that_would_decode_larger_than_its_header_says_is_not_decoded(
        one_pack: tuple[Store, str, str]) -> None:
    store, pack, _ = one_pack
    target = edges.edges_path(store.root, pack)
    data = bytearray(target.read_bytes()[:-ID])
    fields = list(HEAD.unpack_from(data))
    fields[6] -= 1  # one edge fewer: the frame holds 4 bytes more than the header allows
    data[:HEAD.size] = HEAD.pack(*fields)
    target.write_bytes(bytes(data) + blake3.blake3(data).digest())
    assert _load(store, pack) is None


def _log_naming_others(objects: int, named: int) -> tuple[edgefile.EdgeLog, edgefile.Table]:
    """A pack of `objects` rows, each naming `named` ids of other packs, every third one named twice."""
    rng = random.Random(objects * named)
    log, ids = edgefile.EdgeLog(), []
    for row in range(objects):
        ids.append(rng.randbytes(ID))
        children = [rng.randbytes(ID) for _ in range(named)]
        log.add(ids[-1], 100 + 10 * row, children + children[::3])
    return log, edgefile.Table(b"".join(ids), array("Q", [100 + 10 * row for row in range(objects)]))


def test_past_its_dedup_bound_a_file_names_the_same_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    log, table = _log_naming_others(40, 30)
    whole = log.against("ab" * 8, table, False)
    monkeypatch.setattr(edgefile, "_DEDUP", 7)
    bounded = log.against("ab" * 8, table, False)
    assert whole is not None and bounded is not None
    assert len(whole.others) // ID == 40 * 30 < len(bounded.others) // ID  # (past 7 others, repeats written again)
    for row in range(40):
        digest, offset = table.ids[row * ID:(row + 1) * ID], table.offsets[row]
        assert bounded.children(digest, offset) == whole.children(digest, offset) == \
            [log.edges[at * ID:(at + 1) * ID] for at in range(log.starts[row], log.starts[row + 1])]
    data = b"".join(bounded.encode(1 << 20, bytes(32)))  # and as a file read back
    read = edgefile.decode("ab" * 8, data, 1 << 20, table)
    assert read is not None and all(read.children(table.ids[r * ID:(r + 1) * ID], table.offsets[r])
                                    == whole.children(table.ids[r * ID:(r + 1) * ID], table.offsets[r])
                                    for r in range(40))


def file_peak_alone() -> tuple[int, int]:
    """(tokens, the peak bytes traced above the start) of the edges file of a pack of 100 objects naming 2,000 ids of
    other packs each. Called in a new interpreter (measured_in_fresh_process): in a test worker, what earlier tests
    left (their threads, their garbage's finalizers) would be counted too (3.7 MiB more, once, in a CI worker)."""
    log, table = _log_naming_others(100, 2000)  # 200,000 ids of other packs, 66,700 of them named twice
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        found = log.against("ab" * 8, table, False)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert found is not None
    return len(found.tokens), peak


def test_a_pack_naming_many_other_ids_is_made_a_file_without_an_object_for_each() -> None:
    # The head's parts, sealed as a build ends, name every record of the campaign (~460,000 ids at 10,000 x 5): a dict
    # of them all took 120 MB (~260 bytes an id). Past the bound, what is held is the file's bytes (36 an id), not
    # also a copy of them (a bytearray turned into bytes: 25.2 MiB here, 20.6 MiB without).
    tokens, peak = measured_in_fresh_process(file_peak_alone)
    assert tokens == 266_700
    assert peak < 266_700 * 40 + (12 << 20), f"{peak / 266_700:.0f} bytes an id named"  # (the bounded dict: ~7 MB)


def _reference_tokens(log: edgefile.EdgeLog, table: edgefile.Table, dedup: int) -> tuple[list[int], bytes]:
    """What a file names, by its rule with whole ids: an id is the last row of the pack holding it, else rows + its
    index among the others in order of mention, the first `dedup` distinct others named once."""
    rows = len(table)
    row_of = {table.ids[row * ID:(row + 1) * ID]: row for row in range(rows)}
    others: dict[bytes, int] = {}
    known, tokens = bytearray(table.ids), []
    for at in range(len(log.edges) // ID):
        digest = bytes(log.edges[at * ID:(at + 1) * ID])
        token = row_of.get(digest)
        if token is None:
            token = others.get(digest)
            if token is None:
                token = (len(known) - rows * ID) // ID
                known += digest
                if len(others) < dedup:
                    others[digest] = token
            token += rows
        tokens.append(token)
    return tokens, bytes(known)


@pytest.mark.parametrize(("dedup", "step"), [(3, 16384), (65536, 16384), (65536, 7), (20, 7)])
def test_ids_sharing_their_first_bytes_are_told_apart_and_the_file_is_the_one_whole_ids_make(
        monkeypatch: pytest.MonkeyPatch, dedup: int, step: int) -> None:
    """The seal's dicts are keyed by an id's first 60 bits, the whole id compared on a hit: ids made to share their
    first 8 bytes (rows of the pack with each other and with others; others with each other; an id in the pack twice)
    are each named as themselves, and the file is byte for byte the one a dict of whole ids makes (`step`: ids named
    taken a few at a time, so an other met in an earlier batch is compared where the file holds it)."""
    monkeypatch.setattr(edgefile, "_DEDUP", dedup)
    monkeypatch.setattr(edgefile, "_STEP", step)
    rng = random.Random(11)
    stem = [rng.randbytes(8) for _ in range(4)]
    ids = [rng.choice(stem) + rng.randbytes(24) if row % 3 else rng.randbytes(ID) for row in range(60)]
    ids[40] = ids[7]  # (the same blob twice in one pack: its last row names it)
    outside = [rng.choice(stem) + rng.randbytes(24) for _ in range(30)] + [rng.randbytes(ID) for _ in range(30)]
    outside += [ids[row][:8] + rng.randbytes(24) for row in range(0, 60, 5)]  # (a row's first bytes, not the row)
    log = edgefile.EdgeLog()
    for row, digest in enumerate(ids):
        children = rng.sample(ids, 5) + rng.sample(outside, 8)
        log.add(digest, 100 + 10 * row, children + children[::2])
    table = edgefile.Table(b"".join(ids), array("Q", [100 + 10 * row for row in range(60)]))
    found = log.against("cd" * 8, table, False)
    assert found is not None
    tokens, known = _reference_tokens(log, table, dedup)
    assert list(found.tokens) == tokens and found.known == known
    expected = PackEdges("cd" * 8, False, table.offsets, known, found.covers, found.counts, array("I", tokens),
                         array("H"), array("H"), array("H"))
    assert b"".join(found.encode(1 << 20, bytes(32))) == b"".join(expected.encode(1 << 20, bytes(32)))
    for row in range(60):
        named = [log.edges[at * ID:(at + 1) * ID] for at in range(log.starts[row], log.starts[row + 1])]
        assert found.children(ids[row], 100 + 10 * row) == named
