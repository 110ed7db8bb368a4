"""How the house is kept: counts read from the package's code (annotations, document reads, imports
across the store's border, command sizes), for the working tree and, with --before REV, for an earlier
commit beside it.

    python3 bench/house_bench.py --before <rev>

Nothing is run: every count comes from the modules' syntax trees (docs/design/architecture.md)."""

from __future__ import annotations

import argparse
import ast
import graphlib
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LONG_DOCSTRING_WORDS = 60
LONG_MODULE_DOCSTRING_WORDS = 200
# The store's internals: its core's modules, named as they are wherever they stand (store/ or store/core/).
# Other layers use its face (store.py, face.py, ids: the object-id format), its documents and its services.
STORE_CORE = ("codec", "packfile", "packmaps", "index", "batch", "objects", "layout", "locks", "runtime", "names",
              "reserve", "adopt", "leftovers")


@dataclass
class Counts:
    """The figures of one tree; `as_rows` names them in the order they print."""

    modules: int = 0
    lines: int = 0
    any_in_signatures: int = 0
    bare_any: int = 0
    returns_any: int = 0
    campaign_any: int = 0
    item_any: int = 0
    get_calls: int = 0
    get_string_keys: int = 0
    isinstance_calls: int = 0
    prints_outside_cli: int = 0
    long_docstrings: int = 0
    long_module_docstrings: int = 0
    most_parameters: int = 0
    store_internal_imports: int = 0
    modules_importing_store_internals: int = 0
    packages: int = 0
    package_arrows: int = 0
    circles: int = 0
    root_modules: int = 0
    cli_lines: dict[str, int] = field(default_factory=dict)

    def as_rows(self) -> list[tuple[str, str]]:
        rows = [(name, str(value)) for name, value in vars(self).items() if name != "cli_lines"]
        biggest = sorted(self.cli_lines.items(), key=lambda item: -item[1])[:3]
        rows += [(f"lines of cli/{name}", str(lines)) for name, lines in biggest]
        return rows


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, ast.expr]]:
    args = function.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    every += [arg for arg in (args.vararg, args.kwarg) if arg is not None]
    found = [(arg.arg, arg.annotation) for arg in every if arg.annotation is not None]
    if function.returns is not None:
        found.append(("return", function.returns))
    return found


def _names_any(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return any(part == "Any" for part in text.replace("[", " ").replace("]", " ").replace(",", " ")
               .replace("|", " ").replace("'", " ").replace('"', " ").split())


def _count_module(counts: Counts, dotted: str, tree: ast.Module, graph: dict[str, set[str]],
                  known: set[str]) -> None:
    in_store = dotted == "clawstore.store" or dotted.startswith("clawstore.store.")
    in_cli = dotted.startswith("clawstore.cli")
    internal = 0
    doc = ast.get_docstring(tree)
    if doc and len(doc.split()) > LONG_MODULE_DOCSTRING_WORDS:
        counts.long_module_docstrings += 1
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            text = ast.get_docstring(node)
            counts.long_docstrings += bool(text and len(text.split()) > LONG_DOCSTRING_WORDS)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = len(node.args.posonlyargs) + len(node.args.args) + len(node.args.kwonlyargs)
            params -= 1 if node.args.args and node.args.args[0].arg in ("self", "cls") else 0
            counts.most_parameters = max(counts.most_parameters, params)
            for name, annotation in _annotations(node):
                if not _names_any(annotation):
                    continue
                counts.any_in_signatures += 1
                bare = ast.unparse(annotation) in ("Any", "'Any'")
                counts.bare_any += bare
                counts.returns_any += bare and name == "return"
                counts.campaign_any += bare and name == "campaign"
                counts.item_any += bare and name == "item"
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get":
                counts.get_calls += 1
                receiver = ast.unparse(func.value)
                if (node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                        and not receiver.endswith("environ")):
                    counts.get_string_keys += 1
            elif isinstance(func, ast.Name) and func.id == "isinstance":
                counts.isinstance_calls += 1
            elif isinstance(func, ast.Name) and func.id == "print" and not in_cli:
                counts.prints_outside_cli += 1
            elif (isinstance(func, ast.Attribute) and func.attr == "echo" and not in_cli
                  and ast.unparse(func.value) == "click"):
                counts.prints_outside_cli += 1
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                       for a in node.names}
            graph[dotted].update(t for t in targets if t in known)
            if (not in_store and node.module.startswith("clawstore.store.")
                    and node.module.rsplit(".", 1)[1] in STORE_CORE):
                internal += len(node.names)
        elif isinstance(node, ast.Import):
            graph[dotted].update(a.name for a in node.names if a.name in known)
    counts.store_internal_imports += internal
    counts.modules_importing_store_internals += internal > 0


def measure(package: Path) -> Counts:
    """The counts of one copy of the `clawstore` package directory."""
    counts = Counts()
    paths = sorted(package.rglob("*.py"))
    dotted_of = {}
    for path in paths:
        parts = path.relative_to(package.parent).with_suffix("").parts
        dotted_of[path] = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    known = set(dotted_of.values())
    graph: dict[str, set[str]] = {name: set() for name in known}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        counts.modules += 1
        counts.lines += text.count("\n")
        _count_module(counts, dotted_of[path], ast.parse(text), graph, known)
        if path.parent.name == "cli":
            counts.cli_lines[path.name] = text.count("\n")
        if path.parent == package and path.name != "__init__.py":
            counts.root_modules += 1
    packages = {name.split(".")[1] for name in known if name.count(".") >= 1} & {
        path.name for path in package.iterdir() if path.is_dir()}
    counts.packages = len(packages)

    def home(name: str) -> str:
        part = name.split(".")[1] if name.count(".") >= 1 else ""
        return part if part in packages else "(root)"

    arrows = {(home(a), home(b)) for a, targets in graph.items() for b in targets if home(a) != home(b)}
    counts.package_arrows = len(arrows)
    counts.circles = _circles({name: targets - {name} for name, targets in graph.items()})
    return counts


def _circles(graph: dict[str, set[str]]) -> int:
    """0 when the module graph orders itself; else how many modules stand on some circle (peeled)."""
    remaining = {name: set(targets) for name, targets in graph.items()}
    while True:
        try:
            graphlib.TopologicalSorter(remaining).prepare()
            return len(graph) - len(remaining)
        except graphlib.CycleError as error:
            on_circle = error.args[1][:-1]
            for name in on_circle:
                remaining.pop(name, None)
            for targets in remaining.values():
                targets.difference_update(on_circle)


def _checkout(rev: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, "clawstore"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "clawstore"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git revision to count beside the working tree")
    args = parser.parse_args(argv)
    now = measure(REPO / "clawstore")
    if args.before is None:
        for name, value in now.as_rows():
            print(f"{name:36} {value:>8}")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        before = measure(_checkout(args.before, Path(scratch)))
    before_rows = dict(before.as_rows())
    print(f"{'':36} {'before':>8} {'now':>8}")
    for name, value in now.as_rows():
        print(f"{name:36} {before_rows.get(name, '-'):>8} {value:>8}")
    for name in before_rows.keys() - dict(now.as_rows()).keys():
        print(f"{name:36} {before_rows[name]:>8} {'-':>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
