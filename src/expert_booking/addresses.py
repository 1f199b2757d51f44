"""Host and URL rules shared by the configuration and the adapters that fetch or serve.

A loopback host is this machine only; an ``http`` URL is accepted only there (a local
authorization server, tests), every other one must be ``https``.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit


def is_loopback_host(host: str) -> bool:
    """``localhost`` or a loopback IP literal (``127.0.0.0/8``, ``::1``, bracketed or not)."""
    if host.casefold() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def https_or_loopback_url(raw: str) -> str:
    """An absolute URL without fragment; ``http`` only on a loopback host (tests, a local AS).

    Raises:
        ValueError: anything else.

    Kept exactly as written (no trailing-slash trimming): an issuer and a resource URI are
    compared with the token's ``iss`` and ``aud`` character for character.
    """
    parts = urlsplit(raw)
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from exc
    if parts.scheme not in {"http", "https"} or not parts.hostname or port == 0:
        raise ValueError("must be an absolute http(s) URL with a host")
    if parts.fragment or "#" in raw:
        raise ValueError("must not have a fragment")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError("must be https (http only on a loopback host)")
    return raw


_BEFORE_AT = re.compile(r"[^/\\@]*@")
"""In a value without an authority, what may be userinfo: each run up to an ``@`` after a slash."""


def shown_url(url: str) -> str:
    """``url`` as a message or log may show it: userinfo, when there is any, becomes ``***``.

    A value that has no authority to ``urlsplit`` (``user:pw@host/mcp``, ``http:/user:pw@host``:
    the typos a "must be an http URL" error echoes) has every run before an ``@`` hidden.
    """
    parts = urlsplit(url)
    if not parts.netloc:
        return _BEFORE_AT.sub("***@", url)
    if parts.username is None:
        return url
    _, _, host = parts.netloc.rpartition("@")  # as urlsplit itself finds the host
    return parts._replace(netloc=f"***@{host}").geturl()
