"""The rules a setting's text must meet: each parser returns the value or raises ``ValueError``.

The message is the rule, written to follow the variable's name (``Settings.from_env`` prefixes
it), never Python's own parse error.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import urlsplit

from expert_booking.access.caller import IpNetwork

SUPPORTED_AUTH_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""Asymmetric JWS algorithms only: ``none`` and the HMAC family (``HS*``) can never be allowed."""

MAX_DURATION = 10**9
"""The ceiling of every duration setting: 31 years of seconds (a TTL added to now stays a date)."""
_Number = TypeVar("_Number", int, float)


def _integer(raw: str, rule: str) -> int:
    """``int(raw)``, refused with ``rule`` instead of Python's own sentence."""
    try:
        return int(raw)
    except ValueError:
        raise ValueError(rule) from None


def positive_int(raw: str) -> int:
    rule = "must be a positive integer"
    value = _integer(raw, rule)
    if value <= 0:
        raise ValueError(rule)
    return value


def non_negative_int(raw: str) -> int:
    rule = "must be zero or a positive integer"
    value = _integer(raw, rule)
    if value < 0:
        raise ValueError(rule)
    return value


def duration(parse: Callable[[str], _Number]) -> Callable[[str], _Number]:
    """``parse``, and at most :data:`MAX_DURATION` (durations feed date and timer arithmetic)."""

    def parsed(raw: str) -> _Number:
        value = parse(raw)
        if value > MAX_DURATION:
            raise ValueError(f"must be at most {MAX_DURATION}")
        return value

    return parsed


MAX_AUTH_LEEWAY_SECONDS = 300


def auth_leeway(raw: str) -> int:
    """Seconds of clock leeway for ``exp``/``nbf``: small, or expired tokens stay valid."""
    value = non_negative_int(raw)
    if value > MAX_AUTH_LEEWAY_SECONDS:
        raise ValueError(f"must be at most {MAX_AUTH_LEEWAY_SECONDS} seconds")
    return value


def parse_port(raw: str) -> int:
    """A TCP port number, 0 (any free port) to 65535; for ``PORT`` and ``--port``.

    Raises:
        ValueError: ``raw`` is not a decimal integer in that range.
    """
    rule = "must be a TCP port (0-65535)"
    value = _integer(raw, rule)
    if not 0 <= value <= 65535:  # noqa: PLR2004 - the TCP port range
        raise ValueError(rule)
    return value


def positive_float(raw: str) -> float:
    rule = "must be a positive, finite number"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(rule) from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(rule)
    return value


def comma_list(raw: str) -> tuple[str, ...]:
    items = tuple(item.strip() for item in raw.split(",") if item.strip())
    if not items:
        raise ValueError("must list at least one value")
    return items


def auth_algorithms(raw: str) -> tuple[str, ...]:
    algorithms = comma_list(raw)
    refused = [name for name in algorithms if name not in SUPPORTED_AUTH_ALGORITHMS]
    if refused:
        raise ValueError(
            f"{', '.join(refused)} not allowed (asymmetric JWS algorithms only, never none "
            f"or HS*: {', '.join(sorted(SUPPORTED_AUTH_ALGORITHMS))})"
        )
    return algorithms


def ip_networks(raw: str) -> tuple[IpNetwork, ...]:
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in comma_list(raw))
    except ValueError as exc:
        raise ValueError(f"must list IP addresses or CIDR networks ({exc})") from exc


def http_url(raw: str) -> str:
    """An http(s) URL with a host and a valid port.

    A URL nobody can connect to (no host, port 0 or out of range) fails at startup with one
    line naming the variable, not as a retryable connection error at every confirmation.
    """
    if not raw.startswith(("http://", "https://")):
        raise ValueError("must be an http(s) URL")
    try:
        parts = urlsplit(raw)
        port = parts.port  # raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from exc
    if not parts.hostname or port == 0:
        raise ValueError("must name a host (and a non-zero port, if any)")
    return raw.rstrip("/")
