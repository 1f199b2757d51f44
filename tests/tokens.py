"""Access tokens a test forges against the real authorization server's keys (or on purpose not).

The AS (``harness.authorization_server``) issues the honest tokens; these build the ones it
never would: claims it would not sign, foreign keys, ``alg: none``, HS256 keyed with the
public key. Signed with the AS's own key where the signature must be right so that the claim
check is what refuses them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization

from harness.authorization_server import AuthorizationServer, Key


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def claims(auth_server: AuthorizationServer, resource: str, **overrides: Any) -> dict[str, Any]:
    """The claims of a valid read token for ``resource``; an override of ``None`` drops one."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": auth_server.issuer,
        "sub": "forged-subject",
        "aud": resource,
        "iat": now,
        "exp": now + 300,
        "scope": "booking:read",
        "client_id": "booking-agent",
    }
    base.update(overrides)
    return {name: value for name, value in base.items() if value is not None}


def sign(
    auth_server: AuthorizationServer,
    body: dict[str, Any],
    *,
    key: Key | None = None,
    headers: dict[str, Any] | None = None,
) -> str:
    """``body`` as an RFC 9068 JWT signed by ``key`` (default: the AS's signing key)."""
    chosen = key or auth_server.keys[0]
    header = {"kid": chosen.kid, "typ": "at+jwt", **(headers or {})}
    return jwt.encode(body, chosen.private, algorithm=chosen.alg, headers=header)


def alg_none(auth_server: AuthorizationServer, body: dict[str, Any]) -> str:
    """An unsigned token (``alg: none``) naming the AS's key."""
    header = {"alg": "none", "typ": "at+jwt", "kid": auth_server.keys[0].kid}
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}."


def hs256_with_public_key(auth_server: AuthorizationServer, body: dict[str, Any]) -> str:
    """The classic confusion attack: the RSA public key (PEM) as the HMAC secret."""
    public = auth_server.keys[0].private.public_key()
    secret = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "at+jwt", "kid": auth_server.keys[0].kid}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


def tampered_signature(token: str) -> str:
    """``token`` with the first character of its signature changed."""
    head, body, signature = token.split(".")
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    return f"{head}.{body}.{flipped}"
