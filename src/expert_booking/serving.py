"""How every HTTP command of the CLI serves an ASGI app: bind first, then uvicorn, a ready line.

``serve``, ``proxy`` and ``payment-sandbox`` (and the harness's clock-controlled and floor
servers) all run through :func:`serve`, so they share one way of binding, logging, shutting
down and announcing readiness.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import logging
import math
import resource
import signal
import socket
import sys
import threading
from collections.abc import Generator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Final

import uvicorn

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from expert_booking.edge.json_logging import JsonLinesHandler
    from expert_booking.ports import Clock
    from expert_booking.settings import Settings

GRACEFUL_SHUTDOWN_SECONDS: Final = 10
_ready_logger = logging.getLogger("expert_booking.server")


class ListenError(OSError):
    """The address cannot be bound (in use, not local, not permitted); the message says which."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port), bound the way uvicorn binds.

    Binding happens before anything else is built, so a busy port is refused before a database
    is created or touched.

    Raises:
        ListenError: the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = host.strip("[]")
    try:
        return socket.create_server((address, port), family=family, backlog=2048)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ListenError(f"cannot listen on {host}:{port}: {reason}") from exc


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints the ready line once it accepts connections."""

    def __init__(self, config: uvicorn.Config, ready_line: str) -> None:
        super().__init__(config)
        self._ready_line = ready_line

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        """Uvicorn's SIGTERM/SIGINT handling, and SIGHUP's the same graceful way when heard.

        Killed by a hangup's default action, requests in flight would be cut off unanswered.
        """
        heard = threading.current_thread() is threading.main_thread() and _hangup_heard()
        previous = signal.signal(signal.SIGHUP, self.handle_exit) if heard else None
        try:
            with super().capture_signals():
                yield
        finally:
            if heard:
                signal.signal(signal.SIGHUP, signal.SIG_DFL if previous is None else previous)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        bound = self.servers[0].sockets[0].getsockname()
        host = self.config.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        # The heap built while importing and wiring is long-lived: keep gen-2 passes off it
        # (perf-floor section 3.2: c=16 p99 67 ms -> 13 ms). No gc.collect() first: it costs
        # 70-100 ms of cold start and finds about ten unreachable objects here. For the same
        # reason ``expert-booking-mcp serve`` starts with the collector off; it runs from here.
        gc.freeze()
        gc.enable()
        # A JSON line like every other stderr line (written at the end of this loop iteration).
        _ready_logger.info(self._ready_line.format(base=f"http://{host}:{bound[1]}"))


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    """End the process with status 0 on a stop signal outside uvicorn's own handling.

    That is before serving starts, and when uvicorn re-raises the signal after its graceful
    shutdown (it restores the previous handler, this one, and raises the signal again).
    """
    del signum, frame
    raise SystemExit(0)


def graceful_shutdown_seconds(settings: Settings) -> int:
    """How long a stopping server lets requests in flight finish.

    ``GRACEFUL_SHUTDOWN_SECONDS``, or longer with a long ``PAYMENT_TIMEOUT_SECONDS``: a confirm
    in flight may wait out its payment query, and one cut off would answer a bare 500.
    """
    return max(GRACEFUL_SHUTDOWN_SECONDS, math.ceil(settings.payment_timeout_seconds) + 2)


def exit_cleanly_on_signals() -> None:
    """SIGTERM, SIGINT and SIGHUP end the process with status 0 (see :func:`_exit_cleanly`).

    SIGHUP (the terminal or SSH session closed) only when it is not ignored: under ``nohup``
    the server keeps running, as that operator asked.
    """
    signal.signal(signal.SIGTERM, _exit_cleanly)
    signal.signal(signal.SIGINT, _exit_cleanly)
    if _hangup_heard():
        signal.signal(signal.SIGHUP, _exit_cleanly)


def _hangup_heard() -> bool:
    return signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN


def serve(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    sock: socket.socket | None = None,
    log_handler: JsonLinesHandler | None = None,
    ready_line: str = "MCP endpoint: {base}/mcp",
    warnings: Sequence[str] = (),
    limits: Settings | None = None,
    clock: Clock | None = None,
) -> int:
    """Serve ``app`` on ``host:port`` (or the already bound ``sock``) until a stop signal; 0.

    uvloop when installed, uvicorn's httptools protocol with the ``HTTP_*`` bounds of
    ``limits`` (default settings) (:class:`~expert_booking.edge.http_protocol.BoundedHttpProtocol`),
    no access log, a graceful shutdown of :func:`graceful_shutdown_seconds`, the JSON logging of
    :func:`configure_logging` on stderr for every logger, uvicorn's and the SDK's included
    (``log_handler``, when the app was given it for its action lines), ``gc.freeze()`` and the
    collector on after startup, and ``ready_line`` (``{base}`` is ``http://HOST:PORT`` with the
    bound port) on stderr once connections are accepted, after ``warnings`` (each one
    WARNING record of logger ``expert_booking.serve``). A signal ends the process with status 0.
    ``clock``: the MCP server's; its plain-HTTP refusals then carry the server timestamp headers.

    Raises:
        ListenError: ``sock`` was not given and ``host:port`` cannot be bound.
    """
    exit_cleanly_on_signals()
    from expert_booking.edge.http_limits import HttpLimits  # noqa: PLC0415
    from expert_booking.edge.http_protocol import BoundedHttpProtocol  # noqa: PLC0415
    from expert_booking.edge.json_logging import configure_logging  # noqa: PLC0415
    from expert_booking.edge.refusals import RefusalLog  # noqa: PLC0415
    from expert_booking.settings import Settings  # noqa: PLC0415

    bound = sock if sock is not None else listen(host, port)
    bounds = limits if limits is not None else Settings()
    # Before uvicorn.Config, which sets uvicorn's logger levels (log_config=None: no handlers
    # of its own, so its records reach the JSON handler on the root logger).
    configure_logging(log_handler or sys.stderr, every_logger=True)
    config = uvicorn.Config(
        app,
        host=host,
        port=bound.getsockname()[1],
        loop="uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio",
        http=BoundedHttpProtocol.bound(
            HttpLimits.from_settings(bounds, resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
            refusals=RefusalLog(per_second=bounds.refusal_log_lines_per_second),
            clock=clock,
        ),
        lifespan="on",
        ws="none",  # no WebSocket: an Upgrade is refused (edge/http_protocol.py)
        # uvicorn would rewrite the peer from X-Forwarded-For sent from 127.0.0.1 (its default
        # FORWARDED_ALLOW_IPS): the peer stays the socket's; access/caller.py reads forwarding
        # headers itself, from TRUSTED_PROXIES only (a quota bucket is never client-chosen).
        proxy_headers=False,
        access_log=False,
        log_config=None,
        log_level="warning",
        timeout_keep_alive=bounds.http_keep_alive_seconds,
        timeout_graceful_shutdown=graceful_shutdown_seconds(bounds),
    )
    for warning in warnings:
        logging.getLogger("expert_booking.serve").warning(warning)
    # uvicorn handles SIGTERM/SIGINT (and SIGHUP, above) while serving: stop accepting, finish
    # in-flight requests, run the lifespan shutdown (closing the store and HTTP clients), return.
    _AnnouncingServer(config, ready_line).run(sockets=[bound])
    return 0
