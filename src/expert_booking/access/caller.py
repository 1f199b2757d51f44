"""Who a call is counted against: the verified principal, else the peer address.

The rule (seed 003: the caller comes from a trusted source, never from a client-supplied
header): an authenticated request is its principal ``(issuer, subject)``. Otherwise it is the
socket's peer address, unless that peer is one of ``TRUSTED_PROXIES``: then the proxies'
``Forwarded`` header (RFC 7239) or ``X-Forwarded-For`` names the client (a request carrying
both is ambiguous: the trusted peer itself is then the caller).
Those headers are read from the right, the hop the trusted peer added first, skipping further
trusted proxies; the first address not trusted is the caller. When every hop is trusted, the
leftmost is. A hop that is not an IP address (``unknown``, an obfuscated ``_name``) ends the
walk as that token: a trusted proxy chose to name the client so. Headers from an untrusted peer
are ignored entirely, so a client cannot pick its own quota bucket.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class PrincipalLike(Protocol):
    """Anything with a token's issuer and subject (the request context's principal)."""

    @property
    def issuer(self) -> str | None: ...

    @property
    def subject(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Caller:
    """The resolved caller; :attr:`key` keys the quota counter, :meth:`log_value` the logs."""

    kind: Literal["principal", "address"]
    issuer: str | None = None
    subject: str | None = None
    address: str | None = None

    @property
    def key(self) -> str:
        """A string unique per caller (a principal never collides with an address)."""
        if self.kind == "principal":
            return json.dumps(["principal", self.issuer, self.subject])
        return json.dumps(["address", self.address])

    def log_value(self) -> dict[str, str | None]:
        """What a log line says about the caller (no token, no personal data beyond the id)."""
        if self.kind == "principal":
            return {"issuer": self.issuer, "subject": self.subject}
        return {"address": self.address}


def resolve_caller(
    *,
    principal: PrincipalLike | None,
    peer: str | None,
    headers: Iterable[tuple[str, str]],
    trusted_proxies: Sequence[IpNetwork],
) -> Caller:
    """The caller of one request (see the module docstring for the rule).

    Args:
        principal: the verified principal, or ``None`` when the request is not authenticated.
        peer: the socket peer's host (an IP literal), ``None`` when unknown.
        headers: the request headers as (name, value) pairs, in order, repeats included.
        trusted_proxies: the networks of ``TRUSTED_PROXIES``.
    """
    if principal is not None:
        return Caller(kind="principal", issuer=principal.issuer, subject=principal.subject)
    return Caller(kind="address", address=_client_address(peer, headers, trusted_proxies))


def _client_address(
    peer: str | None, headers: Iterable[tuple[str, str]], trusted_proxies: Sequence[IpNetwork]
) -> str:
    peer_address = _ip(peer)
    if peer_address is None:
        return "unknown" if peer is None else peer
    if not _trusted(peer_address, trusted_proxies):
        return str(peer_address)
    hops = _forwarded_hops(headers)
    for hop in reversed(hops):
        address = _ip(hop)
        if address is None:
            return hop
        if not _trusted(address, trusted_proxies):
            return str(address)
    return str(_ip(hops[0])) if hops else str(peer_address)


def _trusted(address: IpAddress, networks: Sequence[IpNetwork]) -> bool:
    return any(address in network for network in networks)


def _forwarded_hops(headers: Iterable[tuple[str, str]]) -> list[str]:
    """The client-side hops, leftmost first, of the one forwarding header the request has.

    ``Forwarded`` ``for=`` nodes, or ``X-Forwarded-For`` items. When both kinds arrive, one of
    them passed the proxy untouched (a proxy that sets only one passes the other on as the
    client sent it), and nothing tells which: then neither is read and the trusted peer itself
    is the caller, so a client can never pick its bucket by adding the other header.
    """
    forwarded: list[str] = []
    x_forwarded_for: list[str] = []
    seen: set[str] = set()
    for name, value in headers:
        lowered = name.lower()
        if lowered == "forwarded":
            forwarded.extend(_forwarded_for_values(value))
        elif lowered == "x-forwarded-for":
            x_forwarded_for.extend(item.strip() for item in value.split(",") if item.strip())
        else:
            continue
        seen.add(lowered)
    if len(seen) > 1:
        return []
    return forwarded or x_forwarded_for


def _forwarded_for_values(value: str) -> list[str]:
    """The ``for=`` node of each RFC 7239 element (``unknown`` when an element has none)."""
    hops = []
    for element in value.split(","):
        node = "unknown"
        for pair in element.split(";"):
            key, _, raw = pair.partition("=")
            if key.strip().lower() == "for":
                node = raw.strip().strip('"') or "unknown"
        hops.append(node)
    return hops


def _ip(node: str | None) -> IpAddress | None:
    """The IP address of a node (``192.0.2.1``, ``192.0.2.1:80``, ``[2001:db8::1]:80``)."""
    if node is None:
        return None
    text = node.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
