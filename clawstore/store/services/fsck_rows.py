"""fsck's quick check of a record by rows of its pack's verified edges file: only ever a verdict of "fine".

A record whose facts (key, outputs) that file holds is checked by the file's tokens (a row of the pack, or another id):
each output and the input document of its key present in the index and not damaged, and every object an output names
(by its own pack's verified file) too. Nothing is made per record but a few integers; each id is looked up once per
file held (a byte a row and other id of that file remembers the answer). Anything else — no file, no facts, an id
the index lacks, an output no file covers — is not judged here: the caller checks it the long way (fsck_reach.Reach),
which names what is wrong. docs/store.md (fsck).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from clawstore.store.core.edgefile import ID, NO_FACT

if TYPE_CHECKING:
    from clawstore.store.core.index import Loc
    from clawstore.store.edges import PackEdges
    from clawstore.store.services.fsck_keys import IndexKeys

# A token's answer: not asked, there, not there; there and (as an output) whole or not: an output named by many
# records (an input document, a shared artifact: 600,000 outputs name 260,000 objects at 10,000 x 5) is judged once
_UNKNOWN, _THERE, _NOT, _WHOLE, _BROKEN = 0, 1, 2, 3, 4


class RowCheck:
    """Records checked by rows of verified edges files. `file(pack)`: a pack's verified file (None if none; the caller
    bounds how many it holds, and the answers go with each file: a byte a row and other id); `find`: the index's
    object look-up; `damaged`: digests of objects found damaged."""

    def __init__(self, file: Callable[[str], PackEdges | None], find: Callable[[bytes], Loc | None],
                 damaged: Collection[bytes], keys: IndexKeys | None = None):
        """`keys`: the index looked up in bulk: a file's ids all at once when the first of them is asked."""
        self._file, self._find, self._damaged, self._keys = file, find, damaged, keys

    def record(self, pack: str, digest: bytes, offset: int) -> tuple[bytes, bool] | None:
        """(its key's digest, whether that key's input document is there) if the record at `offset` of `pack` and
        everything its outputs name are there and intact; None when this cannot tell (check it the long way)."""
        edges = self._file(pack)
        if edges is None or digest in self._damaged:
            return None
        pos = edges.position(digest, offset) if edges.verified else None
        if pos is None or edges.fact_keys[pos] == NO_FACT:
            return None
        start, count = edges.starts[pos], edges.counts[pos]
        key, outs = edges.fact_keys[pos], edges.fact_outs[edges.fact_starts[pos]:edges.fact_starts[pos + 1]]
        if key >= count or max(outs, default=0) >= count:
            return None  # (a file that does not fit its own edges: read)
        tokens = edges.tokens
        answers = edges.answers
        for i in outs:  # (_output's verdict, its kept answers read in place: 600,000 outputs name 260,000 objects)
            token = tokens[start + i]
            state = answers[token] if answers is not None else _UNKNOWN
            if state == _WHOLE:
                continue
            if state == _THERE:
                assert answers is not None
                whole = self._whole(edges, token)
                answers[token] = _WHOLE if whole else _BROKEN
                if not whole:
                    return None
            elif state != _UNKNOWN or not self._output(edges, token):
                return None  # (not there, or broken)
            answers = edges.answers
        token = tokens[start + key]
        state = answers[token] if answers is not None else _UNKNOWN
        there = state != _NOT if state != _UNKNOWN else self._there(edges, token)
        return edges.known[token * ID:token * ID + ID], there

    def _output(self, edges: PackEdges, token: int) -> bool:
        """The output is there and so is everything it names (by the verified file of its own pack); the verdict kept
        in the answer of its token."""
        if not self._there(edges, token):
            return False
        answers = edges.answers
        assert answers is not None  # (made by _there)
        if answers[token] != _THERE:
            return answers[token] == _WHOLE
        whole = self._whole(edges, token)
        answers[token] = _WHOLE if whole else _BROKEN
        return whole

    def _whole(self, edges: PackEdges, token: int) -> bool:
        if token >= len(edges.offsets) or not edges.covers[token]:
            # In another pack, or a row the file does not cover (an action entry's blob has the id of its key's input
            # document, and the file names whichever row came last): its own pack's file says what it names.
            digest = edges.known[token * ID:token * ID + ID]
            loc: tuple[str, int] | None = None  # (where the index puts it, if `_answers` found it; else `find`)
            # (`item`: an int read, not a numpy scalar made and converted: 200,000 reads at 10,000 x 5)
            if edges.located is not None and self._keys is not None and (pack := edges.located[0].item(token)) >= 0:
                loc = (self._keys.packs[pack], edges.located[1].item(token))
            loc = loc or self._find(digest)
            holder = self._file(loc[0]) if loc is not None else None
            found = holder.position(digest, loc[1]) if holder is not None and loc is not None else None
            if holder is None or found is None:
                return False
            edges, token = holder, found
        start, end = edges.starts[token], edges.starts[token + 1]
        tokens, answers = edges.tokens, edges.answers
        if answers is None and start < end:  # (a file's answers made when one is first asked, as _there makes them)
            answers = edges.answers = self._answers(edges)
        for at in range(start, end):
            state = answers[tokens[at]]  # (_there's answer read in place: 760,000 asks at 10,000 x 5)
            if state == _NOT or state == _UNKNOWN and not self._there(edges, tokens[at]):
                return False
        return True

    def _there(self, edges: PackEdges, token: int) -> bool:
        """The object of this token is in the index and not damaged (each asked once while its file is held)."""
        answers = edges.answers
        if answers is None:
            answers = edges.answers = self._answers(edges)
        state = answers[token]
        if state == _UNKNOWN:
            digest = edges.known[token * ID:token * ID + ID]
            state = _THERE if digest not in self._damaged and self._find(digest) is not None else _NOT
            answers[token] = state
        return state != _NOT

    def _answers(self, edges: PackEdges) -> bytearray:
        """A file's answers, each of its ids looked up at once by the index's keys when it has them (`located` kept
        beside: where each is); those the keys leave unknown are asked one at a time."""
        answers = bytearray(len(edges.known) // ID)
        if self._keys is None or not answers:
            return answers
        from clawstore.store.core.lean_numpy import np  # (imported where fsck's keys are, numpy's ~40 ms paid there)
        from clawstore.store.services.fsck_keys import ASKED

        digests = np.frombuffer(edges.known, dtype="S32")
        packs, offsets, _ = self._keys.locate(digests)
        state = np.where(packs >= 0, _THERE, np.where(packs == ASKED, _UNKNOWN, _NOT)).astype(np.uint8)
        if self._damaged:
            state[np.isin(digests, np.array(list(self._damaged), dtype="S32")) & (packs != ASKED)] = _NOT
        answers[:] = state.tobytes()
        edges.located = (packs, offsets)
        return answers
