"""Options shared by several commands."""

from __future__ import annotations

import os
from pathlib import Path

import click

store_option = click.option(
    "--store",
    "store_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Store directory (default: $CLAW_STORE, else store/ in the workspace root).",
)


def campaign_options(func):
    """--suite/--run-profile/--evaluation-profile (+ --case/--model filters) and --root."""
    options = [
        click.option("--suite", "suite", required=True, help="Suite ID or path to its YAML."),
        click.option("--run-profile", "run_profile", required=True, help="Run profile ID or path."),
        click.option("--evaluation-profile", "evaluation_profile", default=None,
                     help="Evaluation profile ID or path."),
        click.option("--case", "cases", multiple=True, help="Only this case (repeatable)."),
        click.option("--model", "models", multiple=True, help="Only this model_id (repeatable)."),
        store_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def resolve_store_dir(store_dir: Path | None, workspace_root: Path | None = None) -> Path:
    """--store wins, then $CLAW_STORE, then store/ in the workspace root (or the cwd)."""
    if store_dir is not None:
        return store_dir
    env = os.environ.get("CLAW_STORE")
    if env:
        return Path(env)
    return (workspace_root or Path.cwd()) / "store"
