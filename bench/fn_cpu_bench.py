"""Where a cold build's CPU goes, by function: each chosen function's calls, their thread CPU (user + system of the
calling thread, `time.thread_time`) summed over every thread, and each thread's own CPU. Not a sampler: py-spy's
`--gil` under-counts the worker threads, which hand the interpreter lock back at every system call, and a
deterministic profiler inflates call-heavy code; this times only the functions named, inclusive (a call inside an
outer call of the same function counts once). A wrapped call costs ~2 us more: a few tenths of a second of a build.

Usage: python bench/fn_cpu_bench.py [--cases 400 --models 4] [--tree PATH] [--function module:Qual.name ...]

A campaign generated as growth_bench makes it is built cold (a fresh store) by `claw` of `--tree` (this checkout by
default) against the stand-in, in a child process with a `sitecustomize` on its path that wraps the functions.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import instrumented_build  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402

FUNCTIONS = (  # by layer: the exchange, the nodes, the store, claims, recording, the build's start and end
    "clawstore.providers.client:ProviderClient.chat", "clawstore.providers.wire:Wire.send",
    "clawstore.providers.client:_interpret",
    "clawstore.builder.run_exec:record_run", "clawstore.builder.eval_layer:EvalLayer.judge_request",
    "clawstore.builder.eval_layer:EvalLayer.record_judgement", "clawstore.builder.eval_layer:EvalLayer._exec_checks",
    "clawstore.builder.eval_layer:EvalLayer._exec_result", "clawstore.evaluate.redact:redact_value",
    "clawstore.store.core.objects:ObjectStore.put_bytes", "clawstore.store.core.codec:encode",
    "clawstore.store.core.objects:ObjectStore.get_bytes", "clawstore.store.store:Store.put_action",
    "clawstore.graph.plan:put_input", "clawstore.values.canonical:canonical_json",
    "clawstore.graph.records:make_record",
    "clawstore.store.claims:ClaimBoard.take", "clawstore.store.claims:ClaimBoard.release",
    "clawstore.builder.claimed:stored_meanwhile", "clawstore.builder.buildlog:BuildLog.add",
    "clawstore.builder.progress:BuildProgress.finished", "clawstore.store.core.batch:GroupCommitter.flush",
    "clawstore.builder.buildlog:BuildLog.advance_head", "clawstore.builder.api:load_campaign",
)

# Run by the build's interpreter at start-up (a `sitecustomize` module): wraps FN_CPU_FUNCTIONS, writes FN_CPU_OUT.
_SITE = '''
import atexit, collections, importlib, json, os, resource, sys, threading, time

def _install(specs, out):
    spent, calls, threads = collections.Counter(), collections.Counter(), collections.Counter()
    lock, local = threading.Lock(), threading.local()

    def wrap(name, fn):
        def timed(*args, **kwargs):
            if getattr(local, name, False):  # inside an outer call of the same function: counted there
                return fn(*args, **kwargs)
            setattr(local, name, True)
            began = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.thread_time() - began
                setattr(local, name, False)
                with lock:
                    spent[name] += took
                    calls[name] += 1
        timed.__wrapped__ = fn
        return timed

    swaps = {}  # original function -> its wrapper (names other modules imported are rebound too)
    for spec in specs:
        module_name, _, qualname = spec.partition(":")
        owner = importlib.import_module(module_name)
        *outer, name = qualname.split(".")
        for part in outer:
            owner = getattr(owner, part)
        raw = owner.__dict__[name]
        kind = type(raw) if isinstance(raw, (classmethod, staticmethod)) else None
        fn = raw.__func__ if kind else raw
        timed = wrap(qualname, fn)
        setattr(owner, name, kind(timed) if kind else timed)
        swaps[id(fn)] = (fn, timed)
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", {})
        for key, value in list(names.items()):
            if id(value) in swaps and swaps[id(value)][0] is value:
                names[key] = swaps[id(value)][1]

    run = threading.Thread.run

    def counted_run(self):
        try:
            run(self)
        finally:
            with lock:
                threads[self.name.rsplit("-", 1)[0] if self.name.startswith("Thread-") else self.name] += \\
                    time.thread_time()
    threading.Thread.run = counted_run

    def write():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        threads["MainThread"] += time.thread_time()
        with open(out, "w") as handle:
            json.dump({"cpu": usage.ru_utime + usage.ru_stime, "threads": threads, "spent": spent, "calls": calls},
                      handle)
    atexit.register(write)

if os.environ.get("FN_CPU_OUT"):
    _install(os.environ["FN_CPU_FUNCTIONS"].split(","), os.environ["FN_CPU_OUT"])
'''


def _unknown(spec: str) -> str | None:
    """Why `spec` names no function of this checkout (None: it does)."""
    module_name, _, qualname = spec.partition(":")
    if not module_name or not qualname:
        return "expected MODULE:QUALNAME"
    try:
        owner = importlib.import_module(module_name)
    except ImportError as exc:
        return f"no module {module_name} ({exc})"
    for part in qualname.split("."):
        if part not in getattr(owner, "__dict__", {}):
            return f"{module_name} has no {qualname}"
        owner = owner.__dict__[part]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose claw builds (default: this one)")
    parser.add_argument("--function", action="append", metavar="MODULE:QUALNAME",
                        help="a function to time (repeatable; default: one or more of each layer)")
    args = parser.parse_args()
    functions = args.function or list(FUNCTIONS)
    for spec in functions:
        problem = _unknown(spec)
        if problem:
            print(f"bench/fn_cpu_bench.py: --function {spec!r}: {problem}", file=sys.stderr)
            sys.exit(2)
    requests, found = instrumented_build("bench/fn_cpu_bench.py", args.tree, _SITE, "FN_CPU_OUT",
                                         {"FN_CPU_FUNCTIONS": ",".join(functions)}, args.cases, args.models,
                                         judge_reply(7))
    print(f"{args.cases} x {args.models}: {requests} requests; the build's CPU {found['cpu']:.2f} s "
          f"({found['cpu'] / requests * 1000:.2f} ms a request); threads: "
          + ", ".join(f"{name} {cpu:.2f} s" for name, cpu in sorted(found["threads"].items(), key=lambda i: -i[1])))
    print(f"{'function (inclusive)':56} {'calls':>7} {'us a call':>10} {'s':>7} {'ms a request':>13}")
    for name, spent in sorted(found["spent"].items(), key=lambda item: -item[1]):
        calls = found["calls"][name]
        print(f"{name:56} {calls:>7} {spent / calls * 1e6:>10.1f} {spent:>7.3f} {spent / requests * 1000:>13.3f}")


if __name__ == "__main__":
    main()
