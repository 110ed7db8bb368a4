"""Campaign heads stored in parts, so that an edit rewrites (and a push sends) a few parts instead of every node of a
large campaign. Why and the layout of the parts: docs/store.md (Details by module)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3
import msgspec

from clawstore.errors import StoreError
from clawstore.store import documents
from clawstore.store.documents import Head
from clawstore.values import jsontext
from clawstore.values.canonical import canonical_json

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

HEAD_VERSION = 2
PART_NODES = 64  # nodes per part, on average
PART_MAX = 1024  # a part ends here in any case (bounds a part however the addresses hash)

ReadJson = Callable[[str], Any]


Place = tuple[str, str]


def place(node: Mapping[str, Any]) -> Place:
    """Where a node goes: its case, then the rest of its address and its kind (a total order)."""
    address = node.get("address")
    if type(address) is dict:  # (every node a build adds: the same string without the ABC checks and sort of pairs)
        return str(address.get("case_id")), "|".join([f"{name}={address[name]}" for name in sorted(address)]) \
            + f"|{node.get('kind')}"
    fields = sorted(address.items()) if isinstance(address, Mapping) else []
    case = address.get("case_id") if isinstance(address, Mapping) else None
    return str(case), "|".join(f"{name}={value}" for name, value in fields) + f"|{node.get('kind')}"


def split_nodes(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The nodes in their place order, cut into parts after each node whose place hashes to a boundary."""
    return list(_cut(_placed(nodes)))


def _placed(nodes: Iterable[dict[str, Any]]) -> list[tuple[Place, dict[str, Any]]]:
    return sorted(((place(node), node) for node in nodes), key=itemgetter(0))


def _cut(placed: Iterable[tuple[Place, dict[str, Any]]]) -> Iterator[list[dict[str, Any]]]:
    """Nodes given in place order, a part at a time (what split_nodes cuts)."""
    current: list[dict[str, Any]] = []
    for where, node in placed:
        current.append(node)
        if len(current) >= PART_MAX or blake3.blake3(where[1].encode()).digest()[0] % PART_NODES == 0:
            yield current
            current = []
    if current:
        yield current


def write_head(store: ObjectStore, fields: Mapping[str, Any], nodes: list[dict[str, Any]]) -> str:
    """Store a campaign head (`fields` plus `nodes`, in parts); its id. The parts are stored first: a
    head never names a part that is not there (a part already stored is not written again)."""
    return write_placed_head(store, fields, _placed(nodes))


def write_placed_head(store: ObjectStore, fields: Mapping[str, Any],
                      placed: Iterable[tuple[Place, dict[str, Any]]]) -> str:
    """write_head of (place, node) pairs given in place order, stored a part at a time as they come: it holds one
    part (and the head's list of part ids and run-length actions), however many nodes there are."""
    plain = {name: value for name, value in fields.items() if name not in _LAYOUT}
    actions: list[list[Any]] = []
    count = 0
    with store.batch():  # one commit for every part and the head (not one fsync each)
        part_ids = []
        for part in _cut(placed):  # each part's copies (its nodes without their action, its JSON) made and dropped
            part_ids.append(store.put_json({"head_part": 1, "nodes": [_without_action(node) for node in part]}))
            _runs((node.get("action") for node in part), actions)
            count += len(part)
        head_id = store.put_json({**plain, "head_version": HEAD_VERSION, "node_count": count,
                                  "node_parts": part_ids, "node_actions": actions})
    return head_id


def _without_action(node: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in node.items() if name != "action"}


_LAYOUT = ("nodes", "node_parts", "node_count", "node_actions")


def _runs(values: Iterable[Any], runs: list[list[Any]]) -> list[list[Any]]:
    """`runs` (the run-length encoding of the values before) extended by `values`."""
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    return runs


def is_parted(doc: Any) -> bool:
    return isinstance(doc, dict) and "nodes" not in doc and "node_parts" in doc


def part_ids(doc: Any) -> list[str]:
    """The part ids a head names ([] for a head with its nodes inline, or anything else)."""
    parts = doc.get("node_parts") if is_parted(doc) else None
    return [p for p in parts if isinstance(p, str)] if isinstance(parts, list) else []


def inline_nodes(doc: Any, read_json: ReadJson) -> Any:
    """A head document with its nodes inline (`nodes`, and no `node_parts`); any other JSON as it is.
    StoreError naming the part when a part is not one (a missing part raises what `read_json` raises)."""
    if not is_parted(doc):
        return doc
    return {**head_fields(doc), "nodes": list(iter_nodes(doc, read_json))}


def head_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A head's own fields, without its nodes or their layout (what a reader needs when it streams the nodes)."""
    return {name: value for name, value in doc.items() if name not in _LAYOUT}


def node_with_action(node: Any, action: Any) -> Any:
    """A node object's copy with its action (anything else as it is): what iter_parts gives by default."""
    return node if action is None or not isinstance(node, dict) else {**node, "action": action}


def iter_parts(doc: Any, read_json: ReadJson, with_action: Callable[[Any, Any], Any] = node_with_action
               ) -> Iterator[list[Any]]:
    """A head's nodes a part at a time (a list each, a case's nodes together), each with its action (`with_action`:
    by default a node object's copy with it); a head not in parts is one part. StoreError when `doc` is not a head, a
    part is not one, or the actions do not cover the nodes (found at the end: a caller acts on nothing before the
    iteration ends)."""
    if not is_parted(doc):
        nodes = doc.get("nodes") if isinstance(doc, dict) else None
        if not isinstance(nodes, list):
            raise StoreError("not a campaign head (an object with a nodes list)")
        yield list(nodes)
        return
    parts = doc["node_parts"]
    if not isinstance(parts, list):
        raise StoreError("campaign head: node_parts: expected a list of part ids")
    actions = _action_runs(doc.get("node_actions"))
    for part_id in parts:
        part = read_json(part_id) if isinstance(part_id, str) else None
        if not isinstance(part, dict) or not isinstance(part.get("nodes"), list):
            raise StoreError(f"campaign head part {str(part_id)[:80]} is not a part of a campaign head")
        found = []
        for node in part["nodes"]:
            action = next(actions, _NO_ACTION)
            if action is _NO_ACTION:
                raise StoreError(_ACTIONS_WRONG)
            found.append(with_action(node, action))
        yield found
    if next(actions, _NO_ACTION) is not _NO_ACTION:
        raise StoreError(_ACTIONS_WRONG)


def iter_nodes(doc: Any, read_json: ReadJson) -> Iterator[Any]:
    """iter_parts, a node at a time."""
    for part in iter_parts(doc, read_json):
        yield from part


def write_inline(out: BinaryIO, doc: Mapping[str, Any], read_json: ReadJson) -> None:
    """Write the canonical JSON of the head `doc` with its nodes inline (the bytes of
    canonical_json(inline_nodes(doc, read_json))), holding one part at a time."""
    marker = f"nodes-{os.urandom(16).hex()}"  # (a value no head holds)
    before, after = canonical_json({**head_fields(doc), "nodes": marker}).split(f'"{marker}"'.encode(), 1)
    out.write(before + b"[")
    for number, node in enumerate(iter_nodes(doc, read_json)):
        out.write(b"," + canonical_json(node) if number else canonical_json(node))
    out.write(b"]" + after)


def inline_or_none(doc: Any, read_json: ReadJson) -> Any:
    """inline_nodes, or None when a part is missing or not one (for readers that skip a damaged head:
    fsck names it, a query leaves its rows out)."""
    try:
        return inline_nodes(doc, read_json)
    except StoreError:
        return None


_NO_ACTION = object()
_ACTIONS_WRONG = "campaign head: node_actions: expected [action, count] runs covering its nodes"


def _action_runs(runs: Any) -> Iterator[Any]:
    """One action per node from their run-length encoding (its shape checked before the first is given)."""
    if not isinstance(runs, list) or not all(isinstance(run, list) and len(run) == 2 and isinstance(run[1], int)
                                             and run[1] > 0 for run in runs):
        raise StoreError(_ACTIONS_WRONG)
    return (action for action, count in runs for _ in range(count))


def read_head_doc(store: Any, head_id: str) -> Any:
    """The JSON object `head_id` names, a campaign head's nodes inline (`store`: anything with get_json)."""
    return inline_nodes(store.get_json(head_id), store.get_json)


def read_head(store: Any, head_id: str) -> Head:
    """The campaign head `head_id` names, typed (read_head_doc, then checked: StoreError naming the field
    a hostile head gets wrong; a missing object raises what `store.get_json` raises)."""
    return documents.read_head(read_head_doc(store, head_id), f"campaign head {head_id}")


# ---------------------------------------------------------------------------------- a head read lazily

class LazyHeadNode(msgspec.Struct):
    """A head node as builds write it, as the read commands read it (`lazy_part`): what documents.HeadNode holds of
    it, its record_doc left as text (decoded when asked for: `record_doc`, `record_view()`), made by the decoder in C.
    Fields it does not name are not kept (read_head_node keeps them only in HeadNode.stored, which nothing that reads
    a head lazily writes back). A node of another type or lacking a required field: its part is read whole, and typed
    as read_head_node types it."""

    kind: str
    key: str
    address: dict[str, Any]
    record: str | None = None
    action: str | None = None
    record_raw: msgspec.Raw = msgspec.field(default=msgspec.Raw(b"null"), name="record_doc")  # (JSON: {..} or null)
    quarantined: str | None = None

    @property
    def record_doc(self) -> dict[str, Any] | None:
        """The record's planning view, decoded now (at each call): the values decoding the whole part gave (the same
        decoder, the same fallback)."""
        return jsontext.loads(self.record_raw)  # type: ignore[no-any-return]  # (an object or null: lazy_part)

    def record_view(self) -> dict[str, Any] | None:
        return self.record_doc


class _LazyPart(msgspec.Struct):
    nodes: list[LazyHeadNode]


_LAZY_PART = msgspec.json.Decoder(_LazyPart)
_OBJECT, _NULL = b"{n"  # the first byte of a JSON object's text, and of null's


def lazy_part(data: bytes) -> Any:
    """A head part's JSON `data` as {"nodes": [...]}, each node a `LazyHeadNode`, when every node is as builds write
    it; else the part decoded whole, as `get_json` decodes it (its nodes typed by read_head_node later, a damaged one
    said as it says it). For the read commands: typing every node and decoding its record_doc was most of reading a
    head (2.3 s of CPU at 10,000 x 5; 0.8 s so), and they need a record_doc only where a node's key is the planned
    one."""
    try:
        part = _LAZY_PART.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return jsontext.loads(data)
    if not all(memoryview(node.record_raw)[0] in (_OBJECT, _NULL) for node in part.nodes):  # (else: read whole)
        return jsontext.loads(data)
    return {"nodes": part.nodes}


def lazy_node(node: Any, action: Any) -> Any:
    """iter_parts' `with_action` for the parts `lazy_part` reads: a LazyHeadNode given the head's action for it (as
    node_with_action gives a node object); anything else as node_with_action gives it."""
    if type(node) is not LazyHeadNode:
        return node_with_action(node, action)
    if action is None:
        return node
    if type(action) is not str:  # (the head's action is damaged: said as read_head_node says it)
        whole = {name: getattr(node, name) for name in ("kind", "key", "address", "record", "quarantined")}
        return {**whole, "record_doc": node.record_doc, "action": action}
    node.action = action
    return node
