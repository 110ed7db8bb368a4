"""Remote benchmark: `claw push` / `claw pull` to a loopback S3 server vs a plain parallel transfer.

    python bench/remote_bench.py [--objects 20000] [--size 4096] [--store DIR] [--repeat 3] [--link-mib N]

A store (DIR, e.g. the store of a side-by-side campaign, or a generated one of `--objects` JSON objects
of about `--size` bytes with an action-cache entry each) is pushed to a moto S3 server on 127.0.0.1 and
pulled into an empty store. The baseline moves the very same bytes (the pack files that push sent,
same count, same sizes) with the same client (boto3 upload_file / download_file, 8 threads), measured in
the same run. Throughput ratio = baseline time / claw time (target >= 0.7). Each line also gives the CPU
time this process spent (the server's is its own): where the difference goes.

The plain transfer's own time varies by a third from one try to the next on a small shared machine, so
each is measured `--repeat` times, the plain and the claw transfer taking turns (a fresh bucket and an
empty store each time), and the ratio is of the medians; each round's ratio is printed too.

`--link-mib N` relays every transfer, plain and claw alike, through a link of N MiB/s each way
(bench/_throttle.py): on loopback the server's and claw's CPU set the pace, on a real network the link.

Each round also measures the floor, with no network: the same packs verified alone (BLAKE3 of each file,
every object decoded and hashed) and a whole pull of them from a directory. A pull that overlaps all its
work with the transfer still takes at least that long, so `ceiling` = plain download / max(plain download,
pull from a directory) is the best pull ratio the machine allows at the time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._throttle import throttled  # noqa: E402
from clawstore.builder.cyclic_gc import collector_paused  # noqa: E402
from clawstore.remote.config import Remote  # noqa: E402
from clawstore.remote.pull import pull  # noqa: E402
from clawstore.remote.push import push  # noqa: E402
from clawstore.remote.sync import WORKERS  # noqa: E402
from clawstore.store import Store  # noqa: E402
from clawstore.store.services.transfer import verify_pack  # noqa: E402
from tests.support.s3server import FAKE_CREDENTIALS, make_bucket, s3_server  # noqa: E402


def generate(store: Store, objects: int, size: int) -> None:
    filler = "x" * max(0, size - 120)
    with store.batch():
        for i in range(objects):
            output = store.put_json({"n": i, "answer": f"{i:08d}{filler}{i * 7919 % 100003}"})
            key = store.put_json({"input": i})
            store.put_action(key, {"kind": "run", "key": key, "status": "success", "outputs": {"answer": output}})


class Measured:
    """Wall time and this process's CPU time (all its threads), and the CPU of the processes beside it that stand in
    for the network (`beside`: the S3 server's and the relay's, which share the machine's cores with the transfer)."""

    def __enter__(self) -> Measured:
        self.wall, self.cpu, self.beside = time.perf_counter(), _cpu(), _beside_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, _cpu() - self.cpu
        after = _beside_cpu()
        self.beside = {name: after[name] - self.beside.get(name, 0.0) for name in after}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_BESIDE = {"moto_atomic.py": "S3 server", "_throttle.py": "relay"}  # (a child's script -> what it stands for)


def _beside_cpu() -> dict[str, float]:
    """The CPU seconds so far of this process's children that stand in for the network (Linux's /proc; none
    elsewhere)."""
    found: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():  # (its parent)
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):
            continue
        for script, name in _BESIDE.items():
            if any(arg.endswith(script) for arg in args):
                found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick  # (utime + stime)
    return found


def plain_transfer(client: object, bucket: str, files: list[Path], download_to: Path | None) -> Measured:
    with Measured() as measured, ThreadPoolExecutor(max_workers=WORKERS) as pool:
        if download_to is None:
            list(pool.map(lambda f: client.upload_file(str(f), bucket, f"plain/{f.name}"), files))  # type: ignore[attr-defined]
        else:
            list(pool.map(lambda f: client.download_file(bucket, f"plain/{f.name}",  # type: ignore[attr-defined]
                                                         str(download_to / f.name)), files))
    return measured


def floor(packs: list[Path], capture: Remote, target: Path) -> tuple[Measured, Measured]:
    """The same packs with no network: verified alone, and pulled whole from the directory they were captured in."""
    with Measured() as verified, collector_paused():
        for path in packs:
            verify_pack(path, path.stem, f"pack {path.stem}")
    with Measured() as pulled, collector_paused():
        pull(Store(target), capture)
    shutil.rmtree(target)
    return verified, pulled


def _link(server: str, mib_per_s: float | None) -> AbstractContextManager[str]:
    """The endpoint the transfers use: the server itself, or a relay limited to `mib_per_s`."""
    return nullcontext(server) if mib_per_s is None else throttled(server, mib_per_s * (1 << 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--store", type=Path, default=None, help="push this existing store instead")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of each transfer (medians are compared)")
    parser.add_argument("--link-mib", type=float, default=None,
                        help="relay every transfer through a link of this many MiB/s each way (default: none)")
    args = parser.parse_args()
    if args.link_mib is not None and not args.link_mib > 0:
        parser.error("--link-mib: expected a positive number of MiB/s")
    os.environ.update(FAKE_CREDENTIALS)
    import boto3

    with tempfile.TemporaryDirectory(prefix="claw-remote-bench-") as tmp, s3_server() as server, \
            _link(server, args.link_mib) as endpoint:
        root = Path(tmp)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        source = Store(args.store, create=False) if args.store else Store(root / "source")
        if args.store is None:
            generate(source, args.objects, args.size)
        # The packs push sends, captured on a directory remote: the baseline moves exactly these bytes.
        # (remote names of this run only, forgotten at the end: the source store keeps no trace of them)
        capture = f"bench-capture-{os.getpid()}"
        captured = Remote(capture, str(root / "capture"))
        push(source, captured)
        packs = sorted((root / "capture" / "packs").glob("*.pack"))
        total = sum(f.stat().st_size for f in packs)
        listed = sum(f.stat().st_size for f in (root / "capture" / "packs").glob("*.ids"))  # (claw moves them too)
        client = boto3.client("s3", endpoint_url=endpoint)
        rounds: dict[str, list[tuple[Measured, Measured]]] = {"push": [], "pull": [], "floor": []}
        names = [capture]
        for turn in range(max(1, args.repeat)):
            plain, bucket, name = f"plain{turn}", f"claw{turn}", f"bench-{os.getpid()}-{turn}"
            names.append(name)
            for each in (plain, bucket):
                make_bucket(endpoint, each)
            up_plain = plain_transfer(client, plain, packs, None)
            with Measured() as up_claw, collector_paused():  # as `claw push` and `claw pull` run them
                pushed = push(source, Remote(name, f"s3://{bucket}/bench"))
            down = root / f"down{turn}"
            down.mkdir()
            down_plain = plain_transfer(client, plain, packs, down)
            target = Store(root / f"target{turn}")
            with Measured() as down_claw, collector_paused():
                pull(target, Remote(name, f"s3://{bucket}/bench"))
            assert sum(1 for _ in target.iter_objects()) == sum(1 for _ in source.iter_objects())
            shutil.rmtree(down)
            shutil.rmtree(target.root)
            rounds["push"].append((up_claw, up_plain))
            rounds["pull"].append((down_claw, down_plain))
            rounds["floor"].append(floor(packs, captured, root / f"local{turn}"))
        for name in names:  # its listing cache, and the tracking refs its pushes left
            shutil.rmtree(source.root / "remotes" / name, ignore_errors=True)
            for ref in source.list_refs(f"remotes/{name}/"):
                source.delete_ref(ref)
        mib = total / (1 << 20)
        print(json.dumps({"objects": pushed.objects, "packs": len(packs), "bytes": total, "listing_bytes": listed,
                          "rounds": len(rounds["push"])}))
        for what, plain_what in (("push", "upload"), ("pull", "download")):
            mine = statistics.median(claw.wall for claw, _ in rounds[what])
            plain = statistics.median(base.wall for _, base in rounds[what])
            cpu = statistics.median(claw.cpu for claw, _ in rounds[what])
            plain_cpu = statistics.median(base.cpu for _, base in rounds[what])
            each = ", ".join(f"{base.wall / claw.wall:.2f}x" for claw, base in rounds[what])
            print(f"{what}: claw {mine:.2f} s ({mib / mine:.1f} MiB/s, {cpu:.2f} s CPU) vs plain parallel "
                  f"{plain_what} {plain:.2f} s ({mib / plain:.1f} MiB/s, {plain_cpu:.2f} s CPU), medians: "
                  f"throughput {plain / mine:.2f}x (rounds: {each})")
            beside = [f"{name} {statistics.median(m.beside.get(name, 0.0) for m in side):.2f} s ({who})"
                      for who, side in (("claw", [claw for claw, _ in rounds[what]]),
                                        ("plain", [base for _, base in rounds[what]]))
                      for name in sorted({name for m in side for name in m.beside})]
            if beside:  # (what the two cores' other processes took meanwhile: the room a second core leaves)
                print(f"  beside it, CPU (medians): {', '.join(beside)}")
        verify = statistics.median(verified.wall for verified, _ in rounds["floor"])
        local = statistics.median(pulled.wall for _, pulled in rounds["floor"])
        download = statistics.median(base.wall for _, base in rounds["pull"])
        print(f"floor, no network: verify alone {verify:.2f} s ({mib / verify:.1f} MiB/s, "
              f"{statistics.median(v.cpu for v, _ in rounds['floor']):.2f} s CPU), pull from a directory {local:.2f} s "
              f"({mib / local:.1f} MiB/s, {statistics.median(p.cpu for _, p in rounds['floor']):.2f} s CPU), medians: "
              f"ceiling {download / max(download, local):.2f}x")
        if args.link_mib is not None:  # the listings cross the link too: a transfer of no cost beyond it is this fast
            extra = listed / (args.link_mib * (1 << 20))
            upload = statistics.median(base.wall for _, base in rounds["push"])
            print(f"link: the packs' listings add {listed / (1 << 20):.2f} MiB ({100 * listed / total:.0f} % of the "
                  f"packs' bytes, {extra:.2f} s at {args.link_mib:g} MiB/s), which the plain transfer does not move: "
                  f"ceiling {upload / (upload + extra):.2f}x (push), {download / (download + extra):.2f}x (pull)")


if __name__ == "__main__":
    main()
