"""Fuzzing fixtures: one spawned server (with a payment stub) per session and a stamped wire.

Both fuzz modules share one server and one SQLite file, so the database invariants are checked
over everything the session sent. Every request goes through the project's
:class:`~expert_booking.client.ClientSentAtTransport` (header and ``_meta.clientSentAt`` agree)
and is counted; :func:`exchange_problems` holds the response properties every request must meet.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from jsonschema import Draft202012Validator  # type: ignore[import-untyped, unused-ignore]

from expert_booking.client import ClientSentAtTransport
from expert_booking.testing.payment_stub import PaymentStub
from expert_booking.testing.server_process import ServerProcess
from harness.db_invariants import State, booking_states, check_invariants
from harness.openapi import PROTOCOL_VERSION, RESULT_SCHEMAS, load_schema

ROOT: Final = Path(__file__).resolve().parents[2]
MIN_REQUESTS_PER_RUN: Final = 2000
"""The fuzz session sends at least this many generated requests (both modules together)."""
GENERATED_SOURCES: Final = ("schemathesis-", "hypothesis-")

LEAKS: Final = (
    "Traceback",
    'File "',
    "site-packages",
    '.py"',
    "/work/",
    str(ROOT),
    "SELECT ",
    "INSERT ",
    "UPDATE ",
)
"""Case-sensitive markers of a stack trace, a file path or SQL text."""

LEAKS_ANY_CASE: Final = ("sqlite",)

HEADERS: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": PROTOCOL_VERSION,
    "mcp-method": "tools/call",
}

META: Final = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "1"},
}

_NOT_JSON: Final = object()


def _validator(stem: str) -> Draft202012Validator:
    return Draft202012Validator(
        load_schema(stem), format_checker=Draft202012Validator.FORMAT_CHECKER
    )


ENVELOPE: Final = _validator("envelope")
RESULTS: Final = {tool: _validator(stem) for tool, stem in RESULT_SCHEMAS.items()}


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange as sent (after stamping) and received."""

    request: Any
    """The JSON body as sent (``None`` when it was not JSON)."""
    request_text: str
    stamp: str | None
    status: int
    headers: Mapping[str, str]
    text: str
    message: Any
    """The parsed JSON response (``None`` when the body was not JSON)."""

    @property
    def envelope(self) -> dict[str, Any] | None:
        """``result.structuredContent`` when the response is a tool result."""
        if isinstance(self.message, dict) and isinstance(self.message.get("result"), dict):
            content = self.message["result"].get("structuredContent")
            return content if isinstance(content, dict) else None
        return None


class UnsendableError(Exception):
    """The HTTP client refused to send the request (e.g. an illegal header value)."""


class Wire:
    """Sends raw requests to the server through the stamping transport, from sync code."""

    def __init__(self, portal: BlockingPortal, client: httpx2.AsyncClient, url: str) -> None:
        self._portal = portal
        self._client = client
        self.url = url
        self.counts: Counter[str] = Counter()
        """Requests sent, per source (test family)."""
        self._ids = itertools.count(1)
        self._sent: tuple[str, bytes] | None = None

    def record(self, request: httpx2.Request, response: Any, sent: str, received: str) -> None:
        """``on_exchange`` of the stamping transport: keep the stamp and the body as sent."""
        del response, received
        self._sent = (sent, request.content)

    @property
    def generated(self) -> int:
        """Generated requests sent (and answered) so far in this session."""
        return sum(n for source, n in self.counts.items() if source.startswith(GENERATED_SOURCES))

    def next_id(self) -> int:
        """A fresh JSON-RPC id."""
        return next(self._ids)

    def send(self, body: bytes, headers: Sequence[tuple[str, str]], source: str) -> Exchange:
        """POST ``body`` with ``headers`` (the transport adds the stamp) and read the answer."""
        try:
            response, stamped = self._portal.call(self._post, body, list(headers))
        except (httpx2.LocalProtocolError, UnicodeEncodeError) as exc:
            self.counts["unsendable"] += 1
            raise UnsendableError(str(exc)) from exc
        self.counts[source] += 1
        stamp, sent = stamped or (None, body)
        text = response.content.decode("utf-8", "replace")
        return Exchange(
            request=_json_or_none(sent),
            request_text=sent.decode("utf-8", "replace"),
            stamp=stamp,
            status=response.status_code,
            headers=dict(response.headers),
            text=text,
            message=_json_or_none(response.content),
        )

    async def _post(
        self, body: bytes, headers: list[tuple[str, str]]
    ) -> tuple[httpx2.Response, tuple[str, bytes] | None]:
        self._sent = None
        response = await self._client.post(self.url, content=body, headers=headers)
        return response, self._sent

    def call_tool(self, name: str, arguments: Any, *, source: str) -> Exchange:
        """A well-formed ``tools/call`` of MCP tool ``name``."""
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id(),
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": dict(META)},
        }
        headers = [*HEADERS.items(), ("mcp-name", name)]
        return self.send(json.dumps(body).encode(), headers, source)


def _json_or_none(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


@pytest.fixture(scope="session")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal(backend="asyncio") as running:
        yield running


@pytest.fixture(scope="session")
def payment_stub(portal: BlockingPortal) -> Iterator[PaymentStub]:
    with portal.wrap_async_context_manager(PaymentStub.running()) as stub:
        yield stub


@pytest.fixture(scope="session")
def fuzz_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "booking.db"


@pytest.fixture(scope="session")
def fuzz_server(payment_stub: PaymentStub, fuzz_db: Path) -> Iterator[ServerProcess]:
    env = {
        **os.environ,
        "PAYMENT_QUERY_BASE_URL": payment_stub.base_url,
        "PAYMENT_PAGE_BASE_URL": f"{payment_stub.base_url}/pay",
    }
    with ServerProcess(env=env, db_path=fuzz_db) as server:
        yield server


@pytest.fixture(scope="session")
def wire(portal: BlockingPortal, fuzz_server: ServerProcess) -> Iterator[Wire]:
    holder: list[Wire] = []

    def on_exchange(request: httpx2.Request, response: Any, sent: str, received: str) -> None:
        holder[0].record(request, response, sent, received)

    transport = ClientSentAtTransport(on_exchange=on_exchange)
    client = httpx2.AsyncClient(transport=transport, timeout=httpx2.Timeout(30.0))
    with portal.wrap_async_context_manager(client) as opened:
        holder.append(Wire(portal, opened, fuzz_server.url))
        yield holder[0]


@dataclass
class DatabaseWatch:
    """Database invariants after every fuzz test, states compared with the previous check."""

    path: Path
    states: dict[str, State]
    violations: list[str]

    def check(self, when: str) -> list[str]:
        """Check now; remember the states and any violation (prefixed with ``when``)."""
        if not self.path.exists():
            return []
        found = check_invariants(self.path, previous=self.states)
        self.states = booking_states(self.path)
        self.violations += [f"{when}: {line}" for line in found]
        return found


@pytest.fixture(scope="session")
def database_watch(fuzz_db: Path) -> DatabaseWatch:
    return DatabaseWatch(fuzz_db, {}, [])


@pytest.fixture(autouse=True)
def _invariants_after_each_test(
    request: pytest.FixtureRequest, database_watch: DatabaseWatch
) -> Iterator[None]:
    yield
    assert database_watch.check(f"after {request.node.name}") == []


# --------------------------------------------------------------------------- properties


def exchange_problems(exchange: Exchange) -> list[str]:
    """Every property the exchange breaks (empty: it meets them all).

    - no 5xx;
    - a JSON-RPC 2.0 response: ``result`` xor ``error``, the request ``id`` echoed (``null`` only
      when the request had no usable id, or for a Parse error / Invalid Request other than a
      timestamp refusal), an integer ``code`` and a string ``message``, never
      -32603 (an unhandled server error); a notification may get an empty 202 instead;
    - a ``tools/call`` result is a CallToolResult whose ``structuredContent`` is an envelope valid
      against ``schemas/envelope.json``, mirrored as the one text item, ``isError`` iff not
      ``ok``, ``data`` valid against the tool's result schema, the client stamp echoed, and
      never ``INTERNAL_ERROR`` (the envelope's 5xx: an unhandled failure inside the tool);
    - no stack trace, file path or SQL text anywhere in the response that the request did not
      itself contain.
    """
    problems: list[str] = []
    if exchange.status >= 500:
        problems.append(f"HTTP {exchange.status}")
    problems += _leaks(exchange)
    request = exchange.request if isinstance(exchange.request, dict) else {}
    is_notification = isinstance(exchange.request, dict) and "id" not in exchange.request
    if exchange.status == 202 and is_notification and not exchange.text:
        return problems
    message = exchange.message
    if not isinstance(message, dict):
        return [*problems, f"HTTP {exchange.status}: body is not a JSON object: {exchange.text!r}"]
    problems += _json_rpc_problems(message, request)
    result = message.get("result")
    if request.get("method") == "tools/call" and isinstance(result, dict):
        problems += _tool_result_problems(result, request, exchange.stamp)
    return problems


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
        if value[:1] in "{[":
            inner = _json_or_none(value.encode())
            if inner is not None:
                yield from _strings(inner)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _leaks(exchange: Exchange) -> list[str]:
    said = list(_strings(exchange.message)) if exchange.message is not None else [exchange.text]
    said += [f"{name}: {value}" for name, value in exchange.headers.items()]
    asked = exchange.request_text + "\n".join(_strings(exchange.request))
    found = []
    for text in said:
        found += [m for m in LEAKS if m in text and m not in asked]
        found += [m for m in LEAKS_ANY_CASE if m in text.lower() and m not in asked.lower()]
    return [f"response contains {marker!r}" for marker in sorted(set(found))]


def _usable_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _id_unknowable(error: Any) -> bool:
    """JSON-RPC 2.0 section 5: a Parse error or an Invalid Request may carry id null.

    Not so for the timestamp refusals: CONTRACT section 2 says they echo the request id.
    """
    if not isinstance(error, dict) or error.get("code") not in {-32700, -32600}:
        return False
    data = error.get("data")
    code = data.get("code") if isinstance(data, dict) else None
    return code not in {"MISSING_CLIENT_TIMESTAMP", "CLIENT_TIMESTAMP_MISMATCH"}


def _json_rpc_problems(message: dict[str, Any], request: dict[str, Any]) -> list[str]:
    problems = []
    if message.get("jsonrpc") != "2.0":
        problems.append(f"jsonrpc is {message.get('jsonrpc')!r}")
    if ("result" in message) == ("error" in message):
        problems.append("needs exactly one of result and error")
    error = message.get("error")
    if "id" not in message:
        problems.append("no id")
    elif _usable_id(request.get("id")) and not (message["id"] is None and _id_unknowable(error)):
        if message["id"] != request["id"] or type(message["id"]) is not type(request["id"]):
            problems.append(f"id {message['id']!r} does not echo {request['id']!r}")
    elif message["id"] is not None and message["id"] != request.get("id"):
        problems.append(f"id {message['id']!r} for a request id {request.get('id')!r}")
    if "error" in message:
        if not isinstance(error, dict):
            problems.append("error is not an object")
        else:
            code, text = error.get("code"), error.get("message")
            if not isinstance(code, int) or isinstance(code, bool) or not isinstance(text, str):
                problems.append(f"malformed error {error!r}")
            elif code == -32603:
                problems.append(f"internal error -32603: {text}")
    elif not isinstance(message.get("result"), dict):
        problems.append("result is not an object")
    return problems


def _tool_result_problems(
    result: dict[str, Any], request: dict[str, Any], stamp: str | None
) -> list[str]:
    envelope = result.get("structuredContent")
    if not isinstance(envelope, dict):
        return [f"tools/call result without an envelope: {result!r}"]
    problems = [
        f"envelope {'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in ENVELOPE.iter_errors(envelope)
    ]
    if problems:
        return problems
    ok = envelope["ok"]
    if not ok and envelope["error"]["code"] == "INTERNAL_ERROR":
        problems.append("INTERNAL_ERROR envelope: the tool failed unexpectedly")
    if result.get("isError") is not (not ok):
        problems.append(f"isError {result.get('isError')!r} but ok {ok!r}")
    content = result.get("content")
    texts = [item.get("text") for item in content or [] if isinstance(item, dict)]
    if len(texts) != 1 or _json_or_none(str(texts[0]).encode()) != envelope:
        problems.append("content is not the envelope as one text item")
    if stamp is not None:
        if envelope["meta"]["clientSentAt"] != stamp:
            problems.append(f"meta.clientSentAt {envelope['meta']['clientSentAt']} != {stamp}")
        meta = result.get("_meta") or {}
        if meta.get("clientSentAt") != stamp:
            problems.append(f"result._meta.clientSentAt {meta.get('clientSentAt')} != {stamp}")
    if ok:
        params = request.get("params") or {}
        tool = params.get("name")
        if tool == "tool_catalog.call":
            tool = (params.get("arguments") or {}).get("name")
        validator = RESULTS.get(str(tool))
        if validator is None:
            problems.append(f"ok envelope for unknown tool {tool!r}")
        else:
            problems += [
                f"{tool} data {'/'.join(map(str, error.absolute_path))}: {error.message}"
                for error in validator.iter_errors(envelope["data"])
            ]
    return problems
