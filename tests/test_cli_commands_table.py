"""What a `claw` command's start imports: its commands are loaded on demand (the table of each command's module is
whole, and a command imports its own module, not all 29), and a read command never imports the HTTP client."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clawstore.cli import COMMAND_MODULES, main
from tests.support.claw import env, ws  # noqa: F401  (fixtures)
from tests.support.stamps import wait_out_racy_window
from tests.support.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]


def test_the_table_names_every_command_module_and_the_commands_it_registers() -> None:
    """A new command module left out of the table (or a command renamed) would vanish from `claw`: this fails."""
    on_disk = {f"clawstore.cli.{path.stem}" for path in (REPO / "clawstore" / "cli").glob("*_cmd.py")}
    assert set(COMMAND_MODULES.values()) == on_disk
    for module in on_disk:
        group = click.Group()
        importlib.import_module(module).register(group)
        assert {name for name, listed in COMMAND_MODULES.items() if listed == module} == set(group.commands), module


def test_a_mistyped_command_is_matched_against_every_command_loaded_or_not() -> None:
    result = CliRunner().invoke(main, ["stat"])
    assert result.exit_code == 2 and "claw: no such command 'stat'; did you mean 'status'?" in result.output


# The console script's program, writing at its end the command modules it imported and which of WATCHED it did (to the
# file its first argument names; claw's own exit work runs on its quick end too).
COMMAND_MODULES_SEEN = textwrap.dedent("""
    import sys
    from clawstore.host import process_end

    out = sys.argv.pop(1)
    WATCHED = ("httpx", "ctypes", "secrets", "clawstore.builder.api", "pydantic", "duckdb",
               "clawstore.store.services.gc", "clawstore.store.services.archive_import", "yaml",
               "clawstore.store.store", "clawstore.project.keeping", "clawstore.builder.engine",
               "clawstore.builder.batching", "importlib.metadata")

    def seen():
        with open(out, "w") as f:
            f.write(" ".join(sorted(m for m in sys.modules if m.startswith("clawstore.cli.") and m.endswith("_cmd"))))
            f.write("".join(f" {m}" for m in WATCHED if m in sys.modules))
            tokenize = sys.modules.get("tokenize")  # (its pattern compiled: some source or text signature tokenized)
            f.write(" tokenized" if tokenize is not None and tokenize._compile.cache_info().currsize else "")

    process_end.at_exit(seen)
    from clawstore.cli import entry
    entry()
""")


@pytest.mark.parametrize("command, module", [(("status",), "status_cmd"), (("build", "--dry-run"), "build_cmd")],
                         ids=["status", "build --dry-run"])
def test_a_command_imports_its_own_module_only(command: tuple[str, ...], module: str, ws: Workspace,  # noqa: F811
                                               tmp_path: Path) -> None:
    assert [m for m in _imported(ws, tmp_path, *command) if m.endswith("_cmd")] == [f"clawstore.cli.{module}"]


@pytest.mark.parametrize("command", [("build", "--dry-run"), ("explain",)], ids=" ".join)
def test_a_dry_run_or_explain_never_imports_what_only_a_build_s_runs_use(command: tuple[str, ...],
                                                                        ws: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # httpx, h11 and the provider client were ~60 ms of their start (the runners package imported its probe eagerly);
    # ctypes (for syncfs and malloc settings) and secrets (hmac, hashlib: for random names) ~7 ms more
    assert not {"httpx", "ctypes", "secrets"} & set(_imported(ws, tmp_path, *command))


def test_a_build_and_the_commands_its_stamp_answers_import_only_what_they_use(ws: Workspace,  # noqa: F811
                                                                              tmp_path: Path) -> None:
    # A build imported gc (builder/api.py, for a lease's name) and the archive import and its verifier
    # (store/untrusted.py, for a kept-apart import's promotion, which a store without one never makes): ~10 ms.
    wait_out_racy_window(ws.root)  # (else the build leaves no stamp, and the commands plan in full: they fail)
    imported = _imported(ws, tmp_path, "build")  # (its stamp: the same program and environment as the commands')
    assert "httpx" in imported  # (it built: its requests were sent)
    assert not {"clawstore.store.services.gc", "clawstore.store.services.archive_import"} & set(imported)
    # A no-op build imported builder/api.py (and the engine, ~50 ms) for the flags' CampaignRequest, and status for
    # fold_windows, before asking the stamp; status imported duckdb (query/manifest.py) for the live builds' leases.
    # Nor the Store: the stamp is a few files (clawstore.store's names were all imported with the package, ~12 ms), and
    # status opens the store for its note on killed builds only when a build left a journal; nor project/keeping.py
    # (gc, pins, archives).
    for command in (("build",), ("status",), ("build", "--dry-run"), ("explain",)):
        imported = _imported(ws, tmp_path, *command)
        assert not {"clawstore.builder.api", "pydantic", "duckdb", "clawstore.store.store",
                    "clawstore.project.keeping"} & set(imported), command


@pytest.mark.parametrize("command", [("status",), ("explain",), ("build", "--dry-run"), ("plan",)], ids=" ".join)
def test_a_command_that_plans_without_a_stamp_imports_no_build_engine_nor_batch_client(
        command: tuple[str, ...], ws: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # Never built (no stamp to answer): the command plans every node. builder/api.py imported the engine (~50 ms of
    # CPU: execution, the build log's writer, progress) for a constant, and status's collect of provider batches
    # imported builder/batching.py, the batch API and httpx (~100 ms) before seeing the store holds no batch; plan
    # imported httpx with runners/tools.py (for its tools' names; httpx only for the web search a run makes).
    imported = set(_imported(ws, tmp_path, *command))
    assert "clawstore.builder.api" in imported  # (it planned: the stamp did not answer)
    assert not {"httpx", "clawstore.builder.engine", "clawstore.builder.batching"} & imported
    # plan read its history through DuckDB (its import, views and two queries: ~0.15 s) from a store with no build
    assert "duckdb" not in imported


def test_a_report_of_a_store_without_batches_imports_no_batch_client(ws: Workspace,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    # Its note on requests pending in provider batches imported builder/batching.py, the batch API and httpx (~40 ms)
    # to read a store that holds no batch.
    _imported(ws, tmp_path, "build")
    assert not {"httpx", "clawstore.builder.batching"} & set(_imported(ws, tmp_path, "report"))


def test_a_push_and_a_pull_by_path_in_a_workspace_without_claw_yaml_import_no_yaml_reader(
        ws: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # remote/config.py imported yaml and the config reader (~15 ms) for a claw.yaml that is not there (a campaign's
    # flags are read from its YAML files: left out here)
    remote = str(tmp_path / "remote")
    _imported(ws, tmp_path, "build")
    assert "yaml" not in _imported(ws, tmp_path, "push", remote, campaign=False)
    assert "yaml" not in _imported(ws, tmp_path, "pull", remote, "--store", str(tmp_path / "pulled"), campaign=False)
    assert (tmp_path / "pulled" / "refs").is_dir()  # (it pulled)


def test_fsck_of_a_store_no_query_indexed_imports_no_duckdb_and_a_report_no_config_model(
        ws: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # (no manifest, nothing of it to check: query/manifest.py and duckdb were ~50 ms of fsck's start)
    _imported(ws, tmp_path, "build")
    assert "duckdb" not in _imported(ws, tmp_path, "fsck", campaign=False)
    # A report reads the flags' ids from their files (config/names.py), the rest from the store; the YAML reader's
    # config/error_text.py imported pydantic (~25 ms) for its validation errors' wording.
    assert "pydantic" not in _imported(ws, tmp_path, "report")
    assert "duckdb" in _imported(ws, tmp_path, "fsck", campaign=False)  # (the report made a manifest: it is checked)


@pytest.mark.parametrize("command, campaign", [(("validate",), False), (("build",), True)], ids=["validate", "build"])
def test_validate_and_a_cold_build_read_no_distribution_s_metadata_nor_a_builtin_s_signature(
        command: tuple[str, ...], campaign: bool, ws: Workspace, tmp_path: Path) -> None:  # noqa: F811
    # A model's first validator: pydantic looked for its plugins in every installed distribution's entry points
    # (importlib.metadata, email, zipfile: ~15 ms of CPU), and read the signature of each `default_factory` (of list
    # and dict: their text signatures tokenized, tokenize's pattern compiled: ~3 ms).
    imported = set(_imported(ws, tmp_path, *command, campaign=campaign))
    assert "pydantic" in imported  # (it validated the workspace)
    assert not {"importlib.metadata", "tokenized"} & imported


def _imported(ws: Workspace, tmp_path: Path, *command: str, campaign: bool = True) -> list[str]:  # noqa: F811
    """What `claw COMMAND` (with the campaign's flags unless not `campaign`) imported."""
    seen = tmp_path / "seen.txt"
    flags = ["--suite", "main", "--run-profile", "rp"] if campaign else []
    done = subprocess.run([sys.executable, "-c", COMMAND_MODULES_SEEN, str(seen), *command, *flags],
                          capture_output=True, text=True, cwd=ws.root, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    return seen.read_text().split()
