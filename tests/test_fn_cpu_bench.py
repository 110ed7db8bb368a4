"""bench/fn_cpu_bench.py counts each call of the functions it names, in every thread and under every name a module
imported it by; a name it cannot find is refused before anything is built."""

from __future__ import annotations

from pathlib import Path

from tests.support.benchrun import run_bench

# The store's module first: it imports canonical_json by name before canonical_json is wrapped.
FUNCTIONS = ("clawstore.store.core.objects:ObjectStore.put_bytes", "clawstore.values.canonical:canonical_json",
             "clawstore.providers.client:ProviderClient.chat")


def _calls(stdout: str) -> dict[str, int]:
    table = stdout.split("ms a request\n", 1)[1]
    return {line.split()[0]: int(line.split()[1]) for line in table.splitlines() if line.strip()}


def test_every_call_counted_in_every_thread(tmp_path: Path) -> None:
    args = ["--cases", "2", "--models", "1"] + [arg for name in FUNCTIONS for arg in ("--function", name)]
    proc = run_bench("fn_cpu_bench", args, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "4 requests" in proc.stdout
    calls = _calls(proc.stdout)
    assert calls["ProviderClient.chat"] == 4  # two runs and two judgements, on the worker threads
    # Records, documents and artifacts: most puts are canonical JSON, encoded under the name the store imported.
    assert calls["canonical_json"] >= 0.75 * calls["ObjectStore.put_bytes"] > 0


def test_an_unknown_function_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_bench("fn_cpu_bench", ["--function", "clawstore.values.canonical:nothing"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("bench/fn_cpu_bench.py: --function 'clawstore.values.canonical:nothing': "
                                   "clawstore.values.canonical has no nothing")
    assert not proc.stdout
