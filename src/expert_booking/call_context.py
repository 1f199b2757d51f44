"""Who calls, in which trace, when and from where: one value built per request at the edge.

Every use case takes a ``CallContext`` besides its command. The edge builds it once per
``tools/call`` (from the HTTP request, the ``_meta`` envelope and the clock) and narrows its
span to the logical action's span when ``tool_catalog.call`` reaches a logical tool. Use cases
read what they need of it (the principal for ownership, the trace for the payment query) and
never build one. The client and server times, the locale and the peer are carried as issue 12
asks, for the capabilities to come (approvals recorded server-side, receipts, localized texts);
no use case reads them yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from expert_booking.ports import LOCAL_OWNER, TraceContext


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a request acts for: ``(issuer, subject)``; no issuer for the local caller.

    Without authentication (``AUTH_MODE=none``) every request acts for ``LOCAL``. A verified
    access token makes it ``(token issuer, token subject)``.
    """

    issuer: str | None
    subject: str

    @property
    def owner(self) -> str:
        """The key the store files this caller's bookings under (``local`` for ``LOCAL``)."""
        return self.subject if self.issuer is None else f"{self.issuer} {self.subject}"


LOCAL = Principal(issuer=None, subject=LOCAL_OWNER)


@dataclass(frozen=True, slots=True)
class CallContext:
    """The request a use case serves.

    Attributes:
        principal: Whom the request acts for.
        trace: The W3C trace and span ids of the current action (the logical action once
            ``tool_catalog.call`` reached one), propagated to downstream services.
        client_sent_at: When the client says it sent the request (its stamped time).
        server_received_at: When this server received the request.
        locale: The caller's preferred language tag (``Accept-Language``), if it sent one.
        peer: The peer's network address (``host:port``), when the request came over a socket.
    """

    principal: Principal
    trace: TraceContext
    client_sent_at: datetime
    server_received_at: datetime
    locale: str | None = None
    peer: str | None = None

    def in_span(self, trace: TraceContext) -> CallContext:
        """The same request seen from a child action (its own span id)."""
        return replace(self, trace=trace)
