"""fsck_beside.FromTheEnd, the scheduling both of fsck's helpers share: `before(i)` gives this side the helper's
answer of items[i] or None (then this side does it), never another item's answer — whatever the helper writes
(an answer with a newline in it, a line cut off by its death)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clawstore.store.services import fsck_beside
from clawstore.store.services.fsck_beside import FromTheEnd
from tests.support.fresh import in_fresh_process

ITEMS = [f"{number:02d}" for number in range(8)]


def _answers(work: object) -> dict[str, bytes | None]:
    """Each item's answer as this side takes them from the front (the helper from the end, forked)."""
    helper = FromTheEnd(ITEMS, work, fork=True)  # type: ignore[arg-type]
    try:
        assert helper._pid is not None, "forked"
        return {item: helper.before(number) for number, item in enumerate(ITEMS)}
    finally:
        helper.close()


def test_an_answer_with_a_newline_in_it_is_not_taken_for_the_next_items(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_split_answer", tmp_path)  # (it forks only where no other thread runs)


def _split_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def work(item: str) -> bytes:
        return b"half\nhalf" if item == "07" else b"done " + item.encode()  # (the first item the helper is sent)

    found = _answers(work)  # (07's own first line is its answer, which fsck's `_helped` finds garbled)
    assert found["07"] in (None, b"half") and found["00"] is None, found
    for item in ITEMS[:7]:  # (on the old code: "half" taken for 06 and 06's answer for 05, or an IndexError)
        assert found[item] in (None, b"done " + item.encode()), found


def test_a_line_cut_off_by_the_helpers_death_is_done_here(tmp_path: Path) -> None:
    in_fresh_process(__name__, "_cut_off", tmp_path)


def _cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serve = fsck_beside._serve

    def dying(work: object, requests: int, answers: int) -> None:
        def cut(item: str) -> bytes:
            if item == "06":  # (its second item: half an answer written, then killed)
                os.write(answers, b"06 done")
                os._exit(9)
            return b"done " + item.encode()

        serve(cut, requests, answers)

    monkeypatch.setattr(fsck_beside, "_serve", dying)
    found = _answers(None)
    assert found["07"] == b"done 07" and found["06"] is None
    assert all(found[item] is None for item in ITEMS[:6]), found
