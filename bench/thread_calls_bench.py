"""A cold build's threads and the system calls each makes: each thread's user and system time and its context
switches (its `getrusage(RUSAGE_THREAD)` as it ends, the workers added up), and the calls made through the `os`
module (stat, link, pread, pwritev, listdir, ...) counted by thread and by the first clawstore frames that made them.
Not counted: a file object's or a socket's own reads and writes, and the futex calls of the interpreter lock (`perf
record -e raw_syscalls:sys_enter` counts every call: docs/scale/building.md, Session 57).

Usage: python bench/thread_calls_bench.py [--cases 400 --models 4] [--tree PATH] [--top 25]

A campaign generated as growth_bench makes it is built cold (a fresh store) by `claw` of `--tree` (this checkout by
default) against the stand-in, in a child process with a `sitecustomize` on its path that does the counting.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._workspace import instrumented_build  # noqa: E402
from bench.eval_bench import judge_reply  # noqa: E402

OS_CALLS = ("stat", "lstat", "fstat", "scandir", "listdir", "open", "close", "read", "write", "pread", "pwrite",
            "pwritev", "lseek", "link", "unlink", "rename", "replace", "mkdir", "fsync", "ftruncate", "urandom")

# Run by the build's interpreter at start-up (a `sitecustomize` module): counts, then writes THREAD_CALLS_OUT.
_SITE = '''
import atexit, collections, json, os, resource, sys, threading

def _install(names, out):
    calls = collections.Counter()
    usage = collections.defaultdict(lambda: [0, 0.0, 0.0, 0, 0])  # threads, user, system, voluntary, involuntary
    lock = threading.Lock()

    def group(name):
        return name.rsplit("-", 1)[0] if name.startswith("Thread-") else name

    def where():
        frame, chain = sys._getframe(2), []
        while frame is not None and len(chain) < 3:
            path = frame.f_code.co_filename
            if "clawstore" in path:
                chain.append(path.rsplit("clawstore/", 1)[-1] + ":" + frame.f_code.co_name)
            frame = frame.f_back
        return " < ".join(chain) or "(outside clawstore)"

    def wrap(name, real):
        def counted(*args, **kwargs):
            key = (name, group(threading.current_thread().name), where())
            calls[key] += 1  # (a Counter's += under the interpreter lock: a lost count at most)
            return real(*args, **kwargs)
        return counted

    for name in names:
        if hasattr(os, name):
            setattr(os, name, wrap(name, getattr(os, name)))

    def note(name):
        got = resource.getrusage(resource.RUSAGE_THREAD)
        with lock:
            row = usage[group(name)]
            row[0] += 1
            row[1] += got.ru_utime
            row[2] += got.ru_stime
            row[3] += got.ru_nvcsw
            row[4] += got.ru_nivcsw

    boot = threading.Thread._bootstrap_inner

    def counted_boot(self):
        try:
            boot(self)
        finally:
            note(self.name)
    threading.Thread._bootstrap_inner = counted_boot

    def write():
        note("MainThread")
        with open(out, "w") as handle:
            json.dump({"threads": usage, "calls": [[*key, n] for key, n in calls.items()]}, handle)
    atexit.register(write)

if os.environ.get("THREAD_CALLS_OUT"):
    _install(os.environ["THREAD_CALLS_NAMES"].split(","), os.environ["THREAD_CALLS_OUT"])
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the checkout whose claw builds (default: this one)")
    parser.add_argument("--top", type=int, default=25, help="call sites printed, most frequent first")
    args = parser.parse_args()
    requests, found = instrumented_build("bench/thread_calls_bench.py", args.tree, _SITE, "THREAD_CALLS_OUT",
                                         {"THREAD_CALLS_NAMES": ",".join(OS_CALLS)}, args.cases, args.models,
                                         judge_reply(7))
    per = 1000 / requests
    print(f"{args.cases} x {args.models}: {requests} requests; per request, by thread (workers added up):")
    print(f"{'thread':20} {'threads':>7} {'user ms':>8} {'system ms':>9} {'voluntary':>9} {'involuntary':>11}")
    for name, (threads, user, system, voluntary, involuntary) in sorted(found["threads"].items(),
                                                                         key=lambda item: -item[1][1]):
        print(f"{name:20} {threads:>7} {user * per:>8.3f} {system * per:>9.3f} {voluntary / requests:>9.2f} "
              f"{involuntary / requests:>11.2f}")
    print(f"calls through os, a request (the {args.top} most frequent call sites):")
    for call, thread, where, n in sorted(found["calls"], key=lambda row: -row[3])[:args.top]:
        print(f"{n / requests:7.3f}  {call:10} {thread:18} {where}")


if __name__ == "__main__":
    main()
