"""The layers of docs/design/architecture.md are the code's: each package imports exactly the packages its
row of the table names, each of them listed before it, and no module of clawstore imports one that
imports it back, directly or around a circle (imports inside functions and for type checking count:
each is a dependency a reader has to follow)."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "clawstore"
ROW = re.compile(r"^\| `(\w+)/` \| .* \| ([^|]+) \|$")


@functools.cache
def _modules() -> dict[str, Path]:
    """Every module of clawstore by dotted name (a package's __init__ by the package's)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of clawstore a module imports, wherever the import stands (`from P import M` names the
    module P.M when there is one, else P: a name P's __init__ hands on)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                         for alias in node.names)
    return {name for name in names if name in modules}


@functools.cache
def _module_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(path, modules) - {name} for name, path in modules.items()}


def _declared_layers() -> dict[str, set[str] | None]:
    """{package: the packages its row says it imports (None: "everything")}, in the table's order."""
    text = (REPO / "docs" / "design" / "architecture.md").read_text(encoding="utf-8")
    layers: dict[str, set[str] | None] = {}
    for line in text.splitlines():
        match = ROW.match(line.strip())
        if match:
            imports = match.group(2).strip()
            layers[match.group(1)] = (None if imports == "everything" else set() if imports == "none"
                                      else {name.strip() for name in imports.split(",")})
    return layers


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _circles(_module_graph()) == []


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_each_package_imports_what_its_row_of_the_layers_table_says() -> None:
    declared = _declared_layers()
    packages = {path.name for path in PACKAGE.iterdir() if path.is_dir() and any(path.glob("*.py"))}
    assert set(declared) == packages, "every package has a row, every row a package"
    actual: dict[str, set[str]] = {name: set() for name in packages}
    for module, targets in _module_graph().items():
        source = module.split(".")[1] if "." in module else None
        if source in packages:
            actual[source].update(t.split(".")[1] for t in targets if "." in t and t.split(".")[1] in packages)
    order = list(declared)
    for package, imports in declared.items():
        if imports is None:
            continue
        assert actual[package] - {package} == imports, package
        assert all(order.index(name) < order.index(package) for name in imports), f"{package} imports a later row"


# What other layers may import of the store besides `Store` and its Protocols: ids. (A pull imports a
# bundle an older claw pushed, and shares the archives' trust rule, through functions of the face.)
STORE_FACE = {"clawstore.store", "clawstore.store.face", "clawstore.store.core.ids", "clawstore.store.store"}


def test_the_remote_asks_the_store_only_through_its_face() -> None:
    reached = {(module, target) for module, targets in _module_graph().items() if module.startswith("clawstore.remote.")
               for target in targets if target.startswith("clawstore.store")}
    beyond = sorted(pair for pair in reached if pair[1] not in STORE_FACE)
    assert reached and beyond == [], beyond  # (runtime, index, packfile, transfer: the store's own business)
