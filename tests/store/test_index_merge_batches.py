"""A merge of big segments (write_merged) takes its parts' rows a batch at a time and sorts each round's together:
every key kept once, with the row the old one-row-at-a-time merge kept (an object's first part's, an action key's
newest entry, the later part's when as new), whatever the batches' bounds and the parts' pack slots."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from clawstore.store.core import index
from clawstore.store.core.index import ActionEntry, Segment, open_table, write_merged, write_segment

pytestmark = pytest.mark.timeout(60)  # (a merge that stops taking rows loops: fail it soon)


def _parts(tmp_path: Path, rng: random.Random) -> list[index.Part]:
    """Five parts (four tables, a segment held as dicts), each with its own packs in its own order, sharing many
    keys: small ones (a first byte of 0-3) so that shared keys fall at the batches' bounds."""
    packs = [rng.randbytes(16).hex() for _ in range(9)]
    keys = [bytes([rng.randrange(4)]) + rng.randbytes(31) for _ in range(300)]
    parts: list[index.Part] = []
    for i in range(5):
        segment = Segment(index.new_segment_name())
        mine = rng.sample(packs, 4)
        for key in rng.sample(keys, rng.randrange(40, 200)):
            segment.objects[key] = (rng.choice(mine), rng.randrange(1 << 40), rng.randrange(1, 1 << 20))
        for key in rng.sample(keys, rng.randrange(40, 200)):
            segment.actions[key] = ActionEntry(rng.choice([None, rng.randbytes(32)]), rng.randrange(5),
                                               rng.choice(mine), rng.randrange(1 << 40))
        write_segment(tmp_path, tmp_path, segment)
        parts.append(segment if i == 2 else open_table(tmp_path, segment.name))
    return parts


def _expected(parts: list[index.Part]) -> tuple[dict[bytes, index.Loc], dict[bytes, ActionEntry]]:
    objects: dict[bytes, index.Loc] = {}
    actions: dict[bytes, ActionEntry] = {}
    for part in parts:
        for digest, loc in part.iter_objects():
            objects.setdefault(digest, loc)  # the first part's
        for key, entry in part.iter_actions():
            if key not in actions or entry.time_ns >= actions[key].time_ns:  # the newest; the later part's if as new
                actions[key] = entry
    return objects, actions


@pytest.mark.parametrize("batch_rows", [1, 2, 7, 64, 100_000])
def test_a_merge_keeps_each_key_once_with_the_row_a_row_by_row_merge_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    monkeypatch.setattr(index, "_STREAM_ROWS", batch_rows)
    for seed in range(4):
        where = tmp_path / str(seed)
        where.mkdir()
        parts = _parts(where, random.Random(seed))
        merged = write_merged(where, where, index.new_segment_name(), [], parts)
        objects, actions = _expected(parts)
        assert list(merged.iter_objects()) == sorted(objects.items())  # sorted, each once, its pack right
        assert list(merged.iter_actions()) == sorted(actions.items())
        merged.check()  # (sorted, every slot one it lists)
        assert len(merged.packs) == len(set(merged.packs))


@pytest.mark.parametrize("first", [True, False])
def test_a_part_naming_a_pack_slot_it_lacks_is_refused(tmp_path: Path, first: bool) -> None:
    parts = _parts(tmp_path, random.Random(9))
    table = parts[1]
    assert isinstance(table, index.Table)
    table.packs = table.packs[:1]  # (its rows name slots 1-3 too; first: its slots are the merge's as they are)
    with pytest.raises(index.BadSegmentError, match="pack slot"):
        write_merged(tmp_path, tmp_path, index.new_segment_name(), [], [table, parts[0]] if first else
                     [parts[0], table])
