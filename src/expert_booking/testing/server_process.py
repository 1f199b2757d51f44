"""Run the installed server as a child process on a free loopback port (e2e tests, the demo)."""

from __future__ import annotations

import ctypes
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
SANDBOX_READY_LINE: Final = re.compile(r"Payment sandbox: (?P<url>http://[^\s/]+)")
# A deadline, not a wait: the ready line usually comes within 1-2 s, but a fresh virtualenv
# has no bytecode (uv compiles none), so a first spawn compiles every module, and on a shared
# 2-core box under load that took more than 20 s.
DEFAULT_START_SECONDS: Final = 60.0
DEFAULT_STOP_SECONDS: Final = 15.0
SERVE_COMMAND: Final = (sys.executable, "-m", "expert_booking", "serve")
SANDBOX_COMMAND: Final = (sys.executable, "-m", "expert_booking", "payment-sandbox")
_PR_SET_PDEATHSIG: Final = 1


class ServerStartError(RuntimeError):
    """The server exited, or printed no ready line in time; the message holds its stderr."""


class ServerProcess:
    """``python -m expert_booking serve --host 127.0.0.1 --port 0 --db <path>`` as a child process.

    Another ``command`` that takes the same three flags and prints the same ready line (the
    harness's clock-controlled and floor servers) runs the same way.

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
        command: Sequence[str] | None = None,
        cwd: Path | None = None,
        preexec: Callable[[], None] | None = None,
        die_with_parent: bool = False,
        keep_stderr: bool = True,
        db_flag: bool = True,
        ready_line: re.Pattern[str] = READY_LINE,
    ) -> None:
        """Configure (not start) the process.

        Args:
            env: the child's whole environment (default: this process's environment).
            db_path: the SQLite file; by default a fresh file in a temporary directory.
            extra_args: more arguments after ``--host 127.0.0.1 --port 0 --db <path>``.
            start_seconds: how long to wait for the ready line.
            command: what precedes those flags (default :data:`SERVE_COMMAND`).
            cwd: the child's working directory (default: the database's directory, or a
                temporary one; never this process's: a developer's ``./.env`` there would
                configure the child).
            preexec: runs in the child before exec (e.g. ``os.sched_setaffinity``).
            die_with_parent: Linux: the child gets SIGKILL when the thread that started it
                ends, so a test runner killed by a timeout leaves no server behind.
            keep_stderr: ``False`` keeps only the lines up to the ready line and drains the
                rest in large chunks (a benchmark must not spend its CPU on the server's log).
            db_flag: ``False`` for a command without ``--db`` (``proxy``, ``stdio``): only
                ``--host 127.0.0.1 --port 0`` follow it, and no database is made.
            ready_line: the readiness line; its group ``url`` becomes :attr:`url`
                (:data:`SANDBOX_READY_LINE` for ``payment-sandbox``).
        """
        self._command = tuple(SERVE_COMMAND if command is None else command)
        self._cwd = cwd
        self._preexec = preexec
        self._die_with_parent = die_with_parent
        self._keep_stderr = keep_stderr
        self._db_flag = db_flag
        self._ready_pattern = ready_line
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
        return self.launch().wait_ready()

    def launch(self) -> Self:
        """Spawn without waiting (launch several servers, then :meth:`wait_ready` on each)."""
        if self._process is not None:
            raise RuntimeError("already started")
        if self._db_path is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="expert-booking-"))
            self._db_path = self._own_dir / "expert-booking.db"
        database = ("--db", str(self._db_path)) if self._db_flag else ()
        command = [
            *self._command,
            *("--host", "127.0.0.1", "--port", "0", *database),
            *self._extra_args,
        ]
        prepare = self._prepare_child if self._die_with_parent or self._preexec else None
        self._process = subprocess.Popen(  # noqa: S603 - the caller's command, fixed arguments
            command, cwd=self._workdir(self._db_path), env=self._env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=prepare,  # noqa: PLW1509 - prctl and the caller's preexec only
        )  # fmt: skip
        assert self._process.stderr is not None  # noqa: S101 - stderr=PIPE above
        self._reader = threading.Thread(
            target=self._read_stderr, args=(self._process.stderr,), daemon=True
        )
        self._reader.start()
        return self

    def wait_ready(self) -> Self:
        """Wait for the ready line of a launched server.

        Raises:
            ServerStartError: it exited or stayed silent for ``start_seconds``.
        """
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

    def _prepare_child(self) -> None:
        """Runs in the child between fork and exec."""
        if self._die_with_parent and sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if self._preexec is not None:
            self._preexec()

    def _read_stderr(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._changed:
                self.stderr_lines.append(line)
                if self._ready_url is None and (match := self._ready_pattern.search(line)):
                    self._ready_url = match["url"]
                self._changed.notify_all()
            if self._ready_url is not None and not self._keep_stderr:
                while os.read(stream.fileno(), 1 << 16):
                    pass
                break
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

    def _workdir(self, db_path: Path) -> Path:
        """``cwd``, else the database's directory, else (it is missing) a temporary one."""
        if self._cwd is not None:
            return self._cwd
        if db_path.parent.is_dir():
            return db_path.parent
        if self._own_dir is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="expert-booking-"))
        return self._own_dir

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
