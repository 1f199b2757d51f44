"""The sandbox's HTTP surface (Litestar) and its command, ``expert-booking-mcp payment-sandbox``.

- ``GET /payments/{bookingId}``: the contract's payment answer (CONTRACT section 4); 404 for
  an unknown booking (its ``bookingId`` repeats the requested id cut by ``ledger.shown_id``).
- ``GET /pay/{bookingId}``: the payment page (booking, expert, time, amount, currency, status).
- ``POST /pay/{bookingId}``: form field ``action`` = ``pay`` / ``fail`` / ``close``; 303 back.
  Only while the booking is held and its hold has not run out (the sandbox's clock): a pending
  payment of a released, cancelled or final booking changes no more (409, the page says why),
  so nobody pays for a booking that can no longer be confirmed.
- ``GET /mailbox``: the mailbox page; ``Accept: application/json`` gives ``{"messages": [...]}``
  (the ledger's mailbox entries, newest first).

Only loopback: the command refuses another bind address, every request must name exactly one
``Host``, of the form ``name[:port]``, a port 1-65535 (400 otherwise), a loopback one (421
otherwise), and a form post with an ``Origin`` must carry exactly one, the sandbox's own (403
otherwise), so a web page elsewhere cannot pay for the user. A post without ``Origin`` (a
program, as ``demo`` plays the person) is served: the sandbox stands in for a payment provider,
which would authenticate the payer; it cannot tell a person from a program, and a booking id is
all it asks (an unguessable one, as a payment link is).

Every answer, the gate's own refusals included, carries :data:`GUARD_HEADERS`: no page of the
sandbox can be framed by another (clickjacking a Pay button), nothing is sniffed as another type,
no Referer (with its booking id) leaves it, and its pages may load nothing and post only to the
sandbox. (``same-origin``, not ``no-referrer``: under ``no-referrer`` a browser sends ``Origin:
null`` with the page's own form post, which the Origin check must refuse.) A request body
is at most :data:`MAX_BODY_BYTES` (413 before anything of it is parsed, announced or streamed):
the one form has one short field. The sandbox's own answers carry ``x-payment-sandbox``, the
responded-at header and ``cache-control: no-store``; its plain-text answers are ``text/plain``.
An unexpected error (not one of Litestar's HTTP refusals) is logged with its traceback on the
``expert_booking.sandbox`` logger and answered a plain-text 500 that says nothing of it.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import anyio
from litestar import Litestar, Request, get, post
from litestar.datastructures import State
from litestar.exceptions import HTTPException
from litestar.params import FromPath
from litestar.response import Redirect, Response
from starlette.types import Message, Receive, Scope, Send

from expert_booking.accept_language import negotiate
from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.payments_http import PAYMENT_RESPONDED_HEADER, PAYMENTS_PATH
from expert_booking.addresses import is_loopback_host
from expert_booking.domain.model import PaymentStatus, format_instant
from expert_booking.ports import Clock
from expert_booking.sandbox import pages
from expert_booking.sandbox.bookings import BookingReader
from expert_booking.sandbox.ledger import (
    PENDING,
    Ledger,
    LedgerError,
    PaymentAlreadyFinalError,
    shown_id,
)
from expert_booking.version import DISTRIBUTION

SANDBOX_HEADER: Final = "x-payment-sandbox"
ACTIONS: Final = {
    "pay": PaymentStatus.PAID.value,
    "fail": PaymentStatus.FAILED.value,
    "close": PaymentStatus.CLOSED.value,
}
_HTML: Final = "text/html"  # Litestar adds "; charset=utf-8" to text/* types itself
_TEXT: Final = "text/plain"
MAX_BODY_BYTES: Final = 16 * 1024
"""The largest request body served: the payment form's one field needs some twenty bytes."""
CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; style-src {pages.STYLE_SOURCE}; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
GUARD_HEADERS: Final = (
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make the form's Origin "null"
)
"""Added to every answer by :class:`_LoopbackGate`."""
_HOST: Final = re.compile(r"(\[[^\]]+\]|[^:\[\]]+)(?::([0-9]{1,5}))?")
"""A ``Host`` value: a name or a bracketed IPv6 literal (group 1), then an optional port (2)."""
_PORTS: Final = range(1, 65536)

logger = logging.getLogger("expert_booking.sandbox")


def default_ledger_path(db_path: Path) -> Path:
    """``expert-booking.db`` → ``expert-booking.payments.json`` beside it."""
    return db_path.with_name(f"{db_path.stem}.payments.json")


class _LoopbackGate:
    """ASGI wrapper: one ``name[:port]`` Host (400), loopback (421), same-origin posts (403).

    :data:`GUARD_HEADERS` go on every answer, the gate's own refusals included.
    """

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *GUARD_HEADERS]}
            await send(message)

        refusal = _refusal(scope)
        if refusal is None:
            await self._app(scope, receive, guarded)
            return
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"cache-control", b"no-store"),
            (SANDBOX_HEADER.encode(), b"1"),
        ]
        await guarded({"type": "http.response.start", "status": refusal[0], "headers": headers})
        await guarded({"type": "http.response.body", "body": refusal[1]})


def _refusal(scope: Scope) -> tuple[int, bytes] | None:
    """The gate's answer to a request it does not pass on (status, body), else ``None``."""
    hosts = _header_values(scope, b"host")
    host = hosts[0] if hosts else ""
    named = _HOST.fullmatch(host)
    if len(hosts) > 1 or named is None or (named[2] is not None and int(named[2]) not in _PORTS):
        return 400, b"SANDBOX: a request names one Host, as name[:port] (a port is 1-65535)"
    if not is_loopback_host(named[1]):
        return 421, b"SANDBOX: only loopback Host names are served"
    origins = _header_values(scope, b"origin")
    if scope["method"] == "POST" and (origins or [f"http://{host}"]) != [f"http://{host}"]:
        return 403, b"SANDBOX: form posts must come from the sandbox's own pages"
    return None


def _header_values(scope: Scope, name: bytes) -> list[str]:
    """Every value of the header ``name`` (lower case) in the request, in order."""
    return [value.decode("latin-1") for key, value in scope["headers"] if key.lower() == name]


@dataclass(frozen=True, slots=True)
class _Sandbox:
    """What the handlers share (Litestar hands it to them as ``state.sandbox``)."""

    reader: BookingReader
    ledger: Ledger
    clock: Clock

    def headers(self) -> dict[str, str]:
        return {
            PAYMENT_RESPONDED_HEADER: format_instant(self.clock.now()),
            SANDBOX_HEADER: "1",
            "cache-control": "no-store",
        }

    def html(self, text: str, language: str, status: int = 200) -> Response[str]:
        extra = {**self.headers(), "content-language": language}
        return Response(text, status_code=status, media_type=_HTML, headers=extra)

    def text(
        self, message: str, status: int, headers: dict[str, str] | None = None
    ) -> Response[str]:
        extra = {**(headers or {}), **self.headers()}
        return Response(message, status_code=status, media_type=_TEXT, headers=extra)

    def redirect(self, path: str) -> Redirect:
        return Redirect(path, status_code=303, headers=self.headers())

    def not_found(self, language: str, booking_id: str) -> Response[str]:
        page = pages.not_found_page(language, booking_id, str(self.reader.db_path))
        return self.html(page, language, 404)


def _sandbox(state: State) -> _Sandbox:
    sandbox: _Sandbox = state.sandbox
    return sandbox


def _language(request: Request[Any, Any, State]) -> str:
    return negotiate(
        request.headers.get("accept-language"), pages.LANGUAGES, pages.DEFAULT_LANGUAGE
    )


@get(PAYMENTS_PATH + "{booking_id:str}")
async def payment_answer(booking_id: FromPath[str], state: State) -> Response[Any]:
    """The contract's payment answer for one booking (PENDING until the page changed it)."""
    sandbox = _sandbox(state)
    async with sandbox.ledger.turn:
        booking = await anyio.to_thread.run_sync(sandbox.reader.find, booking_id)
        payment = sandbox.ledger.payment(booking_id)
    if booking is None:
        body: dict[str, Any] = {"error": "payment not found", "bookingId": shown_id(booking_id)}
        return Response(body, status_code=404, headers=sandbox.headers())
    answer = {
        "bookingId": booking.booking_id,
        "status": payment.status,
        "amount": booking.amount,
        "currency": booking.currency,
        "paidAt": payment.paid_at,
    }
    return Response(answer, headers=sandbox.headers())


@get("/pay/{booking_id:str}")
async def payment_page(
    booking_id: FromPath[str], request: Request[Any, Any, State], state: State
) -> Response[str]:
    """The payment page; ``?changed=1`` / ``?already=1`` add the sentence about the last post."""
    sandbox, language = _sandbox(state), _language(request)
    booking = await anyio.to_thread.run_sync(sandbox.reader.find, booking_id)
    if booking is None:
        return sandbox.not_found(language, booking_id)
    payment = sandbox.ledger.payment(booking_id)
    notice = None
    if request.query_params.get("changed"):
        notice = pages.result_notice(language, payment)
    elif request.query_params.get("already"):
        notice = pages.already_final_notice(language, payment.status)
    page = pages.payment_page(
        language,
        booking,
        payment,
        notice,
        open_for_payment=booking.open_for_payment(sandbox.clock.now()),
    )
    return sandbox.html(page, language)


@post("/pay/{booking_id:str}", status_code=303)
async def change_payment(
    booking_id: FromPath[str], request: Request[Any, Any, State], state: State
) -> Response[Any]:
    """Pay / Fail / Close (form field ``action``), then 303 back to the page."""
    sandbox = _sandbox(state)
    form = await request.form()
    status = ACTIONS.get(str(form.get("action", "")))
    async with sandbox.ledger.turn:
        return await _change(sandbox, request, booking_id, status)


async def _change(
    sandbox: _Sandbox, request: Request[Any, Any, State], booking_id: str, status: str | None
) -> Response[Any]:
    booking = await anyio.to_thread.run_sync(sandbox.reader.find, booking_id)
    if booking is None:
        return sandbox.not_found(_language(request), booking_id)
    if status is None:
        return sandbox.text("unknown action: use pay, fail or close", 400)
    now = sandbox.clock.now()
    payment = sandbox.ledger.payment(booking_id)
    if payment.status == PENDING and not booking.open_for_payment(now):
        # 409 with the page itself: a browser shows why, a program reads the status.
        language = _language(request)
        page = pages.payment_page(language, booking, payment, open_for_payment=False)
        return sandbox.html(page, language, 409)
    at = format_instant(now)
    try:
        await anyio.to_thread.run_sync(
            partial(
                sandbox.ledger.settle,
                booking_id,
                status,
                at=at,
                amount=booking.amount,
                currency=booking.currency,
            )
        )
    except PaymentAlreadyFinalError:
        return sandbox.redirect(f"/pay/{booking_id}?already=1")
    except OSError as exc:  # disk full, a read-only file system: nothing was recorded
        logger.warning("payment change of %s not recorded: %s", booking_id, exc)
        return sandbox.text(
            "the payment change could not be recorded (nothing changed): try again", 503
        )
    return sandbox.redirect(f"/pay/{booking_id}?changed=1")


@get("/mailbox")
async def mailbox(request: Request[Any, Any, State], state: State) -> Response[Any]:
    """The mailbox page, or ``{"messages": [...]}`` for ``Accept: application/json``."""
    sandbox = _sandbox(state)
    messages = sandbox.ledger.mailbox()
    if "application/json" in request.headers.get("accept", ""):
        return Response({"messages": messages}, headers=sandbox.headers())
    language = _language(request)
    return sandbox.html(pages.mailbox_page(language, messages), language)


@get("/")
async def index() -> Redirect:
    """The root leads to the mailbox."""
    return Redirect("/mailbox", status_code=303)


def _http_error(request: Request[Any, Any, State], exc: HTTPException) -> Response[str]:
    """Litestar's own refusals (an unknown path, a method, a body over the limit) as plain text."""
    sandbox = _sandbox(request.app.state)
    return sandbox.text(f"SANDBOX: {exc.detail}", exc.status_code, exc.headers)


def _unexpected_error(request: Request[Any, Any, State], exc: Exception) -> Response[str]:
    """Any other exception: logged with its traceback, answered a 500 that says nothing of it."""
    route = request.scope.get("path_template") or "an unrouted path"
    logger.error("%s %s failed; answered 500", request.method, route, exc_info=exc)
    return _sandbox(request.app.state).text("SANDBOX: Internal Server Error", 500)


def build_sandbox_app(db_path: Path, ledger: Ledger, *, clock: Clock | None = None) -> Any:
    """The sandbox as an ASGI app reading ``db_path`` and writing ``ledger``."""
    sandbox = _Sandbox(BookingReader(db_path), ledger, clock or SystemClock())
    app = Litestar(
        route_handlers=[payment_answer, payment_page, change_payment, mailbox, index],
        state=State({"sandbox": sandbox}),
        # Litestar's LoggingConfig(log_exceptions="always") would dictConfig the process's
        # logging (serve's JSON lines) and log every 404 with a traceback: a handler logs instead.
        exception_handlers={HTTPException: _http_error, Exception: _unexpected_error},
        request_max_body_size=MAX_BODY_BYTES,
        debug=False,
        logging_config=None,
        openapi_config=None,
    )
    return _LoopbackGate(app)


def run(host: str, port: int, db_path: Path, ledger_path: Path | None) -> int:
    """``expert-booking-mcp payment-sandbox``: serve until SIGTERM/SIGINT.

    The ready line is ``Payment sandbox: http://HOST:PORT (SANDBOX ...)`` on stderr. One line
    and status 2, before anything is served: a non-loopback ``host``; a database (``db_path``)
    whose directory does not exist, or that is there but cannot be read as SQLite; a ledger that
    cannot be read or written, is not of the ledger's shape, or that another payment sandbox
    uses (the ledger is opened ``exclusive``, for as long as the process runs). A busy port is
    status 3. A database file that does not exist yet, in a directory that does, is served as
    one without bookings: the sandbox may start before ``serve`` creates it. The sandbox never
    creates, migrates or writes the database, nor its directory.
    """
    from expert_booking.serving import ListenError, serve  # noqa: PLC0415 - CLI entry only

    prefix = f"{DISTRIBUTION} payment-sandbox"
    if not is_loopback_host(host):
        sys.stderr.write(f"{prefix}: --host must be a loopback address, got {host!r}\n")
        return 2
    problem = _database_problem(db_path)
    if problem is not None:
        sys.stderr.write(f"{prefix}: cannot read bookings from {db_path} (--db): {problem}\n")
        return 2
    try:
        ledger = Ledger(ledger_path or default_ledger_path(db_path), exclusive=True)
    except LedgerError as exc:
        sys.stderr.write(f"{prefix}: {exc}\n")
        return 2
    files = f"bookings read from {db_path}, ledger {ledger.path}".replace("{", "{{")
    ready = (
        "Payment sandbox: {base} (SANDBOX: simulated payments; pages at {base}/pay/<bookingId>, "
        "mailbox at {base}/mailbox; " + files.replace("}", "}}") + ")"
    )
    try:
        return serve(build_sandbox_app(db_path, ledger), host, port, ready_line=ready)
    except ListenError as exc:
        sys.stderr.write(f"{prefix}: {exc}\n")
        return 3


def _database_problem(db_path: Path) -> str | None:
    """Why the sandbox cannot read bookings from ``db_path`` at all, else ``None``."""
    if not db_path.parent.is_dir():
        return f"its directory {db_path.parent} does not exist (the sandbox creates none)"
    if db_path.exists() and not db_path.is_file():
        return "it is not a file"
    unreadable = BookingReader(db_path).unreadable()
    return None if unreadable is None else f"it is not a readable SQLite database ({unreadable})"
