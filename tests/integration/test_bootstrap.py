"""The composition root: what building the app sets up, and what it leaves for later."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from pathlib import Path

from expert_booking.bootstrap import payment_tls

# Builds the app in a fresh interpreter with tracing off and reports which optional pieces
# were imported (the OpenTelemetry SDK is only for tracing) and how the client verifies TLS.
_BUILD = """
import sys
from expert_booking.bootstrap import build_asgi_app
from expert_booking.settings import Settings
build_asgi_app(Settings(db_path=sys.argv[1]))
print("opentelemetry.sdk.trace" in sys.modules)
"""


def test_an_http_payment_service_gets_a_strict_tls_context_that_trusts_nothing() -> None:
    context = payment_tls("http://127.0.0.1:3100")
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs() == []


def test_an_https_payment_service_keeps_httpx_default_verification() -> None:
    assert payment_tls("https://payments.example") is True


def test_building_the_app_without_tracing_imports_no_opentelemetry_sdk(tmp_path: Path) -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("OTEL_") or name == "OTEL_SDK_DISABLED"
    }
    env["OTEL_SDK_DISABLED"] = "false"
    done = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", _BUILD, str(tmp_path / "b.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


# An embedding application installs its tracer provider, then builds the app and serves one
# tool_catalog.call in process; prints each finished span as "name parent-name trace-id".
_EMBEDDED = """
import asyncio, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from expert_booking.bootstrap import build_asgi_app
from expert_booking.settings import Settings
from harness.inprocess import inprocess_app
from harness.loadgen import make_http_client, send
from harness.mcp_calls import logical

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    call = logical("booking.search_available_slots", {"query": "AI", "limit": 1}, sys.argv[2])
    app = build_asgi_app(Settings(db_path=sys.argv[1]))
    async with inprocess_app(app) as asgi, make_http_client(inner=asgi) as client:
        reply = await send(client, "http://127.0.0.1:3000/mcp", call)
    assert reply.envelope["ok"], reply.message
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans}
    for span in spans:
        parent = names.get(span.parent.span_id, "-") if span.parent else "-"
        print(span.name, parent, format(span.context.trace_id, "032x"))

asyncio.run(main())
"""
REQUEST_SPAN_ID = "123e4567-e89b-12d3-a456-426614174000"


def test_an_embedding_applications_tracer_provider_receives_the_action_spans(
    tmp_path: Path,
) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")}
    done = subprocess.run(  # noqa: S603 - our own interpreter and a fixed script
        [sys.executable, "-c", _EMBEDDED, str(tmp_path / "b.db"), REQUEST_SPAN_ID],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],  # the repository: harness is importable
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    spans = {tuple(line.split()) for line in done.stdout.splitlines()}
    trace_id = REQUEST_SPAN_ID.replace("-", "")
    assert ("tool_catalog.call", "-", trace_id) in spans
    assert ("booking.search_available_slots", "tool_catalog.call", trace_id) in spans
