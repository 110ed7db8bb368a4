"""A run may leave files of up to the tree limit (a gigabyte): checks and the judge's excerpts read
them a chunk at a time, with the same verdicts as reading them whole."""

from __future__ import annotations

import io
import random
import tracemalloc
from pathlib import Path

import pytest

from clawstore.builder.tree_files import TreeSandboxFiles, TreeWorkspaceFiles
from clawstore.evaluate import evaluate_checks, evidence
from clawstore.evaluate.evidence import read_head, stream_contains
from clawstore.evaluate.judge_evidence import _artifact_excerpts
from clawstore.store import Store

from .helpers import artifact, decl

PIECES = ["a", "é", "€", "𝄞", "marker", "\n", "\x00", "\ud800".encode("utf-8", "surrogatepass").decode("latin-1")]


def _bytes(rng: random.Random) -> bytes:
    parts = []
    for _ in range(rng.randrange(0, 40)):
        if rng.random() < 0.2:  # invalid UTF-8: lone continuation bytes, truncated sequences
            parts.append(bytes(rng.choice([0x80, 0xBF, 0xC3, 0xE2, 0xF0, 0xFF]) for _ in range(rng.randrange(1, 3))))
        else:
            parts.append(rng.choice(PIECES).encode("utf-8", "surrogatepass"))
    return b"".join(parts)


def test_the_streamed_search_finds_what_decoding_the_whole_file_finds(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(7)
    for chunk in (1, 2, 3, 5, 64):
        monkeypatch.setattr(evidence, "READ_CHUNK", chunk)  # matches and characters cut by every boundary
        for _ in range(300):
            data = _bytes(rng)
            whole = data.decode("utf-8", errors="replace")
            if whole and rng.random() < 0.7:
                start = rng.randrange(len(whole))
                text = whole[start:start + rng.randrange(1, 9)]
            else:
                text = rng.choice(["marker", "é€", "\ufffd", "zz", "a\ufffda"])
            assert stream_contains(io.BytesIO(data), text) == (text in whole), (data, text, chunk)
            head, size = read_head(io.BytesIO(data), 4)
            assert (head, size) == (data[:4], len(data))


@pytest.fixture
def big_tree(tmp_path: Path) -> tuple[Store, str]:
    """A store holding a tree with one 256 MiB file (compressible: quick to store) whose marker sits at
    its very end, and a small one."""
    root = tmp_path / "sandbox"
    (root / "work").mkdir(parents=True)
    with open(root / "work" / "big.log", "wb") as fh:
        block = b"x" * (1 << 20)
        for _ in range(256):
            fh.write(block)
        fh.write(b"the marker at the end\n")
    (root / "work" / "small.txt").write_text("done\n")
    store = Store(tmp_path / "store")
    return store, store.put_tree(root)


def _peak(work: object) -> int:
    tracemalloc.start()
    try:
        work()  # type: ignore[operator]
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_check_on_a_file_of_hundreds_of_megabytes_holds_a_few_megabytes(big_tree: tuple[Store, str]) -> None:
    store, tree = big_tree
    sandbox = TreeSandboxFiles(store, tree)
    checks = [decl("found", "file_contains", path="/work/big.log", text="marker at the end"),
              decl("absent", "file_contains", path="/work/big.log", text="never written")]
    result: dict[str, object] = {}
    peak = _peak(lambda: result.update(evaluate_checks(checks, artifact(trace=[]), sandbox_files=sandbox)))
    outcomes = {c["check_id"]: c["outcome"] for c in result["checks"]}  # type: ignore[attr-defined]
    assert outcomes == {"found": "passed", "absent": "failed"}
    assert peak < 16 << 20, f"{peak >> 20} MiB held"  # reading it whole held 512 MiB (bytes, then str)


def test_the_judges_excerpt_of_a_huge_file_reads_its_head(big_tree: tuple[Store, str]) -> None:
    store, tree = big_tree
    workspace = TreeWorkspaceFiles(store, tree)
    art = artifact(trace=[])
    art["output_artifacts"] = [{"artifact_type": "report", "metadata": {"workspace_relative_path": "work/big.log"}}]
    excerpts: list[dict[str, object]] = []
    peak = _peak(lambda: excerpts.extend(_artifact_excerpts(art, None, workspace)))
    assert excerpts[0]["byte_size"] == (256 << 20) + len(b"the marker at the end\n")
    assert excerpts[0]["truncated"] is True and str(excerpts[0]["excerpt"]).startswith("xxx")
    assert peak < 16 << 20, f"{peak >> 20} MiB held"


def test_checks_on_the_empty_sandbox_tree_read_nothing_and_find_what_an_empty_directory_has(tmp_path: Path) -> None:
    # A run without tools keeps the empty tree: its checks and its judge know its entries (none) without reading it.
    from clawstore.store.trees import EMPTY_TREE_ID, empty_tree, put_tree

    store = Store(tmp_path / "store")
    (tmp_path / "empty").mkdir()
    assert EMPTY_TREE_ID == empty_tree(store) == put_tree(store, tmp_path / "empty")
    store.read_tree = None  # type: ignore[assignment,method-assign]  # (any read would fail now)
    files = TreeSandboxFiles(store, EMPTY_TREE_ID)
    assert not files.exists("/work/out.txt") and files.open("/work/out.txt") is None and not files.is_dir("/work")
    checks = [decl("there", "file_exists", path="/work/out.txt"),
              decl("says", "file_contains", path="/work/out.txt", text="done")]
    result = evaluate_checks(checks, artifact(trace=[]), sandbox_files=files)
    assert {c["check_id"]: c["outcome"] for c in result["checks"]} == {"there": "failed", "says": "failed"}
    store.close()
