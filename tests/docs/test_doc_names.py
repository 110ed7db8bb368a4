"""What README.md and docs/ name exists: every option given with a `claw` command, every file of the repository, every
function and attribute they name in a module.

Read from the docs' code (fenced blocks and `inline` spans) of README.md and docs/, but for the session journals
(docs/scale/) and the history of decisions (docs/design/decisions.md), which name what was. In-process, no command
runs: the options are click's own (`claw CMD --help` lists the same).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import click

from clawstore.cli import main
from tests.docs.doc_blocks import REPO

CLAWSTORE = REPO / "clawstore"
# Placeholders that stand for a file of the reader's (docs/testing.md: how to add a test).
PLACEHOLDERS = {"tests/x/test_new.py", "tests/some/test_file.py"}
INLINE = re.compile(r"`([^`]+)`")
CLAW_LINE = re.compile(r"\bclaw((?:\s+[a-z][a-z-]*)+)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b")
# A file of the repository, as the docs spell one: clawstore/…, tests/…, bench/…, .ci/… (an image name such as
# clawstore/openclaw:2026.9.6 is followed by its tag).
REPO_PATH = re.compile(r"(?<![\w./-])((?:clawstore|tests|bench|\.ci)/[\w./-]*\w)(?![\w/:-])")
CALL = re.compile(r"(?<![\w.$/-])([A-Za-z_]\w*)\((?!\))")
KEYWORD = re.compile(r"(?<![\w.])([a-z_]\w*)=(?!=)")
# `module.Name`, `pkg/module.name`, `clawstore.pkg.module.NAME`: a class, constant or function of a module of claw.
MODULE_ATTR = re.compile(r"(?<![\w/.])((?:clawstore[./])?(?:[a-z_]+/)*[a-z_]+)\.([A-Za-z_]\w*)")
# A name given beside its module's file, in the prose: graph/plan.py `Node.legacy`, (cli/common.py
# `closed_with_command`); not a second file (`store.py`, `face.py`)
BESIDE = re.compile(r"((?:clawstore/)?[a-z_]+(?:/[a-z_]+)*\.py)`?,?\s+`([A-Za-z_]\w*)(?:\.(?!py`)\w+)*`")
SUFFIXES = {"py", "md", "json", "sql", "yaml", "yml", "sh", "toml", "txt", "html", "js", "csv", "parquet", "d"}


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md")
                                        if "scale" not in p.relative_to(REPO / "docs").parts
                                        and p != REPO / "docs" / "design" / "decisions.md")]


def code(doc: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line of a fenced block (its comment cut) and each `inline` span of the prose."""
    fenced = False
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            yield n, line.split(" # ")[0]
        else:
            for span in INLINE.findall(line):
                yield n, span


@functools.cache
def commands() -> dict[str, set[str]]:
    """{'archive export': its options, ...}: every command and group of `claw`, with the options it takes."""
    found: dict[str, set[str]] = {}

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        found[" ".join(path)] = {"--help", "-h"} | {name for param in command.params if isinstance(param, click.Option)
                                                    for name in (*param.opts, *param.secondary_opts)}
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, (*path, name))

    walk(main, ())
    return found


def flags_named(text: str) -> Iterator[tuple[str, str]]:
    """(command, option) for each option written after `claw COMMAND` in `text`, up to a pipe, `;`, `&&` or the
    next `claw`."""
    known = commands()
    for match in CLAW_LINE.finditer(text):
        path: list[str] = []
        for word in match.group(1).split():
            if " ".join([*path, word]) not in known:
                break
            path.append(word)
        if path:
            rest = re.split(r"\||&&|;|\bclaw\s", text[match.start(1):][len(" ".join(path)) + 1:])[0]
            for flag in FLAG.findall(rest):
                yield " ".join(path), flag


@functools.cache
def _definitions(path: Path) -> frozenset[str]:
    """The names a module defines or imports (what `module.name` reaches)."""
    text = path.read_text(encoding="utf-8")
    imports = re.findall(r"^\s*from\s+\S+\s+import\s+\(?([\w, ]+)", text, re.M)
    imported = [name.split(" as ")[-1].strip() for names in imports for name in names.split(",")]
    return frozenset(re.findall(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", text, re.M)
                     + re.findall(r"^\s*(\w+)\s*(?::[^=\n]*)?=", text, re.M)
                     + re.findall(r"\bself\.(\w+)\s*(?::[^=\n]*)?=", text) + imported)


@functools.cache
def modules() -> dict[str, list[Path]]:
    """Each module of claw under the names the docs give it: `batch`, `core/batch`, `store/core/batch`,
    `clawstore/store/core/batch`, `clawstore.store.core.batch`."""
    names: dict[str, list[Path]] = {}
    for path in CLAWSTORE.rglob("*.py"):
        parts = path.relative_to(CLAWSTORE).with_suffix("").parts
        spelled = {"clawstore." + ".".join(parts)} | {"/".join(parts[i:]) for i in range(len(parts))}
        spelled.add("clawstore/" + "/".join(parts))
        for name in spelled:
            names.setdefault(name, []).append(path)
    return names


@functools.cache
def parameters() -> dict[str, list[set[str]]]:
    """{function or class name: the parameter names of each of its definitions in claw (a class's: its __init__'s or
    its fields')}."""
    found: dict[str, list[set[str]]] = {}
    for path in CLAWSTORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                found.setdefault(node.name, []).append(
                    {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)})
            elif isinstance(node, ast.ClassDef):
                fields = {item.target.id for item in node.body
                          if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        fields |= {a.arg for a in (*item.args.args, *item.args.kwonlyargs)}
                found.setdefault(node.name, []).append(fields)
    return found


def call_keywords(text: str) -> Iterator[tuple[str, str]]:
    """(function, keyword) for each `name=` written inside the parentheses of a call `function(…)` in `text`."""
    for match in CALL.finditer(text):
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        inner = text[match.end():end - 1]
        while "(" in inner:  # (a nested call's keywords are its own)
            inner = re.sub(r"\([^()]*\)", "", inner)
        for keyword in KEYWORD.findall(inner):
            yield match.group(1), keyword


def defined(name: str, paths: list[Path]) -> bool:
    return any(name in _definitions(path) for path in paths)


def test_every_option_named_with_a_command_exists() -> None:
    """`claw build --plan-only` in a doc, where build has no such option: a reader types it and gets exit 2."""
    wrong = [f"{doc.relative_to(REPO)}:{n}: claw {command} {flag}" for doc in documents() for n, text in code(doc)
             for command, flag in flags_named(text) if flag not in commands()[command] and flag != "--nope"]
    assert wrong == []


def test_a_renamed_option_is_found() -> None:
    assert list(flags_named("claw build $C --plan-only | head")) == [("build", "--plan-only")]
    assert list(flags_named("claw archive export $C -o x.claw; claw gc --grace 0")) == [("archive export", "-o"),
                                                                                         ("gc", "--grace")]
    assert "--plan-only" not in commands()["build"] and "-o" in commands()["archive export"]


def test_every_file_of_the_repository_named_exists() -> None:
    """A doc naming `bench/pae` (no such file: the 2,000 × 5 campaign is bench/growth_bench.py's) sends the reader
    nowhere."""
    missing = [f"{doc.relative_to(REPO)}:{n}: {path}" for doc in documents() for n, text in code(doc)
               for path in REPO_PATH.findall(text)
               if "<" not in path and "*" not in path and path not in PLACEHOLDERS
               and not (REPO / path).exists() and not (REPO / f"{path}.py").exists()]
    assert missing == []


def test_every_function_the_design_docs_name_exists() -> None:
    """docs/design/ gives the interfaces between the layers by name: `object_path(oid)` there, gone with store
    format 1, is a call a reader of the contracts cannot make."""
    everything = [path for paths in modules().values() for path in paths]
    missing = [f"{doc.relative_to(REPO)}:{n}: {name}(" for doc in documents() if doc.parent.name == "design"
               for n, text in code(doc) for name in CALL.findall(text) if not defined(name, everything)]
    assert missing == []


def test_every_keyword_the_docs_give_a_call_of_claw_is_a_parameter_of_it() -> None:
    """`run_query(store_root, sql, params=None, store=None, parquet_out=None)` in docs/design/contracts.md: the function
    takes `confined=`, not `parquet_out=` (Parquet is `export_parquet`'s); a caller who follows the contract gets a
    TypeError."""
    wrong = [f"{doc.relative_to(REPO)}:{n}: {name}({keyword}=…)" for doc in documents() for n, text in code(doc)
             for name, keyword in call_keywords(text)
             if name in parameters() and not any(keyword in params for params in parameters()[name])]
    assert wrong == []


def test_the_keywords_of_a_call_are_read_from_its_own_parentheses() -> None:
    assert list(call_keywords("`f(a, b=1, c=g(d=2), e=None) -> X(y=3)`")) == [
        ("f", "b"), ("f", "c"), ("f", "e"), ("g", "d"), ("X", "y")]


def test_every_class_constant_and_path_qualified_name_of_a_module_exists() -> None:
    """`batch.Committer` (no such class: `batch.commit` makes a commit durable), `engine.BATCH`,
    `graph/explain.read_head`: a name given with its module is in that module. (A lower-case name after a bare module
    name is left out: `store.batch()` and `usage.usage_rejected` are a variable's and a JSON path's.)"""
    missing = []
    for doc in documents():
        for n, text in code(doc):
            for module, name in MODULE_ATTR.findall(text):
                qualified = "/" in module or module.startswith("clawstore.")
                if module in modules() and name not in SUFFIXES and (qualified or not name.islower()) \
                        and not defined(name, modules()[module]):
                    missing.append(f"{doc.relative_to(REPO)}:{n}: {module}.{name}")
    assert missing == []


def named_beside(line: str) -> Iterator[tuple[str, str]]:
    """(module path, name) for each name given right after its module's file in a line of prose."""
    for path, name in BESIDE.findall(line):
        yield path.removeprefix("clawstore/").removesuffix(".py"), name


def test_every_name_given_beside_its_module_file_is_in_it() -> None:
    """docs/building.md said a build whose cost could be unknown is refused by cli/build_cmd.py `_check_budget`: there
    is no such function (project/front.py `Project._within_budget` refuses it). The name is defined or used there
    (fsck_reach.py `get_many_bytes`: the store's method it calls)."""
    missing = [f"{doc.relative_to(REPO)}:{n}: {module}.py {name}" for doc in documents()
               for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
               for module, name in named_beside(line)
               if module in modules() and not any(re.search(rf"\b{name}\b", path.read_text(encoding="utf-8"))
                                                  for path in modules()[module])]
    assert missing == []


def test_a_name_beside_a_module_file_is_read_as_its() -> None:
    assert list(named_beside("refused (cli/build_cmd.py `_check_budget`), as graph/plan.py `Node.legacy` says")) == [
        ("cli/build_cmd", "_check_budget"), ("graph/plan", "Node")]
    assert list(named_beside("`store.py`, `face.py`")) == []


TABLE_SEPARATOR = re.compile(r"(?<!\\)\|")


def overfull_rows(text: str) -> Iterator[tuple[int, int, int]]:
    """(line number, cells, the header's cells) of each table row outside code blocks with more cells than its
    header: a `|` left unescaped in a cell's text (`exec | reuse | fail`) ends the cell there, and a renderer drops
    the cells past the header's, the rest of the sentence with them."""
    header, fenced = 0, False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|"):
            cells = len(TABLE_SEPARATOR.split(line.strip().strip("|")))
            if not header:
                header = cells
            elif cells > header:
                yield n, cells, header
        else:
            header = 0


def test_every_table_row_has_the_cells_of_its_header() -> None:
    """docs/query.md gave `builds.state` as `running (…) | complete | interrupted` inside a table: a reader saw
    `running (…)` alone, and so every column listing its values with `|` (`action`, `status`, `outcome`, …)."""
    overfull = [f"{doc.relative_to(REPO)}:{n}: {cells} cells, its header {header}" for doc in documents()
                for n, cells, header in overfull_rows(doc.read_text(encoding="utf-8"))]
    assert overfull == []


def test_an_unescaped_pipe_in_a_cell_is_found() -> None:
    table = "| a | b |\n|---|---|\n| `x` | one \\| two |\n| `y` | one | two |\n\n```\n| a |\n| b | c |\n```\n"
    assert list(overfull_rows(table)) == [(4, 3, 2)]


SAVED = CLAWSTORE / "query" / "saved"
SAVED_QUERY = re.compile(r"\bclaw query ([a-z_]\w*)\b([^|;&`]*)")
PARAM = re.compile(r"(?:--param|-p)[ =]([A-Za-z_]\w*)=")


def saved_queries_named(text: str) -> Iterator[tuple[str, list[str]]]:
    """(name, the --param names given it) for each `claw query NAME` in `text` (a bare word: a saved query)."""
    for match in SAVED_QUERY.finditer(text):
        yield match.group(1), PARAM.findall(match.group(2))


def test_every_saved_query_named_exists_and_reads_the_params_given() -> None:
    """`claw query leaderbord` runs nothing but an error, and `--param campain=…` filters nothing: a saved query reads
    only the variables its SQL asks for (`getvariable('campaign')`), any other is set and ignored."""
    wrong = []
    for doc in documents():
        for n, text in code(doc):
            for name, params in saved_queries_named(text):
                path = SAVED / f"{name}.sql"
                if not path.is_file():
                    wrong.append(f"{doc.relative_to(REPO)}:{n}: no saved query {name}")
                    continue
                read = set(re.findall(r"getvariable\('(\w+)'\)", path.read_text(encoding="utf-8")))
                wrong += [f"{doc.relative_to(REPO)}:{n}: {name} reads no {param}" for param in params
                          if param not in read]
    assert wrong == []


def test_a_saved_query_and_its_params_are_read_from_a_line() -> None:
    assert list(saved_queries_named("claw query history --param case=x -p model=m | head; claw query 'select 1'")) == [
        ("history", ["case", "model"])]
    assert list(saved_queries_named("`claw query leaderbord`")) == [("leaderbord", [])]
