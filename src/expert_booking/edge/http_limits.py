"""The bounds on what a client controls below ASGI (``HTTP_*`` settings), as values.

:class:`HttpLimits` holds them for ``edge/http_protocol.py``, which enforces them where the
bytes arrive; the descriptor arithmetic (``FD_RESERVE``, :func:`connection_cap`) is here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from expert_booking.settings import Settings

FD_RESERVE: Final = 64
"""Descriptors kept free of served connections (database, log, payment client, listening
socket); ``REFUSING_CONNECTIONS`` of them may hold connections waiting for their 503."""
REFUSING_CONNECTIONS: Final = 8
CHUNK_SLACK_BYTES: Final = 64 * 1024
"""What one read may carry beyond a request's bounds (the start of the next request)."""


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The bounds (``HTTP_*`` settings); ``max_connections`` already fits the descriptor limit."""

    max_header_bytes: int
    max_headers: int
    header_timeout: float
    body_timeout: float
    max_connections: int
    max_body_bytes: int = 32 * 1024

    @property
    def max_tail_bytes(self) -> int:
        """Bytes a request may send after its header section: body, chunk framing, trailers.

        Four times the body limit leaves room for chunk framing; past it the application's own
        413 (or an endless trailer or chunk extension) is not waited for.
        """
        return 4 * self.max_body_bytes + self.max_header_bytes + CHUNK_SLACK_BYTES

    @property
    def hard_max_connections(self) -> int:
        """Open connections beyond which a new one is closed at once, unanswered."""
        return self.max_connections + REFUSING_CONNECTIONS

    @classmethod
    def from_settings(cls, settings: Settings, descriptor_limit: int) -> HttpLimits:
        """The ``HTTP_*`` settings, connections capped by :func:`connection_cap`."""
        return cls(
            max_header_bytes=settings.http_max_header_bytes,
            max_headers=settings.http_max_headers,
            header_timeout=settings.http_header_timeout_seconds,
            body_timeout=settings.http_body_timeout_seconds,
            max_connections=connection_cap(settings.http_max_connections, descriptor_limit),
            max_body_bytes=settings.max_body_bytes,
        )


def connection_cap(configured: int, descriptor_limit: int) -> int:
    """``configured``, lowered so connections leave ``FD_RESERVE`` descriptors free (at least 1)."""
    return max(1, min(configured, descriptor_limit - FD_RESERVE))
