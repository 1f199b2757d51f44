"""Serve the REAL app with a test-controlled clock, in a child process; plus the parent's spawner.

Child side (runs inside the spawned process)::

    python -m harness.serve_controlled --db PATH --port 0 --clock-offset-file F [--host H]

builds ``bootstrap.build_asgi_app(Settings.from_env() + flags, clock=OffsetFileClock(F))``
and serves it exactly like ``expert-booking-mcp serve`` (uvloop + httptools, access log off,
``gc.freeze()`` after startup, ready line ``MCP endpoint: http://H:P/mcp`` on stderr). Nothing
is monkeypatched: the only difference from the CLI is the injected clock, whose offset the test
moves with ``harness.clock.write_offset`` (no sleeps). Settings come from the environment the
parent passes (``HOLD_TTL_SECONDS``, ``PAYMENT_QUERY_BASE_URL``, ...).

Parent side: :class:`ChildServer` spawns any command that prints that ready line, waits for it
with a deadline, and stops (SIGTERM) or kills (SIGKILL, a crash) exactly that child.
:func:`controlled_server` is the spawner for this module.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import importlib.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import uvicorn

from expert_booking.testing.server_process import READY_LINE

ROOT = Path(__file__).resolve().parent.parent
GRACEFUL_SHUTDOWN_SECONDS = 10


# --------------------------------------------------------------------------------------------
# child side


class AnnouncingServer(uvicorn.Server):
    """uvicorn that freezes the startup heap and prints the CLI's ready line once it listens."""

    async def startup(self, sockets: list[Any] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        port = self.servers[0].sockets[0].getsockname()[1]
        gc.collect()
        gc.freeze()
        print(f"MCP endpoint: http://{self.config.host}:{port}/mcp", file=sys.stderr, flush=True)


def serve_like_cli(app: Any, *, host: str, port: int) -> None:
    """Serve ``app`` with the uvicorn settings of ``expert_booking.__main__`` (keep in sync)."""
    from expert_booking.edge.observability import configure_logging

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    configure_logging(sys.stderr)  # after uvicorn.Config, which applies its logging dictConfig
    AnnouncingServer(config).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.serve_controlled")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--clock-offset-file", type=Path, required=True)
    args = parser.parse_args(argv)

    from expert_booking.bootstrap import build_asgi_app
    from expert_booking.settings import Settings
    from harness.clock import OffsetFileClock

    settings = Settings.from_env().with_overrides(host=args.host, port=args.port, db_path=args.db)
    app = build_asgi_app(settings, clock=OffsetFileClock(args.clock_offset_file))
    serve_like_cli(app, host=settings.host, port=settings.port)
    return 0


# --------------------------------------------------------------------------------------------
# parent side


class ChildServerError(RuntimeError):
    """The child exited or printed no ready line in time; the message holds its stderr."""


class ChildServer:
    """A child process that prints ``MCP endpoint: http://H:P/mcp`` on stderr when ready.

    Stderr is read by a thread into :attr:`stderr_lines`; with ``keep_stderr=False`` only the
    lines up to the ready line are kept and the rest is drained in large chunks and dropped (a
    benchmark must not spend its CPU on the server's log). ``stop()`` sends SIGTERM (then
    SIGKILL after a deadline), ``kill()`` sends SIGKILL at once; both only ever signal this
    child's own pid.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = ROOT,
        start_seconds: float = 20.0,
        preexec: Callable[[], None] | None = None,
        keep_stderr: bool = True,
    ) -> None:
        self._argv = list(argv)
        self._keep_stderr = keep_stderr
        self._env = dict(os.environ if env is None else env)
        self._cwd = cwd
        self._start_seconds = start_seconds
        self._preexec = preexec
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._changed = threading.Condition()
        self._url: str | None = None
        self._closed = False
        self._exit_status: int | None = None
        self.stderr_lines: list[str] = []

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("the server is not running")
        return self._url

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the server has not been started")
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has ended and been reaped (``-9``: killed)."""
        return self._exit_status if self._process is None else self._process.poll()

    def start(self) -> Self:
        """Spawn and wait for the ready line.

        Raises:
            ChildServerError: the child exited or stayed silent for ``start_seconds``.
        """
        return self.launch().wait_ready()

    def launch(self) -> Self:
        """Spawn without waiting (start several children, then ``wait_ready`` on each)."""
        if self._process is not None:
            raise RuntimeError("already started")
        self._url = self._reset_url()
        self._closed = False
        self._process = subprocess.Popen(
            self._argv,
            cwd=self._cwd,
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=self._prepare_child,  # noqa: PLW1509 - prctl and sched_setaffinity only
        )
        assert self._process.stderr is not None
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stderr,), daemon=True
        )
        self._reader.start()
        return self

    def wait_ready(self) -> Self:
        """Wait for the ready line of a launched child.

        Raises:
            ChildServerError: the child exited or stayed silent for ``start_seconds``.
        """
        with self._changed:
            self._changed.wait_for(
                lambda: self._url is not None or self._closed, self._start_seconds
            )
        if self._url is None:
            self.kill()
            raise ChildServerError("no ready line; stderr:\n" + "\n".join(self.stderr_lines))
        return self

    def _prepare_child(self) -> None:
        """Runs in the child before exec: die with the parent, then the caller's preexec."""
        _die_with_parent()
        if self._preexec is not None:
            self._preexec()

    @staticmethod
    def _reset_url() -> str | None:
        return None  # a restarted child prints a new port

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._changed:
                self.stderr_lines.append(line)
                if self._url is None and (match := READY_LINE.search(line)):
                    self._url = match["url"]
                self._changed.notify_all()
            if self._url is not None and not self._keep_stderr:
                while os.read(stream.fileno(), 1 << 16):
                    pass
                break
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; the exit status (idempotent)."""
        if self._process is None and self._exit_status is not None:
            return self._exit_status
        process = self._require()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return self._finish()

    def kill(self) -> int:
        """SIGKILL now (a crash); the exit status (``-9``; idempotent)."""
        if self._process is None and self._exit_status is not None:
            return self._exit_status
        process = self._require()
        if process.poll() is None:
            process.kill()
            process.wait()
        return self._finish()

    def _finish(self) -> int:
        process = self._require()
        if self._reader is not None:
            self._reader.join(5)
        if process.stderr is not None:
            process.stderr.close()
        self._process = None
        self._exit_status = process.returncode
        return process.returncode

    def _require(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("the server has not been started")
        return self._process

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self.stop()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: SIGKILL this (child) process when the thread that spawned it ends.

    A test runner killed by a timeout then leaves no server behind.
    """
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def controlled_server(
    *,
    db_path: Path,
    offset_file: Path,
    env: Mapping[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> ChildServer:
    """A (not yet started) ``python -m harness.serve_controlled`` child on a free loopback port."""
    argv = [
        sys.executable,
        "-m",
        "harness.serve_controlled",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--db",
        str(db_path),
        "--clock-offset-file",
        str(offset_file),
    ]
    return ChildServer(argv, env=env, preexec=preexec)


if __name__ == "__main__":
    sys.exit(main())
