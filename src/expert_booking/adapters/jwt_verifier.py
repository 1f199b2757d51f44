"""Bearer JWT access tokens (RFC 9068) verified against the issuer's keys: the SDK's verifier.

:class:`JwtAccessTokenVerifier` implements ``mcp.server.auth.provider.TokenVerifier``. A token
is accepted only when, in this order:

1. it is a compact JWS of at most 8 KiB (``MALFORMED``);
2. its header ``alg`` is in ``AUTH_ALGORITHMS`` (``ALGORITHM``; the settings never allow
   ``none`` or ``HS*``, so a token "signed" with the public key as an HMAC secret fails here),
   and its ``typ``, when present, is ``at+jwt`` (RFC 9068) or the generic ``JWT`` that
   Keycloak, Entra ID and Auth0 put on access tokens, never another type such as
   ``logout+jwt`` or ``dpop+jwt`` (``WRONG_TYPE``). An ID token, typed ``JWT`` too, fails on
   its audience (a client id, unless one equals ``AUTH_RESOURCE``) and, carrying no scope, at
   the bearer gate, which requires ``booking:read`` or ``booking:write`` for every method;
3. the issuer's key set has its ``kid`` (``UNKNOWN_KEY``; see ``adapters.jwks`` for rotation)
   and the key verifies the signature with exactly that algorithm (``SIGNATURE``);
4. ``iss`` equals ``AUTH_ISSUER`` (``ISSUER``), ``aud`` is or contains ``AUTH_RESOURCE``
   (``AUDIENCE``, RFC 8707), ``exp`` has not passed and ``nbf`` has (``EXPIRED``,
   ``NOT_YET_VALID``), each with ``AUTH_LEEWAY_SECONDS`` of leeway; ``exp``, ``iss``, ``aud``
   and a non-empty ``sub`` are required (``CLAIMS``).

PyJWT does the parsing, the signature and the registered-claim checks; this module picks the
key, maps PyJWT's exceptions to the reasons above, reads the scopes (``scope``, a
space-separated string; else ``scp``, a list or a string) and caches accepted tokens by their
SHA-256 until they expire (``exp`` plus the leeway, as the first check judged), so a client
reusing its token pays the verification once. Refusals are not cached. The principal is
``(iss, sub)``: ``AccessToken.subject`` and ``claims["iss"]``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import jwt
from mcp.server.auth.provider import AccessToken

from expert_booking.adapters.jwks import JwksCache, JwksUnavailableError
from expert_booking.ports import Clock

logger = logging.getLogger("expert_booking.auth")

MAX_TOKEN_BYTES: Final = 8 * 1024
CACHE_ENTRIES: Final = 10_000
ACCESS_TOKEN_TYPES: Final = frozenset({"at+jwt", "application/at+jwt", "jwt"})
"""``typ`` values (compared in lower case) an access token may carry; it may also have none."""


class RefusalReason(StrEnum):
    """Why a token was refused (logged; the client only learns ``invalid_token``)."""

    MALFORMED = "MALFORMED"
    ALGORITHM = "ALGORITHM"
    WRONG_TYPE = "WRONG_TYPE"
    UNKNOWN_KEY = "UNKNOWN_KEY"
    KEYS_UNAVAILABLE = "KEYS_UNAVAILABLE"
    SIGNATURE = "SIGNATURE"
    ISSUER = "ISSUER"
    AUDIENCE = "AUDIENCE"
    EXPIRED = "EXPIRED"
    NOT_YET_VALID = "NOT_YET_VALID"
    CLAIMS = "CLAIMS"


class TokenRefusedError(Exception):
    """A token failed verification; :attr:`reason` says which check."""

    def __init__(self, reason: RefusalReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else str(reason))
        self.reason = reason


@dataclass(frozen=True, slots=True)
class VerifierPolicy:
    """What a token must say: the settings ``AUTH_ISSUER``, ``AUTH_RESOURCE`` and friends."""

    issuer: str
    resource: str
    algorithms: tuple[str, ...]
    leeway_seconds: int


_CLAIM_ERRORS: Final[tuple[tuple[type[jwt.PyJWTError], RefusalReason], ...]] = (
    (jwt.ExpiredSignatureError, RefusalReason.EXPIRED),
    (jwt.ImmatureSignatureError, RefusalReason.NOT_YET_VALID),
    (jwt.InvalidAudienceError, RefusalReason.AUDIENCE),
    (jwt.InvalidIssuerError, RefusalReason.ISSUER),
    (jwt.InvalidSignatureError, RefusalReason.SIGNATURE),
    (jwt.InvalidAlgorithmError, RefusalReason.ALGORITHM),
    (jwt.InvalidKeyError, RefusalReason.SIGNATURE),
    (jwt.MissingRequiredClaimError, RefusalReason.CLAIMS),
    (jwt.DecodeError, RefusalReason.MALFORMED),
)


class JwtAccessTokenVerifier:
    """``TokenVerifier`` for this server's audience (see the module docstring)."""

    def __init__(self, policy: VerifierPolicy, keys: JwksCache, clock: Clock) -> None:
        """Verify against ``policy`` with the keys of ``keys``; ``clock`` ages the cache."""
        self._policy = policy
        self._keys = keys
        self._clock = clock
        self._accepted: OrderedDict[bytes, tuple[AccessToken, float]] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's protocol: the token's access, or ``None`` (the reason is logged)."""
        try:
            return await self.verify(token)
        except TokenRefusedError as refused:
            logger.info("bearer token refused: %s", refused.reason)
            return None

    async def verify_or_refusal(self, token: str) -> AccessToken | RefusalReason:
        """The token's access, or the reason it was refused (the request gate logs it once)."""
        try:
            return await self.verify(token)
        except TokenRefusedError as refused:
            return refused.reason

    async def verify(self, token: str) -> AccessToken:
        """The token's access.

        Raises:
            TokenRefusedError: the first check the token failed.
        """
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self._clock.now().timestamp()
        cached = self._accepted.get(digest)
        if cached is not None:
            if now < cached[1]:
                self._accepted.move_to_end(digest)
                return cached[0]
            del self._accepted[digest]
        access = await self._verify_uncached(token)
        if access.expires_at is not None:
            # Never longer than a key set is trusted: a key the issuer withdrew must stop
            # admitting its tokens as soon as the key set is fetched anew.
            until = min(access.expires_at + self._policy.leeway_seconds,
                        now + self._keys.max_age_seconds)  # fmt: skip
            self._remember(digest, access, until)
        return access

    def _remember(self, digest: bytes, access: AccessToken, until: float) -> None:
        self._accepted[digest] = (access, until)
        while len(self._accepted) > CACHE_ENTRIES:
            self._accepted.popitem(last=False)

    async def _verify_uncached(self, token: str) -> AccessToken:
        policy = self._policy
        if len(token) > MAX_TOKEN_BYTES:
            raise TokenRefusedError(RefusalReason.MALFORMED, "longer than 8 KiB")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefusedError(RefusalReason.MALFORMED, type(exc).__name__) from exc
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in policy.algorithms:
            raise TokenRefusedError(RefusalReason.ALGORITHM, repr(algorithm))
        token_type = header.get("typ")
        if "typ" in header and (  # absent is fine; null, a number or another type is not
            not isinstance(token_type, str) or token_type.lower() not in ACCESS_TOKEN_TYPES
        ):
            raise TokenRefusedError(RefusalReason.WRONG_TYPE, repr(token_type))
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefusedError(RefusalReason.MALFORMED, "kid is not a string")
        try:
            key = await self._keys.key(kid, algorithm)
        except JwksUnavailableError as exc:
            raise TokenRefusedError(RefusalReason.KEYS_UNAVAILABLE, str(exc)) from exc
        if key is None:
            raise TokenRefusedError(RefusalReason.UNKNOWN_KEY, repr(kid))
        if key.algorithm_name != algorithm:  # the key named states another alg (``adapters.jwks``)
            raise TokenRefusedError(
                RefusalReason.ALGORITHM, f"{algorithm!r} is not the key's {key.algorithm_name!r}"
            )
        claims = _decode(token, key, algorithm, policy)
        return _access(token, claims, policy)


def _decode(token: str, key: jwt.PyJWK, algorithm: str, policy: VerifierPolicy) -> dict[str, Any]:
    try:
        return jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            audience=policy.resource,
            issuer=policy.issuer,
            leeway=policy.leeway_seconds,
            options={"require": ["exp", "iss", "aud", "sub"], "enforce_minimum_key_length": True},
        )
    except jwt.PyJWTError as exc:
        for error_type, reason in _CLAIM_ERRORS:
            if isinstance(exc, error_type):
                raise TokenRefusedError(reason, type(exc).__name__) from exc
        raise TokenRefusedError(RefusalReason.CLAIMS, type(exc).__name__) from exc


def _access(token: str, claims: dict[str, Any], policy: VerifierPolicy) -> AccessToken:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise TokenRefusedError(RefusalReason.CLAIMS, "sub is not a non-empty string")
    client_id = claims.get("client_id", claims.get("azp", ""))
    return AccessToken(
        token=token,
        client_id=client_id if isinstance(client_id, str) else "",
        scopes=_scopes(claims),
        expires_at=int(claims["exp"]),
        resource=policy.resource,
        subject=subject,
        claims=claims,
    )


def _scopes(claims: dict[str, Any]) -> list[str]:
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return list(raw)
    raise TokenRefusedError(RefusalReason.CLAIMS, "scope is neither a string nor a list")
