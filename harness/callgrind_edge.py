"""Server instructions per request under valgrind's callgrind: the A/B instrument of a busy box.

    python -m harness.callgrind_edge [--only TEXT ...] [--requests 40] [--warmup 30]
                                     [--python PYTHON] [--out-dir DIR]

Starts the floor (``harness.floor_app``) and the CLI (``expert-booking-mcp serve`` of this
environment, or of ``--python``'s) under ``valgrind --tool=callgrind``, each on a fresh seed
database, and sends the benchmark's requests (``harness.bench.CONFIGS``, read tools and the
hold replay) one at a time over a keep-alive socket: per configuration ``--warmup`` requests,
then ``callgrind_control --zero``, ``--requests`` requests, ``callgrind_control --dump``. The
figure is the server process's instructions (every thread: the store's worker too) between
the two, divided by the requests. The load generator runs natively and is not counted; the
requests are stamped by :class:`~harness.loadgen.RawHttpClient` as in the benchmark.

Instruction counts do not depend on other tenants, so this is the instrument when the box is
loaded: ~1% run to run on the event loop's work, up to ±13% where the store's worker thread
runs (aiosqlite's worker polls its queue with a timeout, and valgrind runs one thread at a
time). The dumps stay in ``--out-dir`` for ``callgrind_annotate`` (``--inclusive=yes``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from expert_booking.testing.server_process import SERVE_COMMAND, ServerProcess
from harness.bench import CONFIGS, FULL, Bench, Config
from harness.loadgen import RawHttpClient, send
from harness.mcp_calls import hold_arguments, logical
from harness.serve_controlled import harness_server

_VALGRIND = ("valgrind", "--tool=callgrind", "--dump-instr=no", "--collect-jumps=no")
_START_SECONDS = 600.0  # importing everything under callgrind takes a minute or more here
_TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def _valgrind_server(command: list[str], db: Path, out_dir: Path, name: str) -> ServerProcess:
    prefix = [*_VALGRIND, f"--callgrind-out-file={out_dir}/{name}.%p"]
    # Under valgrind on a busy box an idle connection outlives the 5 s keep-alive while another
    # server is measured; the run then failed with IncompleteReadError.
    env = {**os.environ, "HOLD_TTL_SECONDS": "3600", "HTTP_KEEP_ALIVE_SECONDS": "3600"}
    return harness_server(
        [*prefix, *command], db_path=db, env=env, keep_stderr=False, start_seconds=_START_SECONDS
    )


def _control(pid: int, *flags: str) -> None:
    subprocess.run(["callgrind_control", *flags, str(pid)], check=True, capture_output=True)


def _instructions(out_dir: Path, name: str, pid: int, seen: set[Path]) -> int:
    """Instructions in the newest dump of ``name``'s server (one not read before)."""
    dumps = sorted(set(out_dir.glob(f"{name}.{pid}.*")) - seen, key=lambda p: p.stat().st_mtime)
    if not dumps:
        msg = f"callgrind wrote no new dump for {name} (pid {pid})"
        raise RuntimeError(msg)
    seen.update(dumps)
    match = _TOTALS.search(dumps[-1].read_bytes())
    if match is None:
        msg = f"no totals in {dumps[-1]}"
        raise RuntimeError(msg)
    return int(match[1])


async def _measure(
    client: RawHttpClient,
    server: ServerProcess,
    config: Config,
    *,
    bench: Bench,
    args: argparse.Namespace,
    seen: set[Path],
) -> float:
    assert config.make is not None
    for _ in range(args.warmup):
        await _checked(client, server.url, config, bench)
    await asyncio.to_thread(_control, server.pid, "--zero")
    for _ in range(args.requests):
        await _checked(client, server.url, config, bench)
    await asyncio.to_thread(_control, server.pid, "--dump")
    requests: int = args.requests
    return _instructions(args.out_dir, config.server, server.pid, seen) / requests


async def _checked(client: RawHttpClient, url: str, config: Config, bench: Bench) -> None:
    assert config.make is not None
    reply = await send(client, url, config.make(bench))
    failure = config.check(0, reply)
    if failure is not None:
        msg = f"{config.name}: {failure}"
        raise RuntimeError(msg)


async def run(args: argparse.Namespace) -> dict[str, float]:
    configs = [
        c
        for c in CONFIGS
        if c.kind in ("floor", "read")
        and (c.kind == "floor" or not args.only or any(t in c.name for t in args.only))
    ]
    cli = list(SERVE_COMMAND) if args.python is None else [args.python, *SERVE_COMMAND[1:]]
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp_name:
        tmp = Path(tmp_name)
        servers = {
            "floor": _valgrind_server(
                [sys.executable, "-m", "harness.floor_app"], tmp / "floor.db", args.out_dir, "floor"
            ),
            "real": _valgrind_server(cli, tmp / "seed.db", args.out_dir, "real"),
        }
        try:
            for server in servers.values():
                server.launch()
            for server in servers.values():
                server.wait_ready()
            seen: set[Path] = set()
            async with RawHttpClient(timeout_s=120) as client:
                replayed = hold_arguments("slot-law-002")
                seed = await send(
                    client, servers["real"].url, logical("booking.hold_slot", replayed)
                )
                bench = Bench(
                    plan=FULL,
                    urls={},
                    pids={},
                    clients={},
                    stub=None,  # type: ignore[arg-type]  # the read tools never pay
                    get_booking_id=seed.envelope["data"]["bookingId"],
                    replayed_hold=replayed,
                )
                for config in configs:
                    server = servers[config.server]
                    per_request = await _measure(
                        client, server, config, bench=bench, args=args, seen=seen
                    )
                    figures[config.name] = per_request
                    print(f"{config.name:<36} {per_request / 1e6:6.3f}M", flush=True)
        finally:
            for server in servers.values():
                server.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.callgrind_edge", description=__doc__)
    parser.add_argument("--only", action="append", help="configurations whose name has TEXT")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--python", help="the CLI of another venv's interpreter (a baseline)")
    parser.add_argument("--out-dir", type=Path, help="where the dumps go (default: a temp dir)")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind (callgrind_control) is not installed", file=sys.stderr)
        return 2
    keep = args.out_dir is not None
    if not keep:
        args.out_dir = Path(tempfile.mkdtemp(prefix="callgrind-out-"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = asyncio.run(run(args))
    floor = figures.get("floor noop tools/call")
    if floor:
        for name, value in figures.items():
            print(f"{name:<36} {value / floor:5.2f}x floor")
    if not keep:
        shutil.rmtree(args.out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
