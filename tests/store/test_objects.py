"""Objects: ids, encoding on disk, dedup, verified reads, streaming in bounded memory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
from pathlib import Path

import blake3
import pytest

from clawstore.errors import CorruptObjectError, MissingObjectError, StoreError
from clawstore.store import BadObjectIdError, Store, oid_of
from clawstore.store.core.codec import BATCH_MAX, CHUNK, ZSTD_MAGIC
from clawstore.store.core.objects import ONE_SHOT_MAX
from tests.store.helpers import env, json_like
from tests.support.storefiles import blob_span, flip_in_frame, frame_bytes


def _unzstd(store: Store, oid: str) -> bytes:
    """Decode a stored frame with the zstd command line tool, as docs/store.md tells a human to."""
    path, offset, length = blob_span(store, oid)
    with open(path, "rb") as fh:
        fh.seek(offset)
        frame = fh.read(length)
    return subprocess.run(["zstd", "-d", "-c"], input=frame, capture_output=True, check=True).stdout


def test_id_is_blake3_of_uncompressed_bytes_and_file_is_a_zstd_frame(store: Store) -> None:
    data = json_like(50_000)
    oid = store.put_bytes(data)
    assert oid == "blake3:" + blake3.blake3(data).hexdigest()
    stored = frame_bytes(store, oid)
    assert stored[:4] == ZSTD_MAGIC
    assert len(stored) < len(data) / 2  # compressible data is compressed
    assert _unzstd(store, oid) == data
    assert store.get_bytes(oid) == data
    assert store.object_sizes(oid) == (len(data), len(stored))


def test_incompressible_data_is_stored_as_raw_blocks(store: Store) -> None:
    for size in (5_000, 3 * CHUNK + 17, ONE_SHOT_MAX + 17):  # one-shot paths and the streaming path
        data = os.urandom(size)
        oid = store.put_bytes(data)
        stored = frame_bytes(store, oid)
        assert stored[:4] == ZSTD_MAGIC and stored[4] == 0xC0  # our raw frame header
        # overhead: 14-byte header + 3 bytes per 128 KiB block, nothing else
        assert len(stored) - size == 14 + 3 * (size // (128 << 10) + 1)
        assert _unzstd(store, oid) == data
        assert store.get_bytes(oid) == data


def test_put_existing_object_is_a_no_op(store: Store) -> None:
    data = b"same bytes" * 100
    oid = store.put_bytes(data)
    path, offset, length = blob_span(store, oid)
    before = (path.stat().st_size, sorted(os.listdir(store.root / "index")))
    assert store.put_bytes(data) == oid
    assert (path.stat().st_size, sorted(os.listdir(store.root / "index"))) == before
    assert blob_span(store, oid) == (path, offset, length)
    assert os.listdir(store.tmp_dir) == []


def test_put_json_is_canonical(store: Store) -> None:
    first = store.put_json({"b": 1, "a": [1.5, "é"]})
    second = store.put_json({"a": [1.5, "é"], "b": 1})
    assert first == second
    assert store.get_bytes(first) == '{"a":[1.5,"é"],"b":1}'.encode()
    assert store.get_json(first) == {"a": [1.5, "é"], "b": 1}


def test_empty_object(store: Store) -> None:
    oid = store.put_bytes(b"")
    assert oid == oid_of(b"")
    assert store.get_bytes(oid) == b""
    assert store.object_sizes(oid)[0] == 0


def test_put_file_and_stream_large_objects(store: Store, tmp_path: Path) -> None:
    data = json_like(2 * CHUNK + 12345, seed=1) + os.urandom(ONE_SHOT_MAX)  # over the one-shot limit
    source = tmp_path / "big.jsonl"
    source.write_bytes(data)
    oid = store.put_file(source)
    assert oid == oid_of(data)
    assert store.put_stream(io.BytesIO(data)) == oid  # same id whichever way it came in
    with store.open_object(oid) as reader:
        assert reader.size == len(data)
        chunks = []
        while chunk := reader.read(100_000):
            chunks.append(chunk)
    assert b"".join(chunks) == data
    assert _unzstd(store, oid) == data


def test_stream_of_unknown_length_records_its_size(store: Store, tmp_path: Path) -> None:
    data = os.urandom(CHUNK + 5)  # raw mode: the size is patched in at the end
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end)))
    writer.start()
    with os.fdopen(read_end, "rb") as pipe:
        oid = store.put_stream(pipe)
    writer.join()
    assert store.object_sizes(oid)[0] == len(data)
    assert store.get_bytes(oid) == data


def test_reads_verify_and_name_the_object(store: Store) -> None:
    oid = store.put_bytes(os.urandom(10_000))  # raw frame: a flipped byte still decodes
    flip_in_frame(store, oid, 5000)
    with pytest.raises(CorruptObjectError, match=oid):
        store.get_bytes(oid)
    with pytest.raises(CorruptObjectError, match=oid), store.open_object(oid) as reader:
        reader.read()


def test_undecodable_frame_is_corruption(store: Store) -> None:
    oid = store.put_bytes(json_like(20_000))
    for position in range(-40, 0):  # the end of the frame overwritten
        flip_in_frame(store, oid, position)
    with pytest.raises(CorruptObjectError, match=oid):
        store.get_bytes(oid)


def test_missing_and_malformed_ids(store: Store) -> None:
    absent = oid_of(b"never stored")
    assert not store.has(absent)
    with pytest.raises(MissingObjectError, match=absent):
        store.get_bytes(absent)
    for bad in ("blake3:xyz", "sha256:" + "0" * 64, "blake3:" + "A" * 64, ""):
        with pytest.raises(BadObjectIdError):
            store.get_bytes(bad)


def test_missing_answers_has_for_many_ids_at_once(store: Store) -> None:
    held, absent = store.put_bytes(b"held"), oid_of(b"never stored")
    assert store.missing([]) == []
    with store.batch():
        pending = store.put_bytes(b"pending in this batch")  # not in the index yet, already there
        assert store.missing([held, absent, pending, absent]) == [absent, absent]
    assert store.missing([held, pending]) == []
    # Stored by another process after this one read the index: a miss looks at the index again.
    later = oid_of(b"from another process")
    subprocess.run([sys.executable, "-c", "import sys; from clawstore.store import Store; "
                    "Store(sys.argv[1]).put_bytes(b'from another process')", str(store.root)],
                   check=True, env=env(), timeout=60)
    assert store.missing([later, absent]) == [absent]
    with pytest.raises(BadObjectIdError):
        store.missing([held, "blake3:xyz"])


def test_iter_objects_lists_everything_once(store: Store) -> None:
    ids = {store.put_bytes(f"object {i}".encode()) for i in range(50)}
    assert set(store.iter_objects()) == ids


def test_open_store_without_create(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "nothing", create=False)
    Store(tmp_path / "s")
    Store(tmp_path / "s", create=False)  # now it exists


def test_threads_share_a_store(store: Store) -> None:
    payloads = [json_like(3000, seed=i % 7) for i in range(60)]
    results: list[str] = []
    lock = threading.Lock()

    def work(offset: int) -> None:
        for i in range(offset, len(payloads), 4):
            oid = store.put_bytes(payloads[i])
            assert store.get_bytes(oid) == payloads[i]
            with lock:
                results.append(oid)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(results) == {oid_of(p) for p in payloads}
    assert len(set(store.iter_objects())) == 7


_MEMORY_PROBE = r"""
import re, sys
from clawstore.store import Store
def status(key):  # this process's own memory (ru_maxrss would include the parent's, across exec)
    return int(re.search(key + r":\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
store = Store(sys.argv[1])
base = status("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak (VmHWM) to the current size
oid = store.put_file(sys.argv[2])
with store.open_object(oid) as reader:
    total = 0
    while chunk := reader.read(1 << 20):
        total += len(chunk)
print(oid, total, status("VmHWM") - base)
"""


def test_large_file_put_and_get_stream_in_bounded_memory(tmp_path: Path) -> None:
    """A 160 MiB object goes in and out while the process grows by far less than 64 MiB."""
    size = 160 << 20
    source = tmp_path / "big.bin"
    block = json_like(1 << 20, seed=3)
    with open(source, "wb") as out:
        for i in range(size // len(block)):
            out.write(block[: len(block) - i] + os.urandom(i))  # distinct, mostly compressible
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_PROBE, str(tmp_path / "store"), str(source)],
        capture_output=True, text=True, env=env(), timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    oid, total, growth = proc.stdout.split()
    assert int(total) == size
    assert int(growth) < 48 << 20, f"peak RSS grew by {int(growth) >> 20} MiB"
    assert Store(tmp_path / "store").object_sizes(oid)[0] == size


def test_get_many_bytes_reads_in_bulk_and_leaves_out_what_it_cannot_vouch_for(store: Store) -> None:
    small = [store.put_bytes(json_like(300 + i)) for i in range(200)]  # zstd frames, decoded in one batch
    raw = store.put_bytes(os.urandom(5_000))  # a frame of raw blocks
    large = store.put_bytes(json_like(BATCH_MAX + 1))  # streamed by get_bytes
    empty = store.put_bytes(b"")  # zstd's batch decoder must never see an empty frame
    flipped = store.put_bytes(os.urandom(10_000))
    flip_in_frame(store, flipped, 5_000)  # still decodes, no longer hashes to its id
    absent = oid_of(b"never stored")
    wanted = [*reversed(small), raw, large, empty, flipped, absent, "blake3:xyz", "", raw]
    got = store.get_many_bytes(wanted)
    assert got == {oid: store.get_bytes(oid) for oid in [*small, raw]}
    for oid in (large, empty):
        assert oid not in got and store.get_bytes(oid) is not None  # left to get_bytes, which reads them
    with pytest.raises(CorruptObjectError, match=flipped):
        store.get_bytes(flipped)  # left out: get_bytes names the damage
    with store.batch():
        pending = store.put_bytes(b"not committed yet")
        assert store.get_many_bytes([pending, raw]) == {raw: store.get_bytes(raw)}
    sizes = [len(got[oid]) for oid in small]
    within = store.get_many_bytes(small, budget=sum(sizes[:50]))
    assert 0 < len(within) <= 50 and sum(map(len, within.values())) <= sum(sizes[:50])
