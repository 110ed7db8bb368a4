"""Execute a node only while holding its work claim; adopt what another build stored meanwhile.

Two builds on one store plan the same nodes. Whichever claims a node first executes it; the other
sets the node aside (`Later`), runs what it can, and comes back: by then the record is in the
action cache and is adopted as reused, or the claim expired (its holder died) and it executes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clawstore.builder import batch_doc
from clawstore.builder.scheduler import Later
from clawstore.builder.unstored import NotStarted
from clawstore.errors import StoreError
from clawstore.graph.plan import Node, unseen_objects
from clawstore.store.claims import ClaimBoard
from clawstore.store.core.ids import oid_hex

if TYPE_CHECKING:
    from clawstore.store.store import Store

FIRST_WAIT_S = 0.05
MAX_WAIT_S = 1.0


@dataclass(frozen=True)
class Adopted:
    """A record another build stored for this node's key while this build was planning or waiting."""

    record_id: str
    record: dict[str, Any]


@dataclass(frozen=True)
class InBatch:
    """A provider batch another build submitted for this node's key while this build was planning or waiting: the
    build that collects it records the node (builder/batch_layer.py); asked here too, it would be paid twice."""

    name: str  # the batch's document (builder/batch_doc.py)


Work = Callable[[Node], tuple[str, dict[str, Any]]]


def claimed(work: Work, store: Store, board: ClaimBoard, node: Node, *, unpaid_here: bool = False,
            one_by_one: bool = False) -> tuple[str, dict[str, Any]] | Adopted | InBatch | Later:
    """Run `work(node)` under the node's claim, or say why not (adopted elsewhere, or busy: later). `unpaid_here`: the
    node calls no provider and its outputs are a function of its inputs (hook-free checks, results, run in the build's
    thread): alone on the store, it is run without a claim (`alone`)."""
    waits = node.claim_waits
    if waits:  # set aside before: the holder may have finished
        adopted = stored_meanwhile(store, node)
        if adopted is not None:
            return adopted
    elif unpaid_here and alone(board):
        # This build's own nodes run one after another here: one with a key recorded before is adopted, not run again.
        adopted = stored_meanwhile(store, node, look_again=False)
        return adopted if adopted is not None else work(node)
    # A node with a legacy key (graph/plan.py Node.legacy) is claimed under it too: an older claw building beside this
    # one claims it under that key, and waits for this build's record there (builder/legacy_keys.py) or is waited for.
    keys = [node.key] if node.legacy is None else [node.key, node.legacy[0]]
    try:
        taken = _take_all(board, keys)
    except OSError as exc:  # disk full, quota: nothing was paid for yet
        raise NotStarted(f"cannot write to store {board.root}: {exc.strerror or exc}") from None
    if not taken:
        node.claim_waits = waits + 1
        return Later(min(MAX_WAIT_S, FIRST_WAIT_S * 1.5 ** waits))
    try:
        # Taken over from a holder gone: a build killed the moment it had written the node's record into its pack,
        # before its commit window named it in the index. What it wrote is adopted (as `claw status` or a build
        # starting then would), not paid for again (before session 72 it was: tests/faults/test_killed_beside.py).
        taken_over = [key for key in keys if board.took_over(key)]
        if taken_over:
            with contextlib.suppress(OSError, StoreError):  # (what cannot be adopted is executed, as before)
                store.adopt_orphans()
        # Finished and released just before we claimed it? Only another process can have (it holds a lease on the
        # store while it writes): alone on the store, the index is not listed again for each node.
        adopted = stored_meanwhile(store, node, look_again=bool(taken_over) or board.neighbours.present())
        if adopted is not None:
            _release_all(board, keys)
            return adopted
        # `one_by_one` (not a batch line being recorded): a build submitting a batch lets the claims go once the batch
        # stands for them, so one waiting here must look for it as for a record.
        batch = _in_batch(store, keys) if one_by_one else None
        if batch is not None:
            _release_all(board, keys)
            return batch
        done = work(node)
    except BaseException:
        _release_all(board, keys)
        raise
    # Released once the record is durable and visible (the end of its commit window): a build waiting
    # on the claim then adopts the record instead of executing the node again.
    store.when_durable(lambda: _release_all(board, keys))
    return done


def _in_batch(store: Store, keys: list[str]) -> InBatch | None:
    covered = batch_doc.covered_now(store)
    doc = next((covered[oid_hex(key)] for key in keys if oid_hex(key) in covered), None)
    return InBatch(doc.name) if doc is not None else None


def _take_all(board: ClaimBoard, keys: list[str]) -> bool:
    """Claim every one of `keys`, or none (those taken are given back when one is held elsewhere)."""
    for index, key in enumerate(keys):
        try:
            taken = board.take(key)
        except BaseException:
            _release_all(board, keys[:index])
            raise
        if not taken:
            _release_all(board, keys[:index])
            return False
    return True


def _release_all(board: ClaimBoard, keys: list[str]) -> None:
    for key in keys:
        board.release(key)


def alone(board: ClaimBoard) -> bool:
    """No other process holds a lease on the store, and none came or went within the last second (claims.Neighbours).
    Every writer of action-cache entries holds a lease from before it plans, so another build that could run one of
    this build's nodes is seen here first; then every node is claimed again. What is left: a build leasing while this
    one runs an unclaimed node may run it too, if it gets there before the node's commit window ends. For unpaid nodes
    whose outputs are a function of their inputs that makes a second record of one key with the same outputs, and the
    nodes after it the same keys: nothing is paid twice. Their claim (a link and an unlink, and the index's look
    again): ~3 % of a cold build's CPU in pairs, 3,200 links and unlinks fewer at 400 × 4 (docs/building.md,
    Session 49)."""
    return not board.neighbours.present()


def stored_meanwhile(store: Store, node: Node, look_again: bool = True) -> Adopted | None:
    """The node's record if the action cache names another one than the build planned with, and
    everything that record names is in the store (a record whose outputs are gone is never reused).
    `look_again`: a miss lists the index again (what another process committed since it was last listed)."""
    adopted = _stored_under(store, node.key, node.record_id, look_again)
    legacy = node.legacy
    if adopted is None and legacy is not None:  # an older claw's record, keyed with the price (Node.legacy)
        adopted = _stored_under(store, legacy[0], None, look_again)
        if adopted is not None and adopted.record.get("cacheable"):
            now = node.key, node.document, node.document_bytes
            node.take_legacy()  # (the build names the record under the key it is for)
            node.keyed_now = now  # and records it under the key now when it reuses it (builder/legacy_keys.py)
        elif adopted is not None:
            adopted = None  # (a failure under the old key: this build executes the node, as it planned)
    return adopted


def _stored_under(store: Store, key: str, planned: str | None, look_again: bool) -> Adopted | None:
    found = store.get_action_record_id(key, look_again)
    if found is None or found == planned or not store.has(found):
        return None
    record = store.get_json(found)
    if unseen_objects(store, None, record):
        return None
    return Adopted(found, record)
