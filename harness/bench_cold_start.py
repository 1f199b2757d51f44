"""Cold start: spawns of the CLI to its ready line, beside the stack's bare import time."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.bench_report import COLD_START_MAX_S
from harness.bench_servers import SERVER_CPU, cli_server, pin_to
from harness.loadgen import jsonrpc_ok, make_http_client, send
from harness.mcp_calls import tools_list

# Timed until its line, as the server is timed until its ready line (not to interpreter exit).
IMPORT_FLOOR_COMMAND = (
    sys.executable,
    "-c",
    (
        "import mcp.server.lowlevel, litestar, uvicorn, httpx, aiosqlite, os;"
        "print('imported', flush=True); os._exit(0)"
    ),
)


def cold_start(spawns: int, env: dict[str, str], *, pin: bool) -> dict[str, Any]:
    """Spawn the CLI ``spawns`` times on a fresh database: Popen -> ready line -> tools/list.

    Interleaved with each spawn, the stack's import floor (perf-floor section 5: a fresh
    interpreter importing the SDK, Litestar, uvicorn, httpx and aiosqlite, timed to a line it
    prints afterwards, as the server is timed to its ready line), so the figure can be judged
    against what this box costs at the moment of the run.

    Both run with warm bytecode, as perf-floor section 5 measures and as the README's
    ``pip install`` leaves an install (pip compiles every module): one unmeasured spawn of each
    first, with ``PYTHONDONTWRITEBYTECODE`` dropped so that spawn writes the ``.pyc`` files a
    ``uv``-built nox environment lacks. Its time is reported as ``first_spawn_s``: a cold
    (compiling) start only in a fresh environment, a warm one afterwards. Figures from before
    this warm-up (2026-11-30) were taken without ``.pyc`` files and are not comparable.
    """
    env = {name: value for name, value in env.items() if name != "PYTHONDONTWRITEBYTECODE"}
    pin = pin and pin_to(SERVER_CPU) is not None
    _import_floor_s(env, pin=pin)
    first_spawn = _ready_s(env, pin=pin)[0]
    ready: list[float] = []
    first_response: list[float] = []
    import_floor: list[float] = []
    for _ in range(spawns):
        import_floor.append(_import_floor_s(env, pin=pin))
        ready_s, list_s = _ready_s(env, pin=pin)
        ready.append(ready_s)
        first_response.append(ready_s + list_s)
    return {
        "spawns": spawns,
        "ready_s_median": statistics.median(ready),
        "ready_s_all": [round(value, 3) for value in ready],
        "first_tools_list_s_median": statistics.median(first_response),
        "stack_import_floor_s_median": statistics.median(import_floor),
        "first_spawn_s": round(first_spawn, 3),
        "target_s": COLD_START_MAX_S,
        "pass": statistics.median(ready) <= COLD_START_MAX_S,
    }


def _ready_s(env: dict[str, str], *, pin: bool) -> tuple[float, float]:
    """One CLI spawn on a fresh database: seconds to its ready line, then to a tools/list."""
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        started = time.perf_counter()
        with cli_server(Path(tmp) / "cold.db", env, pin=pin) as server:
            ready = time.perf_counter() - started
            return ready, asyncio.run(_first_list(server.url))


def _import_floor_s(env: dict[str, str], *, pin: bool) -> float:
    """Seconds from spawning ``IMPORT_FLOOR_COMMAND`` to its line on stdout.

    Pinned to the server CPU right after the spawn (no ``preexec_fn``: this runs beside
    threads), so at most the interpreter's first instructions run elsewhere.
    """
    started = time.perf_counter()
    with subprocess.Popen(IMPORT_FLOOR_COMMAND, stdout=subprocess.PIPE, env=env) as child:
        if pin:
            os.sched_setaffinity(child.pid, {SERVER_CPU})
        assert child.stdout is not None
        line = child.stdout.readline()
        elapsed = time.perf_counter() - started
    if line.strip() != b"imported" or child.returncode != 0:
        msg = f"the import floor command failed (exit {child.returncode})"
        raise RuntimeError(msg)
    return elapsed


async def _first_list(url: str) -> float:
    started = time.perf_counter()
    async with make_http_client(connections=1) as client:
        reply = await send(client, url, tools_list())
    assert jsonrpc_ok(0, reply) is None, reply.message
    return time.perf_counter() - started
