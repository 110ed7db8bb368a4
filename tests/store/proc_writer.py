"""Crash-test writer: puts small and large objects (plain, batched, with action records) forever,
printing each id only after the call that stored it has returned. The test SIGKILLs it at random.
With `group`, it writes inside a group commit that never commits by itself (as a build between two
windows): what it prints is in the packs but named by no index segment until a later process adopts it."""

from __future__ import annotations

import os
import random
import sys

from clawstore.store import Store


def main() -> None:
    store, rnd = Store(sys.argv[1]), random.Random(int(sys.argv[2]))
    held = store.lease("build proc_writer")  # held till the kill when asked for: like a build
    if "lease" in sys.argv[3:]:
        held.__enter__()
    group = store.group_commit(window_s=3600, max_batches=1 << 30)  # (a reference: kept open till the kill)
    if "group" in sys.argv[3:]:
        group.__enter__()
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    step = 0
    while True:
        step += 1
        kind = rnd.random()
        if kind < 0.45:  # small object, durable on return
            data = os.urandom(rnd.randint(0, 4096)) if rnd.random() < 0.5 else (b"small %d " % step) * 300
            out.write(f"obj {store.put_bytes(data)}\n")
        elif kind < 0.65:  # large object (streams in chunks; compressible or raw)
            size = rnd.randint(1 << 20, 3 << 20)
            data = os.urandom(size) if rnd.random() < 0.5 else (b"%d large json-ish line\n" % step) * (size // 24)
            out.write(f"obj {store.put_bytes(data)}\n")
        else:  # a build's burst: outputs + record + action entry in one batch
            with store.batch():
                outputs = [store.put_bytes(os.urandom(rnd.randint(10, 3000))) for _ in range(rnd.randint(1, 30))]
                key = store.put_json({"step": step, "seed": sys.argv[2]})
                record = store.put_action(key, {"kind": "run", "key": key, "outputs": {"files": outputs}})
            for oid in outputs:
                out.write(f"obj {oid}\n")
            out.write(f"action {key} {record}\n")
        out.flush()


if __name__ == "__main__":
    main()
