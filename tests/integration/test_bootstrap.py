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
