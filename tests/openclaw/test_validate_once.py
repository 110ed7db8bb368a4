"""`openclaw config validate` runs once per distinct config, not once per run (runners/openclaw/validated.py): what a
remembered validation is keyed on, that only an accepted one is remembered, and two builds writing one at once. With
the fake container CLI, which records every container it is asked to run."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clawstore.runners.openclaw import agent_workspace_tree, openclaw_identity, run_openclaw
from clawstore.store import Store
from tests.openclaw.conftest import FAKE_IMAGE, KEY_ENV, SECRET, payload

pytestmark = pytest.mark.timeout(120)

VALIDATE = ["openclaw", "config", "validate", "--json"]


def validations(fake_docker) -> int:
    """How many validate containers the engine was asked to run."""
    return sum(1 for call in fake_docker.calls("run") if call["container_argv"] == VALIDATE)


def validated_events(outcome) -> list[dict[str, Any]]:
    return [e["metadata"] for e in outcome.artifact["trace"] if e.get("name") == "config_validated"]


def entries(store: Store) -> list[Path]:
    return sorted((store.root / "validated").glob("*")) if (store.root / "validated").is_dir() else []


def run(make_spec, store: Store, tmp_path: Path, **overrides: Any):
    outcome = run_openclaw(make_spec(**overrides), store, tmp_path)
    assert outcome.status == "success", outcome.artifact["error"]
    return outcome


def test_runs_of_one_agent_model_and_workspace_validate_once(make_spec, fake_docker, store, tmp_path):
    """Two cases for one agent and model: the second run's config, workspace, image and environment are the first's, so
    its validation is the one remembered; its key and every keyed field are the same, only the trace says so."""
    fake_docker.script(turns=[{"payload": payload("done")}])
    first = run(make_spec, store, tmp_path)
    second = run(make_spec, store, tmp_path, case_id="case_two", messages=[{"role": "user", "content": "Other"}])
    assert validations(fake_docker) == 1
    [was] = validated_events(first)
    [now] = validated_events(second)
    assert was["cached"] is False and was["duration_s"] > 0, was
    assert now["cached"] is True and now["validated_duration_s"] == was["duration_s"], now
    steps = [i["step"] for i in second.artifact["runner_metadata"]["openclaw"]["metadata"]["invocations"]]
    assert steps == ["turn1"]
    assert openclaw_identity(make_spec()) == openclaw_identity(make_spec(case_id="case_two"))
    # The one entry: no secret, not even the key's name (only CLAWSTORE_PROVIDER_API_KEY's being set is keyed).
    [entry] = entries(store)
    assert SECRET.encode() not in entry.read_bytes() and KEY_ENV.encode() not in entry.read_bytes()


def test_the_provider_keys_value_is_in_no_validation_key(make_spec, fake_docker, store, tmp_path, monkeypatch):
    """Never a value of the environment: another key of the same name set validates no more (its being set does)."""
    fake_docker.script(turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path)
    monkeypatch.setenv(KEY_ENV, "sk-another-secret-value-9876543210")
    run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 1
    for path in store.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and b"sk-another-secret" not in data, path


def _other_model(make_spec, tmp_path, monkeypatch, store, agent_dir):
    return {"requested_model": "test/other-model"}


def _other_digest(make_spec, tmp_path, monkeypatch, store, agent_dir):
    return {"image_digest": "sha256:" + "cd" * 32}


def _other_workspace_file(make_spec, tmp_path, monkeypatch, store, agent_dir):
    (agent_dir / "workspace" / "notes.txt").write_text("one more file\n")
    return {"agent_tree": agent_workspace_tree(store, agent_dir)}


def _proxy_set(make_spec, tmp_path, monkeypatch, store, agent_dir):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    return {}


def _allowed_variable_set(make_spec, tmp_path, monkeypatch, store, agent_dir):
    monkeypatch.setenv("CLAW_OPENCLAW_ENV_ALLOW", "EXTRA_SETTING")
    monkeypatch.setenv("EXTRA_SETTING", "1")
    return {}


def _long_prompt(make_spec, tmp_path, monkeypatch, store, agent_dir):
    """A prompt past the argv limit is a file in the mounted root (turns/turn_1.txt) before the validate container."""
    return {"messages": [{"role": "user", "content": "x" * 200_000}]}


def _other_user(make_spec, tmp_path, monkeypatch, store, agent_dir):
    monkeypatch.setenv("CLAW_OPENCLAW_USER", "1234:5678")
    return {}


def _other_network(make_spec, tmp_path, monkeypatch, store, agent_dir):
    monkeypatch.setenv("CLAW_OPENCLAW_NETWORK", "container:sidecar")
    return {}


@pytest.mark.parametrize("change", [_other_model, _other_digest, _other_workspace_file, _proxy_set,
                                    _allowed_variable_set, _long_prompt, _other_user, _other_network],
                         ids=lambda f: f.__name__.strip("_"))
def test_anything_the_validate_container_sees_changed_validates_again(make_spec, fake_docker, store, tmp_path,
                                                                      monkeypatch, agent_dir, change):
    fake_docker.script(turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path)
    run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 1
    overrides = change(make_spec, tmp_path, monkeypatch, store, agent_dir)
    changed = run(make_spec, store, tmp_path, **overrides)
    assert validations(fake_docker) == 2
    assert validated_events(changed)[0]["cached"] is False
    run(make_spec, store, tmp_path, **overrides)  # (and that one is remembered in turn)
    assert validations(fake_docker) == 2


def test_no_image_digest_remembers_nothing(make_spec, fake_docker, store, tmp_path, monkeypatch):
    """A tag alone names no content: the image behind it may change between two runs (as it may under
    CLAW_OPENCLAW_PULL=always, the registry's image pulled at each `docker run`, whatever digest was planned)."""
    fake_docker.script(turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path, image_digest=None)
    run(make_spec, store, tmp_path, image_digest=None)
    assert validations(fake_docker) == 2 and entries(store) == []
    with monkeypatch.context() as pulling:
        pulling.setenv("CLAW_OPENCLAW_PULL", "always")
        run(make_spec, store, tmp_path)
        run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 4 and entries(store) == []
    run(make_spec, store, tmp_path)
    run(make_spec, store, tmp_path)  # (with its digest: remembered)
    assert validations(fake_docker) == 5


@pytest.mark.parametrize("refusal", [
    {"validate": {"rc": 1, "stdout": '{"valid":false,"issues":[{"path":"agents.x"}]}'}},
    {"validate": {"sleep": 30}, "timeout_seconds": 2},
    {"run_rc": 125, "run_stderr": "docker: Error response from daemon: OCI runtime create failed\n"},
    {"validate": {"flood": "stdout"}},
], ids=["refused", "timed_out", "engine_refused", "output_flood"])
def test_only_an_accepted_validation_is_remembered(make_spec, fake_docker, store, tmp_path, refusal):
    scenario = {k: v for k, v in refusal.items() if k != "timeout_seconds"}
    fake_docker.script(turns=[{"payload": payload("done")}], **scenario)
    overrides = {"timeout_seconds": refusal["timeout_seconds"]} if "timeout_seconds" in refusal else {}
    failed = run_openclaw(make_spec(**overrides), store, tmp_path)
    assert failed.status != "success" and validated_events(failed) == []
    assert entries(store) == []
    fake_docker.script(turns=[{"payload": payload("done")}])
    before = validations(fake_docker)
    run(make_spec, store, tmp_path)
    assert validations(fake_docker) == before + 1  # validated again, not taken as accepted
    run(make_spec, store, tmp_path)  # (accepted: remembered)
    assert validations(fake_docker) == before + 1
    fake_docker.end_containers()


@pytest.mark.parametrize("body", [b"", b"{", b"garbage\x00", b'{"format":1,"key":"0","valid":true}',
                                  b'{"format":1,"valid":false}', b"[]", b" " * 10_000],
                         ids=["empty", "torn", "garbage", "another_key", "not_valid", "not_an_object", "too_long"])
def test_a_damaged_or_foreign_entry_validates_again_and_is_rewritten(make_spec, fake_docker, store, tmp_path, body):
    fake_docker.script(turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path)
    [entry] = entries(store)
    good = entry.read_bytes()
    entry.write_bytes(body.replace(b'"key":"0"', b'"key":"' + b"0" * 64 + b'"'))
    outcome = run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 2 and validated_events(outcome)[0]["cached"] is False
    assert json.loads(entry.read_bytes())["key"] == json.loads(good)["key"]


RUN = """
import pickle, sys
from pathlib import Path
from clawstore.runners.openclaw import run_openclaw
from clawstore.store import Store
spec, store_dir, workdir = pickle.loads(Path(sys.argv[1]).read_bytes()), sys.argv[2], Path(sys.argv[3])
print(run_openclaw(spec, Store(store_dir), workdir).status)
"""


def test_two_builds_validating_one_config_at_once_leave_one_whole_entry(make_spec, fake_docker, store, tmp_path):
    """Two processes (as two builds on one store) validate the same config at once, each its own container: both
    succeed, they leave one whole entry and no temp file, and a third run validates nothing."""
    fake_docker.script(validate={"stdout": '{"valid":true}', "sleep": 1.5}, turns=[{"payload": payload("done")}])
    spec_file = tmp_path / "spec.pickle"
    spec_file.write_bytes(pickle.dumps(make_spec()))
    builds = []
    for index in range(2):
        workdir = tmp_path / f"work{index}"
        workdir.mkdir()
        builds.append(subprocess.Popen([sys.executable, "-c", RUN, str(spec_file), str(store.root), str(workdir)],
                                       stdout=subprocess.PIPE, text=True, env=dict(os.environ)))
    said = [build.communicate(timeout=90)[0].strip() for build in builds]
    assert said == ["success", "success"]
    assert validations(fake_docker) == 2  # (both looked before either had remembered it)
    [entry] = entries(store)
    assert json.loads(entry.read_bytes())["valid"] is True
    assert list((store.root / "tmp").iterdir()) == []
    third = run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 2 and validated_events(third)[0]["cached"] is True


def test_the_image_digest_not_its_tag_keys_it(make_spec, fake_docker, store, tmp_path):
    """Another tag of the same digest validates again too (the tag is what the container is started with)."""
    fake_docker.script(images={FAKE_IMAGE: {"Id": "sha256:" + "ab" * 32},
                               "example.test/openclaw:other": {"Id": "sha256:" + "ab" * 32}},
                       turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path)
    run(make_spec, store, tmp_path, image="example.test/openclaw:other")
    assert validations(fake_docker) == 2
    run(make_spec, store, tmp_path)
    assert validations(fake_docker) == 2


def test_claw_gc_keeps_what_was_validated_and_fsck_finds_nothing_wrong(make_spec, fake_docker, store, tmp_path):
    """Entries are derived data gc leaves alone (docs/store.md): kept whatever gc deletes (here every object the first
    run stored, no head naming them), as the key reads the mounted root, not the store's objects."""
    from clawstore.store.services.gc import collect

    fake_docker.script(turns=[{"payload": payload("done")}])
    run(make_spec, store, tmp_path)
    collect(store, grace_s=0)
    [entry] = entries(store)
    done = subprocess.run([sys.executable, "-m", "clawstore.cli", "fsck", "--store", str(store.root)],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert done.returncode == 0, done.stdout + done.stderr
    second = run(make_spec, store, tmp_path, agent_tree=agent_workspace_tree(store, make_spec().agent_dir))
    assert validations(fake_docker) == 1 and validated_events(second)[0]["cached"] is True


def test_a_root_entry_it_cannot_key_means_no_key_not_a_failed_run(tmp_path):
    """A pipe, or a name no UTF-8 spells (neither is anything a run writes before its validate): no key, validated as
    before, never an exception out of the run."""
    from clawstore.runners.openclaw.container import EngineSettings
    from clawstore.runners.openclaw.runner import VALIDATE_ARGV
    from clawstore.runners.openclaw.validated import validation_key

    root = tmp_path / "root"
    (root / "workspace").mkdir(parents=True)
    (root / "openclaw.json").write_text("{}")

    def key() -> str | None:
        return validation_key(FAKE_IMAGE, "sha256:" + "ab" * 32, EngineSettings(), VALIDATE_ARGV, {}, root)

    assert key() is not None
    os.mkfifo(root / "workspace" / "pipe")
    assert key() is None
    (root / "workspace" / "pipe").unlink()
    (root / "workspace" / os.fsdecode(b"caf\xe9.txt")).write_text("x")
    assert key() is None
