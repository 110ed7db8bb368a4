"""Campaign heads stored in parts, so that an edit rewrites (and a push sends) a few parts instead of every node of a
large campaign. Why and the layout of the parts: docs/store.md (Details by module)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import blake3

from clawstore.errors import StoreError
from clawstore.store import documents
from clawstore.store.documents import Head

if TYPE_CHECKING:
    from clawstore.store.core.objects import ObjectStore

HEAD_VERSION = 2
PART_NODES = 64  # nodes per part, on average
PART_MAX = 1024  # a part ends here in any case (bounds a part however the addresses hash)

ReadJson = Callable[[str], Any]


def _place(node: Mapping[str, Any]) -> tuple[str, str]:
    """Where a node goes: its case, then the rest of its address and its kind (a total order)."""
    address = node.get("address")
    fields = sorted(address.items()) if isinstance(address, Mapping) else []
    case = address.get("case_id") if isinstance(address, Mapping) else None
    return str(case), "|".join(f"{name}={value}" for name, value in fields) + f"|{node.get('kind')}"


def split_nodes(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The nodes in their place order, cut into parts after each node whose place hashes to a boundary."""
    parts: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for place, node in sorted(((_place(node), node) for node in nodes), key=lambda pair: pair[0]):
        current.append(node)
        if len(current) >= PART_MAX or blake3.blake3(place[1].encode()).digest()[0] % PART_NODES == 0:
            parts.append(current)
            current = []
    if current:
        parts.append(current)
    return parts


def write_head(store: ObjectStore, fields: Mapping[str, Any], nodes: list[dict[str, Any]]) -> str:
    """Store a campaign head (`fields` plus `nodes`, in parts); its id. The parts are stored first: a
    head never names a part that is not there (a part already stored is not written again)."""
    parts = split_nodes(nodes)
    plain = {name: value for name, value in fields.items() if name not in _LAYOUT}
    with store.batch():  # one commit for every part and the head (not one fsync each)
        part_ids = [store.put_json({"head_part": 1, "nodes": [_without_action(node) for node in part]})
                    for part in parts]
        head_id = store.put_json({**plain, "head_version": HEAD_VERSION, "node_count": len(nodes),
                                  "node_parts": part_ids,
                                  "node_actions": _runs([node.get("action") for part in parts for node in part])})
    return head_id


def _without_action(node: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in node.items() if name != "action"}


_LAYOUT = ("nodes", "node_parts", "node_count", "node_actions")


def _runs(values: list[Any]) -> list[list[Any]]:
    runs: list[list[Any]] = []
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
    parts = doc["node_parts"]
    if not isinstance(parts, list):
        raise StoreError("campaign head: node_parts: expected a list of part ids")
    nodes: list[Any] = []
    for part_id in parts:
        part = read_json(part_id) if isinstance(part_id, str) else None
        if not isinstance(part, dict) or not isinstance(part.get("nodes"), list):
            raise StoreError(f"campaign head part {str(part_id)[:80]} is not a part of a campaign head")
        nodes.extend(part["nodes"])
    actions = _actions(doc.get("node_actions"), len(nodes))
    inline = {name: value for name, value in doc.items() if name not in _LAYOUT}
    inline["nodes"] = [node if action is None or not isinstance(node, dict) else {**node, "action": action}
                       for node, action in zip(nodes, actions, strict=True)]
    return inline


def inline_or_none(doc: Any, read_json: ReadJson) -> Any:
    """inline_nodes, or None when a part is missing or not one (for readers that skip a damaged head:
    fsck names it, a query leaves its rows out)."""
    try:
        return inline_nodes(doc, read_json)
    except StoreError:
        return None


def iter_parts(doc: Any, read_json: ReadJson) -> Iterator[list[Any]]:
    """The nodes of a head document in order, each with its action, a part at a time: for readers of a large campaign
    that keep only what they work on (inline_nodes holds them all). A head not in parts is one part; StoreError as
    inline_nodes, when it reaches the part (or the action runs) that is wrong."""
    if not is_parted(doc):
        yield list(doc.get("nodes") or []) if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) else []
        return
    parts, runs = doc["node_parts"], doc.get("node_actions")
    if not isinstance(parts, list) or not isinstance(runs, list):
        raise StoreError("campaign head: node_parts, node_actions: expected lists")
    actions = iter(runs)
    action, left = None, 0
    for part_id in parts:
        part = read_json(part_id) if isinstance(part_id, str) else None
        if not isinstance(part, dict) or not isinstance(part.get("nodes"), list):
            raise StoreError(f"campaign head part {str(part_id)[:80]} is not a part of a campaign head")
        nodes = []
        for node in part["nodes"]:
            while left == 0:
                run = next(actions, None)
                if not (isinstance(run, list) and len(run) == 2 and isinstance(run[1], int) and run[1] > 0):
                    raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")
                action, left = run
            left -= 1
            nodes.append(node if action is None or not isinstance(node, dict) else {**node, "action": action})
        yield nodes
    if left or next(actions, None) is not None:
        raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")


def _actions(runs: Any, count: int) -> list[Any]:
    """One action per node from their run-length encoding; StoreError if they do not match the nodes."""
    actions: list[Any] = []
    ok = isinstance(runs, list)
    for run in runs if ok else ():
        if not (isinstance(run, list) and len(run) == 2 and isinstance(run[1], int) and 0 < run[1] <= count
                and len(actions) + run[1] <= count):
            ok = False
            break
        actions += [run[0]] * run[1]
    if not ok or len(actions) != count:
        raise StoreError("campaign head: node_actions: expected [action, count] runs covering its nodes")
    return actions


def read_head_doc(store: Any, head_id: str) -> Any:
    """The JSON object `head_id` names, a campaign head's nodes inline (`store`: anything with get_json)."""
    return inline_nodes(store.get_json(head_id), store.get_json)


def read_head(store: Any, head_id: str) -> Head:
    """The campaign head `head_id` names, typed (read_head_doc, then checked: StoreError naming the field
    a hostile head gets wrong; a missing object raises what `store.get_json` raises)."""
    return documents.read_head(read_head_doc(store, head_id), f"campaign head {head_id}")
