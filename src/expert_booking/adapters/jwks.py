"""The authorization server's signing keys: discovery, caching and bounded refetch.

Where the keys are: ``AUTH_JWKS_URL`` when set, else the ``jwks_uri`` of the issuer's metadata,
RFC 8414 first (``/.well-known/oauth-authorization-server`` inserted before the issuer's path),
then OpenID Connect Discovery (``/.well-known/openid-configuration`` appended). The metadata's
``issuer`` must equal ``AUTH_ISSUER`` exactly (RFC 8414 section 3.3), and the ``jwks_uri`` must be
``https`` (``http`` only on loopback), like the settings.

Caching: the key set is fetched at the first token and kept; it is fetched again on the next
token after ``max_age_seconds`` (5 min; a removed key stops being trusted within that), and
when a token names a ``kid`` the set lacks (key rotation): at once the first time, then at most
once per ``REFETCH_INTERVAL_SECONDS`` (10 s), so tokens with made-up ``kid`` values cannot make
this server hammer the AS, while a key rotated in right after a scheduled fetch is found by its
first token (unless another unknown ``kid`` came within the interval). After a failed fetch no
fetch of either kind is tried for that interval, and the keys already known stay. Tokens that
arrive together share one fetch: each judges its need again once the fetch before it is done.
Keys whose ``use`` is not ``sig`` are ignored. Keys sharing a ``kid`` are all kept (RFC 7517
section 4.5 allows it for keys of different types): a token gets the first usable one whose
``alg``, ``kty`` and ``crv`` fit its algorithm (``fits``). Each document is read as sent and
at most ``MAX_DOCUMENT_BYTES`` of it (``adapters.http_body``), so a hostile or broken endpoint
cannot make this server buffer or inflate a large body.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt

from expert_booking.adapters.http_body import IDENTITY_HEADERS, read_capped
from expert_booking.addresses import https_or_loopback_url

logger = logging.getLogger("expert_booking.auth")

MAX_AGE_SECONDS: Final = 300.0
REFETCH_INTERVAL_SECONDS: Final = 10.0
MAX_DOCUMENT_BYTES: Final = 256 * 1024
KEY_TYPES: Final[dict[str, tuple[str, str | None]]] = {
    **{f"{family}{bits}": ("RSA", None) for family in ("RS", "PS") for bits in (256, 384, 512)},
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "EdDSA": ("OKP", None),
}
"""The key type (``kty``) and curve (``crv``) each allowed algorithm needs (RFC 7518, RFC 8037)."""


class JwksUnavailableError(Exception):
    """No key set could be fetched, and none is known from before."""


class KeyDocumentError(ValueError):
    """The metadata or key set document is not what RFC 8414 / RFC 7517 describe."""


def metadata_urls(issuer: str) -> tuple[str, str]:
    """The RFC 8414 and the OpenID Connect metadata URLs of ``issuer``, in that order."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    rfc8414 = urlunsplit(
        (parts.scheme, parts.netloc, f"/.well-known/oauth-authorization-server{path}", "", "")
    )
    return rfc8414, f"{issuer.rstrip('/')}/.well-known/openid-configuration"


class JwksCache:
    """The signing keys of one issuer, by ``kid``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        issuer: str,
        jwks_url: str | None = None,
        clock: Callable[[], float],
        max_age_seconds: float = MAX_AGE_SECONDS,
    ) -> None:
        """Keys of ``issuer`` (from ``jwks_url`` if given); ``clock`` is monotonic seconds."""
        self._http = http
        self._issuer = issuer
        self._jwks_url = jwks_url
        self._clock = clock
        self._max_age = max_age_seconds
        self._keys: dict[str, list[dict[str, Any]]] = {}
        self._parsed: dict[tuple[str, str], jwt.PyJWK | None] = {}
        self._fetched_at: float | None = None
        self._failed_at: float | None = None  # the last fetch that failed
        self._missed_at: float | None = None  # the last fetch an unknown kid started
        self._lock = asyncio.Lock()
        self.fetches = 0

    @property
    def max_age_seconds(self) -> float:
        """How long a fetched key set is trusted before it is fetched again."""
        return self._max_age

    async def key(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        """The verification key for a token's ``kid`` and ``alg``; ``None`` if there is none.

        A token without ``kid`` gets the key only when the set holds exactly one.

        Raises:
            JwksUnavailableError: no key set has been fetched yet, and fetching failed now.
        """
        if self._stale():
            await self._refresh(self._stale, unknown_kid=False)
        if self._fetched_at is None:
            raise JwksUnavailableError(f"no signing keys of {self._issuer} could be fetched")
        found = self._lookup(kid)
        if found is None:
            await self._refresh(lambda: self._lookup(kid) is None, unknown_kid=True)
            found = self._lookup(kid)
        if found is None:
            return None
        kid_found, candidates = found
        if (kid_found, algorithm) not in self._parsed:
            self._parsed[kid_found, algorithm] = self._choose(kid_found, candidates, algorithm)
        return self._parsed[kid_found, algorithm]

    def _choose(
        self, kid: str, candidates: list[dict[str, Any]], algorithm: str
    ) -> jwt.PyJWK | None:
        """The first usable entry that fits ``algorithm`` (``fits``).

        When none fits, an entry stating another ``alg`` is still the key (its own algorithm):
        the verifier then refuses the token's algorithm, which is what the caller is told.
        """
        fitting = [jwk for jwk in candidates if fits(jwk, algorithm)]
        if not fitting:
            fitting = [jwk for jwk in candidates if isinstance(jwk.get("alg"), str)][:1]
        parsed = (self._parse(kid, jwk, algorithm) for jwk in fitting)
        return next((key for key in parsed if key is not None), None)

    def _parse(self, kid: str, jwk: dict[str, Any], algorithm: str) -> jwt.PyJWK | None:
        """The key, or ``None`` (logged once per key set) when the entry is not a usable key.

        PyJWT raises its own error for most malformed entries, but a value of the wrong JSON
        type (an ``alg`` that is a list) surfaces as ``TypeError``; a broken entry must refuse
        the tokens naming it, never fail the request.
        """
        try:
            return jwt.PyJWK(jwk, algorithm=None if "alg" in jwk else algorithm)
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            logger.warning("signing key %s of %s is not usable: %s", kid, self._issuer, exc)
            return None

    def _lookup(self, kid: str | None) -> tuple[str, list[dict[str, Any]]] | None:
        if kid is None:
            if len(self._keys) != 1:
                return None
            only = next(iter(self._keys.items()))
            return only if len(only[1]) == 1 else None
        candidates = self._keys.get(kid)
        return None if candidates is None else (kid, candidates)

    def _stale(self) -> bool:
        return self._fetched_at is None or self._clock() - self._fetched_at >= self._max_age

    async def _refresh(self, needed: Callable[[], bool], *, unknown_kid: bool) -> None:
        """Fetch the key set while ``needed()``, unless this kind of fetch's budget is spent.

        ``needed`` is judged again once the lock is held: a fetch another task made meanwhile
        may have answered it. ``unknown_kid``: a token named a ``kid`` the set lacks (else: no
        set yet, or a stale one).
        """
        async with self._lock:
            if not needed():
                return
            now = self._clock()
            if self._recent(self._failed_at, now) or (
                unknown_kid and self._recent(self._missed_at, now)
            ):
                return
            if unknown_kid:
                self._missed_at = now
            try:
                keys = await self._fetch()
            except (httpx.HTTPError, ValueError) as exc:
                self._failed_at = now
                logger.warning("signing keys of %s not fetched: %s", self._issuer, exc)
                return
            self._keys = keys
            self._parsed = {}
            self._fetched_at = self._clock()
            self.fetches += 1

    def _recent(self, at: float | None, now: float) -> bool:
        return at is not None and now - at < REFETCH_INTERVAL_SECONDS

    async def _fetch(self) -> dict[str, list[dict[str, Any]]]:
        if self._jwks_url is None:
            self._jwks_url = await self._discover()
        document = await self._get_json(self._jwks_url)
        raw_keys = document.get("keys")
        if not isinstance(raw_keys, list):
            raise KeyDocumentError(f"{self._jwks_url} is not a JWK Set")
        keys: dict[str, list[dict[str, Any]]] = {}
        for index, jwk in enumerate(raw_keys):
            if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                continue
            kid = jwk.get("kid")
            keys.setdefault(kid if isinstance(kid, str) else f"#{index}", []).append(jwk)
        return keys

    async def _discover(self) -> str:
        errors = []
        for url in metadata_urls(self._issuer):
            try:
                metadata = await self._get_json(url)
            except (httpx.HTTPError, ValueError) as exc:
                errors.append(f"{url}: {exc}")
                continue
            if metadata.get("issuer") != self._issuer:
                errors.append(f"{url}: names issuer {metadata.get('issuer')!r}")
                continue
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                errors.append(f"{url}: no jwks_uri")
                continue
            return https_or_loopback_url(jwks_uri)
        raise KeyDocumentError("no usable authorization server metadata: " + "; ".join(errors))

    async def _get_json(self, url: str) -> Mapping[str, Any]:
        headers = {"accept": "application/json", **IDENTITY_HEADERS}
        async with self._http.stream("GET", url, headers=headers) as response:
            response.raise_for_status()
            try:
                body = await read_capped(response, MAX_DOCUMENT_BYTES)
            except ValueError as exc:
                raise KeyDocumentError(f"{url}: {exc}") from exc
        try:
            document = json.loads(body)
        except RecursionError as exc:  # nesting beyond the parser's depth: not a key document
            raise KeyDocumentError(f"{url}: JSON nested too deeply") from exc
        if not isinstance(document, dict):
            raise KeyDocumentError(f"{url} did not answer a JSON object")
        return document


def fits(jwk: dict[str, Any], algorithm: str) -> bool:
    """Whether a key set entry can verify ``algorithm`` (one of :data:`KEY_TYPES`).

    Its ``alg`` (if a name) is that, and its ``kty`` and ``crv`` (where given as names) are the
    ones the algorithm requires. Values of the wrong JSON type are left to the parse, which logs
    the entry as unusable.
    """
    stated, kty, crv = jwk.get("alg"), jwk.get("kty"), jwk.get("crv")
    required = KEY_TYPES.get(algorithm)
    if required is None or (isinstance(stated, str) and stated != algorithm):
        return False
    key_type, curve = required
    return not (isinstance(kty, str) and kty != key_type) and not (
        curve is not None and isinstance(crv, str) and crv != curve
    )
