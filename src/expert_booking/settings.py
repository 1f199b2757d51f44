"""Settings read from the environment in one place (CONTRACT section 1); CLI flags override."""

from __future__ import annotations

import io
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dotenv.main import DotEnv
from dotenv.parser import parse_stream

from expert_booking.access.caller import IpNetwork
from expert_booking.access.ports import QuotaLimits
from expert_booking.adapters.sqlite_transaction import DEFAULT_BUSY_TIMEOUT_MS
from expert_booking.addresses import https_or_loopback_url, is_loopback_host
from expert_booking.setting_values import (
    auth_algorithms,
    auth_leeway,
    comma_list,
    duration,
    http_url,
    ip_networks,
    non_negative_int,
    parse_port,
    positive_float,
    positive_int,
)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
SANDBOX_PORT = 3100
"""``payment-sandbox``'s default port, where the default payment URLs point."""
PROXY_PORT = 3001
"""``proxy``'s default port."""


DEFAULT_QUOTA_PER_CALLER_PER_MINUTE = 30
DEFAULT_QUOTA_GLOBAL_PER_MINUTE = 300
DEFAULT_AUTH_ALGORITHMS = ("RS256", "ES256")


class AuthMode(StrEnum):
    """``AUTH_MODE``: ``none`` (loopback only, one local principal) or ``oauth``."""

    NONE = "none"
    OAUTH = "oauth"


class SettingsError(ValueError):
    """A configuration value is malformed; raised at startup, never per request."""


DOTENV = ".env"


def load_dotenv_file() -> None:
    """Read ``./.env`` into the environment; variables already set keep their values.

    A variable set to blank counts as unset, as :meth:`Settings.from_env` reads it: the file's
    value applies, not the default.

    Raises:
        SettingsError: the file cannot be read as UTF-8 text, or a line of it is no
            ``NAME=value`` (python-dotenv would skip it, or take a bare ``NAME`` as nothing: a
            setting the operator wrote would silently not apply).
    """
    path = Path.cwd() / DOTENV
    if not path.is_file():
        return
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        msg = f"{path} cannot be read as UTF-8 text ({type(exc).__name__})"
        raise SettingsError(msg) from exc
    for binding in parse_stream(io.StringIO(text)):
        if binding.error or (binding.key is not None and binding.value is None):
            line = binding.original.line
            msg = f"{path} line {line} is not NAME=value (a comment starts with #)"
            raise SettingsError(msg)
    # override=False: ${VAR} in the file reads the environment's VAR first, as it applies
    values = DotEnv(None, stream=io.StringIO(text), override=False).dict()
    for name, value in values.items():
        if value is not None and not os.environ.get(name, "").strip():
            os.environ[name] = value


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 3000
    db_path: Path = Path("./expert-booking.db")
    payment_query_base_url: str = f"http://127.0.0.1:{SANDBOX_PORT}"
    payment_page_base_url: str = f"http://127.0.0.1:{SANDBOX_PORT}/pay"
    hold_ttl_seconds: int = 300
    approval_ttl_seconds: int = 120
    approval_clock_skew_seconds: int = 5
    slot_cache_ttl_seconds: int = 5
    payment_timeout_seconds: float = 3.0
    allowed_hosts: tuple[str, ...] = field(default=LOOPBACK_NAMES)
    allowed_origins: tuple[str, ...] = field(  # a page on this machine, over either scheme
        default=tuple(
            f"{scheme}://{name}" for scheme in ("http", "https") for name in LOOPBACK_NAMES
        )
    )
    max_body_bytes: int = 32 * 1024
    db_busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    auth_mode: AuthMode = AuthMode.NONE
    auth_issuer: str | None = None
    auth_jwks_url: str | None = None
    auth_resource: str | None = None
    auth_algorithms: tuple[str, ...] = DEFAULT_AUTH_ALGORITHMS
    auth_leeway_seconds: int = 10
    quota_per_caller_per_minute: int | None = None
    quota_global_per_minute: int | None = None
    trusted_proxies: tuple[IpNetwork, ...] = ()
    client_clock_tolerance_seconds: int = 300
    http_max_header_bytes: int = 32 * 1024
    http_max_headers: int = 100
    http_header_timeout_seconds: float = 10.0
    http_body_timeout_seconds: float = 10.0
    http_keep_alive_seconds: int = 5
    http_max_connections: int = 1024
    refusal_log_lines_per_second: int = 20

    @property
    def client_clock_tolerance(self) -> timedelta:
        return timedelta(seconds=self.client_clock_tolerance_seconds)

    @property
    def payment_sandbox_warning(self) -> str | None:
        """A warning when the payment service is on this machine (the payment sandbox's place).

        ``expert-booking-mcp payment-sandbox`` listens on ``127.0.0.1:3100``, the default of
        ``PAYMENT_QUERY_BASE_URL``: with a loopback payment URL, confirmations rest on
        simulated payments unless a real service runs there.
        """
        host = urlsplit(self.payment_query_base_url).hostname or ""
        if not is_loopback_host(host):
            return None
        return (
            f"PAYMENT_QUERY_BASE_URL {self.payment_query_base_url} is on this machine, where "
            "`expert-booking-mcp payment-sandbox` runs: payments there are SANDBOX payments "
            "(simulated, no money moves); set it to the real payment service before real use"
        )

    @property
    def hold_ttl(self) -> timedelta:
        return timedelta(seconds=self.hold_ttl_seconds)

    @property
    def approval_ttl(self) -> timedelta:
        return timedelta(seconds=self.approval_ttl_seconds)

    @property
    def approval_skew(self) -> timedelta:
        return timedelta(seconds=self.approval_clock_skew_seconds)

    @property
    def slot_cache_ttl(self) -> timedelta:
        return timedelta(seconds=self.slot_cache_ttl_seconds)

    @property
    def host_allow_list(self) -> tuple[str, ...]:
        """``ALLOWED_HOSTS`` in force: the default list also allows the IP literal ``HOST`` binds.

        With ``HOST=127.0.0.2`` and the default list, a client calling the address the server
        listens on would otherwise get 421 on every request. An IP literal cannot be rebound by
        DNS, so allowing it keeps the rebinding protection. "The default list" is judged by its
        entries (in any order, as ``.env.example`` spells it); any other list is used exactly.
        Nothing is added for a wildcard bind (``0.0.0.0``, ``::``: no address a client calls),
        an IPv4-mapped or scoped IPv6 address (clients spell those differently in ``Host``).
        """
        if {host.strip().lower() for host in self.allowed_hosts} != set(LOOPBACK_NAMES):
            return self.allowed_hosts
        try:
            address = ipaddress.ip_address(self.host.removeprefix("[").removesuffix("]"))
        except ValueError:
            return self.allowed_hosts
        if isinstance(address, ipaddress.IPv6Address):
            if address.ipv4_mapped is not None or address.scope_id is not None:
                return self.allowed_hosts
            literal = f"[{address}]"
        else:
            literal = str(address)
        if address.is_unspecified or literal in self.allowed_hosts:
            return self.allowed_hosts
        return (*self.allowed_hosts, literal)

    @property
    def quota_limits(self) -> QuotaLimits | None:
        """The quotas in force, or ``None`` for none.

        On by default in ``oauth`` mode; in ``none`` mode only when a ``QUOTA_*`` variable is
        set (a local single user does not ration himself). A variable left unset takes its
        default (30 per caller, 300 in total).
        """
        configured = (self.quota_per_caller_per_minute, self.quota_global_per_minute)
        if self.auth_mode is AuthMode.NONE and configured == (None, None):
            return None
        caller, total = configured
        return QuotaLimits(
            per_caller_per_minute=caller or DEFAULT_QUOTA_PER_CALLER_PER_MINUTE,
            global_per_minute=total or DEFAULT_QUOTA_GLOBAL_PER_MINUTE,
        )

    @property
    def auth_unused_warning(self) -> str | None:
        """A warning when ``AUTH_*`` names an authorization server that ``AUTH_MODE=none`` ignores.

        An operator who set the issuer most likely meant tokens to be required; on loopback the
        server still starts (``check_serving`` refuses any other address without auth).
        """
        named = [
            name
            for name, value in (
                ("AUTH_ISSUER", self.auth_issuer),
                ("AUTH_JWKS_URL", self.auth_jwks_url),
                ("AUTH_RESOURCE", self.auth_resource),
            )
            if value is not None
        ]
        if self.auth_mode is not AuthMode.NONE or not named:
            return None
        return (
            f"{' and '.join(named)} set, but AUTH_MODE=none: no access token is asked for or "
            "checked; set AUTH_MODE=oauth to require them"
        )

    def check_serving(self) -> None:
        """Refuse a combination ``serve`` must not start with (one line naming the setting).

        Raises:
            SettingsError: ``AUTH_MODE=none`` with a non-loopback ``HOST`` (anyone who can reach
                the port would act as the one local principal), or ``AUTH_MODE=oauth`` without
                ``AUTH_ISSUER`` or ``AUTH_RESOURCE``.
        """
        if self.auth_mode is AuthMode.NONE and not is_loopback_host(self.host):
            raise SettingsError(
                f"HOST={self.host!r} is not a loopback address, and AUTH_MODE=none serves "
                "everyone as one unauthenticated principal: bind 127.0.0.1, or set "
                "AUTH_MODE=oauth with AUTH_ISSUER and AUTH_RESOURCE"
            )
        if self.auth_mode is AuthMode.OAUTH:
            missing = [
                name
                for name, value in (
                    ("AUTH_ISSUER", self.auth_issuer),
                    ("AUTH_RESOURCE", self.auth_resource),
                )
                if value is None
            ]
            if missing:
                raise SettingsError(f"AUTH_MODE=oauth needs {' and '.join(missing)}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``env`` (default: ``os.environ``); unknown variables are ignored.

        Raises:
            SettingsError: a value has the wrong type or range.
        """
        source = os.environ if env is None else env
        for name in _LATER:
            if (source.get(name) or "").strip():
                msg = (
                    f"{name} is set, but this release does not support it yet (CONTRACT section "
                    "6 names it for a later capability); unset it, or it would be ignored"
                )
                raise SettingsError(msg)
        values: dict[str, Any] = {}
        for name, (attr, parse) in _VARIABLES.items():
            raw = source.get(name)
            if raw is None or raw.strip() == "":
                continue
            try:
                values[attr] = parse(raw.strip())
            except ValueError as exc:
                raise SettingsError(f"{name}={raw!r}: {exc}") from exc
        return cls(**values)

    def with_overrides(self, **overrides: Any) -> Settings:
        """Apply CLI flags (``None`` means "not given").

        Raises:
            SettingsError: ``--db`` names a database URL, which this release cannot use yet.
        """
        db_path = overrides.get("db_path")
        if db_path is not None:  # the text as typed: a Path would fold "postgresql://" to ":/"
            try:
                overrides["db_path"] = _db_path(str(db_path))
            except ValueError as exc:
                raise SettingsError(f"--db {db_path}: {exc}") from exc
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


_LATER = (
    "BOOKING_DATABASE_URL",
    "BOOKING_DATABASE_LISTEN_URL",
    "APPROVAL_MODE",
    "APPROVAL_NOTIFY_URL",
    "RECEIPT_KEY_FILE",
)
"""Variables CONTRACT section 6 names for capabilities not built yet: refused, never ignored."""


def _db_path(raw: str) -> Path:
    """A SQLite file path; a PostgreSQL URL (CONTRACT section 6) is not supported yet."""
    scheme, colon, _ = raw.partition(":/")  # Path folds "postgresql://" to "postgresql:/"
    if colon and scheme.lower() in {"postgresql", "postgres"}:
        raise ValueError("PostgreSQL is not supported yet; give a SQLite file path")
    return Path(raw)


def _auth_mode(raw: str) -> AuthMode:
    try:
        return AuthMode(raw.lower())
    except ValueError:
        raise ValueError("must be none or oauth") from None


_VARIABLES: dict[str, tuple[str, Any]] = {
    "HOST": ("host", str),
    "PORT": ("port", parse_port),
    "BOOKING_DB_PATH": ("db_path", _db_path),
    "PAYMENT_QUERY_BASE_URL": ("payment_query_base_url", http_url),
    "PAYMENT_PAGE_BASE_URL": ("payment_page_base_url", http_url),
    "HOLD_TTL_SECONDS": ("hold_ttl_seconds", duration(positive_int)),
    "APPROVAL_TTL_SECONDS": ("approval_ttl_seconds", duration(positive_int)),
    "APPROVAL_CLOCK_SKEW_SECONDS": (
        "approval_clock_skew_seconds",
        duration(non_negative_int),
    ),
    "SLOT_CACHE_TTL_SECONDS": ("slot_cache_ttl_seconds", duration(non_negative_int)),
    "PAYMENT_TIMEOUT_SECONDS": ("payment_timeout_seconds", duration(positive_float)),
    "ALLOWED_HOSTS": ("allowed_hosts", comma_list),
    "ALLOWED_ORIGINS": ("allowed_origins", comma_list),
    "BOOKING_DB_BUSY_TIMEOUT_MS": ("db_busy_timeout_ms", duration(positive_int)),
    "AUTH_MODE": ("auth_mode", _auth_mode),
    "AUTH_ISSUER": ("auth_issuer", https_or_loopback_url),
    "AUTH_JWKS_URL": ("auth_jwks_url", https_or_loopback_url),
    "AUTH_RESOURCE": ("auth_resource", https_or_loopback_url),
    "AUTH_ALGORITHMS": ("auth_algorithms", auth_algorithms),
    "AUTH_LEEWAY_SECONDS": ("auth_leeway_seconds", auth_leeway),
    "QUOTA_PER_CALLER_PER_MINUTE": ("quota_per_caller_per_minute", positive_int),
    "QUOTA_GLOBAL_PER_MINUTE": ("quota_global_per_minute", positive_int),
    "TRUSTED_PROXIES": ("trusted_proxies", ip_networks),
    "CLIENT_CLOCK_TOLERANCE_SECONDS": (
        "client_clock_tolerance_seconds",
        duration(non_negative_int),
    ),
    "HTTP_MAX_HEADER_BYTES": ("http_max_header_bytes", positive_int),
    "HTTP_MAX_HEADERS": ("http_max_headers", positive_int),
    "HTTP_HEADER_TIMEOUT_SECONDS": (
        "http_header_timeout_seconds",
        duration(positive_float),
    ),
    "HTTP_BODY_TIMEOUT_SECONDS": ("http_body_timeout_seconds", duration(positive_float)),
    "HTTP_KEEP_ALIVE_SECONDS": ("http_keep_alive_seconds", duration(positive_int)),
    "HTTP_MAX_CONNECTIONS": ("http_max_connections", positive_int),
    "REFUSAL_LOG_LINES_PER_SECOND": ("refusal_log_lines_per_second", positive_int),
}
SETTING_NAMES: frozenset[str] = frozenset(_VARIABLES) | frozenset(_LATER)
"""Every environment variable the server reads (or refuses, :data:`_LATER`)."""

VARIABLE_NAMES = tuple(_VARIABLES)
"""Every environment variable the settings read (README and ``.env.example`` list them all)."""
