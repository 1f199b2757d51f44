"""Run the installed server as a child process on a free loopback port (e2e tests, the demo)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

READY_LINE: Final = re.compile(r"MCP endpoint: (?P<url>http://\S+/mcp)")
DEFAULT_START_SECONDS: Final = 20.0
DEFAULT_STOP_SECONDS: Final = 15.0


class ServerStartError(RuntimeError):
    """The server exited, or printed no ready line in time; the message holds its stderr."""


class ServerProcess:
    """``python -m expert_booking serve --host 127.0.0.1 --port 0 --db <path>`` as a child process.

    Usage::

        with ServerProcess(env={**os.environ, "PAYMENT_QUERY_BASE_URL": stub.base_url}) as server:
            ... server.url ...

    Readiness is the ready line on stderr (``MCP endpoint: http://127.0.0.1:<port>/mcp``), read
    by a background thread; every stderr line is kept in :attr:`stderr_lines`. Without ``db_path``
    the database lives in a temporary directory that :meth:`close` (the ``with`` exit) removes;
    :meth:`stop` and :meth:`kill` keep it, so a new process can reopen :attr:`db_path`.
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        db_path: Path | None = None,
        extra_args: Sequence[str] = (),
        start_seconds: float = DEFAULT_START_SECONDS,
    ) -> None:
        """Configure (not start) the process.

        Args:
            env: the child's whole environment (default: this process's environment).
            db_path: the SQLite file; by default a fresh file in a temporary directory.
            extra_args: more arguments after ``serve ...``.
            start_seconds: how long to wait for the ready line.
        """
        self._env = dict(os.environ if env is None else env)
        self._own_dir: Path | None = None
        self._db_path = db_path
        self._extra_args = tuple(extra_args)
        self._start_seconds = start_seconds
        self._process: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._changed = threading.Condition()
        self._ready_url: str | None = None
        self._stderr_closed = False
        self.stderr_lines: list[str] = []

    @property
    def url(self) -> str:
        """The MCP endpoint, e.g. ``http://127.0.0.1:40123/mcp``."""
        if self._ready_url is None:
            raise RuntimeError("the server is not running")
        return self._ready_url

    @property
    def base_url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:40123``."""
        return self.url.removesuffix("/mcp")

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._require_process().pid

    @property
    def db_path(self) -> Path:
        """The SQLite file the server uses."""
        if self._db_path is None:
            raise RuntimeError("the server has not been started")
        return self._db_path

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has ended (negative: killed by that signal)."""
        return self._require_process().poll()

    def start(self) -> Self:
        """Spawn the server and wait for its ready line.

        Raises:
            ServerStartError: it exited or stayed silent for ``start_seconds``.
        """
        if self._process is not None:
            raise RuntimeError("already started")
        if self._db_path is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="expert-booking-"))
            self._db_path = self._own_dir / "expert-booking.db"
        command = [
            sys.executable,
            "-m",
            "expert_booking",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--db",
            str(self._db_path),
            *self._extra_args,
        ]
        self._process = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed arguments
            command, env=self._env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self._process.stderr is not None  # noqa: S101 - stderr=PIPE above
        self._reader = threading.Thread(
            target=self._read_stderr, args=(self._process.stderr,), daemon=True
        )
        self._reader.start()
        with self._changed:
            settled = self._changed.wait_for(
                lambda: self._ready_url is not None or self._stderr_closed, self._start_seconds
            )
        if self._ready_url is None:
            self.kill()
            self._remove_own_dir()
            reason = "exited" if settled else f"printed no ready line in {self._start_seconds} s"
            stderr = "\n".join(self.stderr_lines)
            raise ServerStartError(f"the server {reason}; stderr:\n{stderr}")
        return self

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._changed:
                self.stderr_lines.append(line)
                if self._ready_url is None and (match := READY_LINE.search(line)):
                    self._ready_url = match["url"]
                self._changed.notify_all()
        with self._changed:
            self._stderr_closed = True
            self._changed.notify_all()

    def wait_for_stderr(self, predicate: Callable[[str], bool], timeout: float = 5.0) -> str:
        """Wait until a stderr line satisfies ``predicate`` and return the first that does.

        Raises:
            TimeoutError: no such line within ``timeout`` seconds (or stderr closed).
        """
        found: list[str] = []

        def seen() -> bool:
            found[:] = [line for line in self.stderr_lines if predicate(line)][:1]
            return bool(found) or self._stderr_closed

        with self._changed:
            self._changed.wait_for(seen, timeout)
        if not found:
            raise TimeoutError("no matching stderr line")
        return found[0]

    def json_log_records(self) -> list[dict[str, Any]]:
        """The stderr lines that are JSON objects (the server's structured log), parsed."""
        with self._changed:
            lines = list(self.stderr_lines)
        records: list[dict[str, Any]] = []
        for line in lines:
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
        return records

    def wait(self, timeout: float = DEFAULT_STOP_SECONDS) -> int:
        """Wait for the child to exit on its own; its exit status.

        Raises:
            subprocess.TimeoutExpired: it still runs after ``timeout`` seconds.
        """
        status = self._require_process().wait(timeout)
        self._cleanup()
        return status

    def stop(self, timeout: float = DEFAULT_STOP_SECONDS) -> int:
        """SIGTERM, wait up to ``timeout`` for a graceful exit, else SIGKILL; the exit status.

        The database files stay (see :meth:`close`).
        """
        process = self._require_process()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._cleanup()
        return process.returncode

    def kill(self) -> int:
        """SIGKILL at once (a crash); the exit status. The database files stay."""
        process = self._require_process()
        if process.poll() is None:
            process.kill()
            process.wait()
        self._cleanup()
        return process.returncode

    def close(self) -> None:
        """Stop the server if it runs and remove the temporary directory it was given."""
        if self._process is not None:
            self.stop()
        self._remove_own_dir()

    def _cleanup(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
        process = self._require_process()
        if process.stderr is not None:
            process.stderr.close()

    def _remove_own_dir(self) -> None:
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
            self._own_dir = None

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("the server has not been started")
        return self._process

    def __enter__(self) -> Self:
        """Start the server."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its temporary directory."""
        self.close()
