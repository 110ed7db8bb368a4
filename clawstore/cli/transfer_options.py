"""Options `claw push`, `claw pull` and `claw remote` share: the endpoint, the progress display, the refs to move."""

from __future__ import annotations

from pathlib import Path

import click

from clawstore.remote.progress import MODES

ENDPOINT = click.option("--endpoint-url", "endpoint_url", default=None,
                        help="S3 endpoint (default: $AWS_ENDPOINT_URL, else AWS).")
PROGRESS = click.option("--progress", "progress", type=click.Choice(MODES),
                        default="auto", show_default=True,
                        help="Show the packs moving on stderr: live bar (auto: on a terminal), plain lines, none.")
NARROW = [
    click.option("--suite", "suite", default=None, help="Only this campaign's head (with --run-profile)."),
    click.option("--run-profile", "run_profile", default=None, help="Run profile of that campaign."),
    click.option("--evaluation-profile", "evaluation_profile", default=None, help="Evaluation profile of it."),
    click.option("--pin", "pin", default=None, help="Only this pin."),
]


def workspace() -> Path:
    """Where claw.yaml lives: the workspace root above the cwd, else the cwd."""
    from clawstore.config import find_workspace_root
    from clawstore.errors import UsageError

    try:
        return find_workspace_root(Path.cwd())
    except UsageError:
        return Path.cwd()


def narrow(func):  # type: ignore[no-untyped-def]
    for option in reversed(NARROW):
        func = option(func)
    return func


def ref_names(suite: str | None, run_profile: str | None, evaluation_profile: str | None,
              pin: str | None) -> list[str] | None:
    """The refs a narrowed push or pull moves (None: every campaign head and pin)."""
    from clawstore.errors import UsageError

    if suite is None and run_profile is None and evaluation_profile is None and pin is None:
        return None
    names = []
    if suite or run_profile or evaluation_profile:
        if not (suite and run_profile):
            raise UsageError("--suite and --run-profile name a campaign together")
        from clawstore.config.names import campaign_ids

        names.append("campaigns/" + campaign_ids(Path.cwd(), suite, run_profile, evaluation_profile).campaign_id)
    if pin:
        names.append("pins/" + pin)
    return names
