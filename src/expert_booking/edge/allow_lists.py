"""Host and Origin allow-lists (DNS-rebinding protection, CONTRACT section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from expert_booking.settings import SettingsError


def _split_authority(authority: str, *, bare_ipv6: bool = False) -> tuple[str, str | None] | None:
    """Split ``host[:port]`` (IPv6 in brackets) into a name and a port; None if malformed.

    ``bare_ipv6`` reads an unbracketed IPv6 literal (``::1``) as ``[::1]``: allowed in
    configuration only. In a ``Host`` header it is malformed (RFC 9110 requires brackets).
    """
    if authority.startswith("["):
        end = authority.find("]") + 1
        name, rest = (authority[:end], authority[end:]) if end else ("", "")
        colon, port = rest[:1], rest[1:]
        if rest and colon != ":":
            name = ""
    elif authority.count(":") > 1:
        if not bare_ipv6:
            return None
        name, colon, port = f"[{authority}]", "", ""
    else:
        name, colon, port = authority.partition(":")
    if not name or (colon and not (port.isascii() and port.isdigit())):
        return None
    return name, port if colon else None


@dataclass(frozen=True, slots=True)
class HostAllowList:
    """Allowed ``Host`` values: names allowed with any or no port, and exact ``name:port`` pairs."""

    any_port: frozenset[str]
    exact: frozenset[str]

    @classmethod
    def from_entries(cls, entries: tuple[str, ...]) -> HostAllowList:
        """Build from ``ALLOWED_HOSTS`` entries (``127.0.0.1``, ``[::1]``, ``example.com:8443``).

        Raises:
            SettingsError: an entry is not a host name with an optional port.
        """
        any_port: set[str] = set()
        exact: set[str] = set()
        for entry in entries:
            split = _split_authority(entry.strip().lower(), bare_ipv6=True)
            if split is None:
                raise SettingsError(f"ALLOWED_HOSTS entry {entry!r} is not host[:port]")
            name, port = split
            if port is None:
                any_port.add(name)
            else:
                exact.add(f"{name}:{port}")
        return cls(frozenset(any_port), frozenset(exact))

    def allows(self, host: str) -> bool:
        """Whether a (trimmed, lower-cased) ``Host`` header value is allowed."""
        split = _split_authority(host)
        if split is None:
            return False
        name, port = split
        return name in self.any_port or (port is not None and f"{name}:{port}" in self.exact)

    def sdk_patterns(self) -> list[str]:
        """The same list for the SDK's ``TransportSecuritySettings`` (``name:*`` needs a port)."""
        return sorted({*self.any_port, *(f"{name}:*" for name in self.any_port), *self.exact})


@dataclass(frozen=True, slots=True)
class OriginAllowList:
    """Allowed ``Origin`` values: ``scheme://host`` with any port, and exact ``scheme://host:port``."""

    any_port: frozenset[str]
    exact: frozenset[str]

    @classmethod
    def from_entries(cls, entries: tuple[str, ...]) -> OriginAllowList:
        """Build from ``ALLOWED_ORIGINS`` entries (``http://127.0.0.1``, ``https://a.example:8443``).

        Raises:
            SettingsError: an entry is not ``scheme://host[:port]``.
        """
        any_port: set[str] = set()
        exact: set[str] = set()
        for entry in entries:
            split = _split_origin(entry.strip().lower().rstrip("/"), bare_ipv6=True)
            if split is None:
                raise SettingsError(f"ALLOWED_ORIGINS entry {entry!r} is not scheme://host[:port]")
            base, port = split
            if port is None:
                any_port.add(base)
            else:
                exact.add(f"{base}:{port}")
        return cls(frozenset(any_port), frozenset(exact))

    def allows(self, origin: str) -> bool:
        """Whether a (trimmed, lower-cased, non-empty) ``Origin`` header value is allowed."""
        split = _split_origin(origin)
        if split is None:
            return False
        base, port = split
        return base in self.any_port or (port is not None and f"{base}:{port}" in self.exact)

    def sdk_patterns(self) -> list[str]:
        """The same list for the SDK's ``TransportSecuritySettings``."""
        return sorted({*self.any_port, *(f"{base}:*" for base in self.any_port), *self.exact})


def _split_origin(origin: str, *, bare_ipv6: bool = False) -> tuple[str, str | None] | None:
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme.isalpha() or not authority or "/" in authority or "@" in authority:
        return None
    split = _split_authority(authority, bare_ipv6=bare_ipv6)
    if split is None:
        return None
    return f"{scheme}://{split[0]}", split[1]
