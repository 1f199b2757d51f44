"""The server and the payment sandbox as child processes on one database (demo, tests)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from expert_booking.testing.server_process import (
    SANDBOX_COMMAND,
    SANDBOX_READY_LINE,
    ServerProcess,
)


@contextmanager
def server_with_sandbox(
    database: Path, env: Mapping[str, str] | None = None, *, cwd: Path | None = None
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """``(server, sandbox)``: the sandbox first (it reads ``database``), then the server using it.

    Both on free loopback ports, in ``cwd`` (default: the database's directory; a ``.env``
    there is read); the server's ``PAYMENT_QUERY_BASE_URL`` and ``PAYMENT_PAGE_BASE_URL`` point
    at the sandbox, the rest of both environments is ``env`` (default: this process's).
    """
    with ServerProcess(
        command=SANDBOX_COMMAND,
        db_path=database,
        ready_line=SANDBOX_READY_LINE,
        env=env,
        cwd=cwd,
    ) as sandbox:
        server_env = {
            **(os.environ if env is None else env),
            "PAYMENT_QUERY_BASE_URL": sandbox.url,
            "PAYMENT_PAGE_BASE_URL": f"{sandbox.url}/pay",
        }
        with ServerProcess(env=server_env, db_path=database, cwd=cwd) as server:
            yield server, sandbox
