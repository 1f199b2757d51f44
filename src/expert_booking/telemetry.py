"""OpenTelemetry SDK set-up from the standard ``OTEL_*`` variables (composition root only)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from opentelemetry import trace

from expert_booking.version import DISTRIBUTION

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

DEFAULT_SERVICE_NAME = DISTRIBUTION
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


class TracingConfigError(ValueError):
    """An ``OTEL_*`` value this server cannot honour; raised at startup."""


def tracer_provider_installed() -> bool:
    """Whether the process already has a tracer provider (an embedding application's).

    The OpenTelemetry API hands out a placeholder (``ProxyTracerProvider``) until one is set;
    anything else is a provider someone installed to receive spans.
    """
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def configure_tracing(
    env: Mapping[str, str],
    *,
    service_version: str | None = None,
    install_global: bool = True,
) -> TracerProvider | None:
    """Build (and by default install) a TracerProvider if the environment asks for traces.

    - ``OTEL_SDK_DISABLED=true``: no provider.
    - ``OTEL_TRACES_EXPORTER``: a comma-separated list of ``otlp`` (HTTP/protobuf; the exporter
      reads ``OTEL_EXPORTER_OTLP_*`` itself), ``console`` (to stderr: stdout is not ours) and
      ``none``. An explicit ``none`` means no provider.
    - unset: ``otlp`` when an OTLP endpoint variable is set, else no provider.

    Each exporter gets a ``BatchSpanProcessor``. ``service.name`` comes from
    ``OTEL_SERVICE_NAME`` (default ``expert-booking-mcp``).

    Args:
        env: The environment (``os.environ`` in production).
        service_version: Reported as ``service.version`` when given.
        install_global: Install the provider as the global one (the SDK allows this once
            per process; tests pass ``False``).

    Returns:
        The provider, for the caller to ``shutdown()`` on exit; ``None`` when tracing is off.

    Raises:
        TracingConfigError: an exporter name other than otlp, console or none.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [_exporter(name) for name in _exporter_names(env)]
    if not exporters:
        return None
    # The SDK is imported only when tracing is on (~20 ms of every cold start otherwise).
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    attributes = {SERVICE_NAME: env.get("OTEL_SERVICE_NAME", "").strip() or DEFAULT_SERVICE_NAME}
    if service_version is not None:
        attributes[SERVICE_VERSION] = service_version
    provider = TracerProvider(resource=Resource.create(attributes))
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    if install_global:
        trace.set_tracer_provider(provider)
    return provider


def _exporter_names(env: Mapping[str, str]) -> list[str]:
    raw = env.get("OTEL_TRACES_EXPORTER", "").strip()
    if not raw:
        return ["otlp"] if any(env.get(name, "").strip() for name in _ENDPOINT_VARIABLES) else []
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    return [name for name in names if name != "none"]


def _exporter(name: str) -> SpanExporter:
    if name == "otlp":
        # Imported only when used: the exporter pulls in protobuf and requests.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )

        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        # One span per line: every stderr line stays one JSON object (CONTRACT section 5);
        # the exporter's default is indented JSON over many lines.
        return ConsoleSpanExporter(out=sys.stderr, formatter=_one_line)
    raise TracingConfigError(
        f"OTEL_TRACES_EXPORTER={name!r} is not supported; use otlp, console or none"
    )


def _one_line(span: ReadableSpan) -> str:
    line: str = span.to_json(indent=None)
    return line + "\n"
