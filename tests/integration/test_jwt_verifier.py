"""The JWT access-token verifier against a real authorization server (npm oidc-provider).

Tokens the AS issues are the accepted case and the wrong-audience case; the other refusals are
forged here with PyJWT / cryptography, signed with the AS's own key where the signature must
be right for the claim check to be what refuses them.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from mcp.server.auth.provider import TokenVerifier

from expert_booking.adapters.clock import SystemClock
from expert_booking.adapters.jwks import JwksCache
from expert_booking.adapters.jwt_verifier import (
    JwtAccessTokenVerifier,
    RefusalReason,
    TokenRefusedError,
    VerifierPolicy,
)
from harness.authorization_server import AuthorizationServer, Key, Resource
from tests import tokens
from tests.tokens import alg_none, b64, hs256_with_public_key, sign, tampered_signature

RESOURCE = "http://127.0.0.1:1/mcp"
OTHER_RESOURCE = "http://127.0.0.1:2/mcp"

pytestmark = pytest.mark.anyio


class Monotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MovableClock:
    """The system time plus an offset a test can move."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return SystemClock().now() + self.offset


class CountingKeys(JwksCache):
    lookups = 0

    async def key(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        self.lookups += 1
        return await super().key(kid, algorithm)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthorizationServer]:
    with AuthorizationServer(
        resources=[Resource(RESOURCE), Resource(OTHER_RESOURCE)],
        keys=[Key.rsa("rsa-1"), Key.ec("ec-1")],
    ) as running:
        yield running


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def make_verifier(
    http: httpx.AsyncClient,
    issuer: str,
    *,
    monotonic: Monotonic | None = None,
    clock: MovableClock | None = None,
    jwks_url: str | None = None,
    algorithms: tuple[str, ...] = ("RS256", "ES256"),
) -> tuple[JwtAccessTokenVerifier, CountingKeys]:
    keys = CountingKeys(http, issuer=issuer, jwks_url=jwks_url, clock=monotonic or Monotonic())
    policy = VerifierPolicy(
        issuer=issuer, resource=RESOURCE, algorithms=algorithms, leeway_seconds=10
    )
    return JwtAccessTokenVerifier(policy, keys, clock or MovableClock()), keys


@pytest.fixture
def verifier(http: httpx.AsyncClient, auth_server: AuthorizationServer) -> JwtAccessTokenVerifier:
    return make_verifier(http, auth_server.issuer)[0]


def claims(auth_server: AuthorizationServer, **overrides: Any) -> dict[str, Any]:
    """The claims of a valid read token for this module's resource."""
    return tokens.claims(auth_server, RESOURCE, **overrides)


async def refused(verifier: JwtAccessTokenVerifier, token: str) -> RefusalReason:
    with pytest.raises(TokenRefusedError) as excinfo:
        await verifier.verify(token)
    assert await verifier.verify_token(token) is None
    return excinfo.value.reason


async def test_it_is_the_sdks_token_verifier(verifier: JwtAccessTokenVerifier) -> None:
    typed: TokenVerifier = verifier
    assert typed is verifier


async def test_a_token_the_authorization_server_issued_for_this_resource_is_accepted(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = auth_server.access_token(RESOURCE, "booking:read booking:write")
    access = await verifier.verify_token(token)
    assert access is not None
    assert access.subject == "booking-agent"
    assert access.client_id == "booking-agent"
    assert access.scopes == ["booking:read", "booking:write"]
    assert access.resource == RESOURCE
    assert access.claims is not None
    assert access.claims["iss"] == auth_server.issuer
    assert access.expires_at is not None
    assert access.expires_at > time.time()


async def test_an_es256_token_is_accepted(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = sign(auth_server, claims(auth_server), key=auth_server.keys[1])
    access = await verifier.verify(token)
    assert access.subject == "forged-subject"


async def test_scopes_are_read_from_scp_too(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = sign(auth_server, claims(auth_server, scope=None, scp=["booking:write"]))
    assert (await verifier.verify(token)).scopes == ["booking:write"]


@pytest.mark.parametrize("token", ["", "not-a-jwt", "a.b.c", "x" * 9000])
async def test_a_missing_or_malformed_token_is_refused(
    verifier: JwtAccessTokenVerifier, token: str
) -> None:
    assert await refused(verifier, token) is RefusalReason.MALFORMED


async def test_an_opaque_token_issued_without_a_resource_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    response = auth_server.token(None, "booking:read")
    assert response.status_code == 200
    assert await refused(verifier, response.json()["access_token"]) is RefusalReason.MALFORMED


async def test_an_expired_token_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    now = int(time.time())
    token = sign(auth_server, claims(auth_server, iat=now - 600, exp=now - 60))
    assert await refused(verifier, token) is RefusalReason.EXPIRED


async def test_a_token_expired_within_the_leeway_is_accepted(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    now = int(time.time())
    token = sign(auth_server, claims(auth_server, iat=now - 600, exp=now - 3))
    assert (await verifier.verify(token)).subject == "forged-subject"


async def test_a_token_not_yet_valid_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = sign(auth_server, claims(auth_server, nbf=int(time.time()) + 120))
    assert await refused(verifier, token) is RefusalReason.NOT_YET_VALID


async def test_a_token_of_another_issuer_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = sign(auth_server, claims(auth_server, iss="http://127.0.0.1:9/other-issuer"))
    assert await refused(verifier, token) is RefusalReason.ISSUER


async def test_a_token_the_server_issued_for_another_resource_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = auth_server.access_token(OTHER_RESOURCE, "booking:read")
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == OTHER_RESOURCE
    assert await refused(verifier, token) is RefusalReason.AUDIENCE


async def test_an_audience_list_must_contain_this_resource(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    accepted = sign(auth_server, claims(auth_server, aud=[OTHER_RESOURCE, RESOURCE]))
    assert (await verifier.verify(accepted)).resource == RESOURCE
    other = sign(auth_server, claims(auth_server, aud=[OTHER_RESOURCE, RESOURCE + "/"]))
    assert await refused(verifier, other) is RefusalReason.AUDIENCE


async def test_a_token_with_a_tampered_signature_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = tampered_signature(auth_server.access_token(RESOURCE))
    assert await refused(verifier, token) is RefusalReason.SIGNATURE


async def test_a_token_with_a_tampered_payload_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    head, body, signature = auth_server.access_token(RESOURCE, "booking:read").split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["scope"] = "booking:read booking:write"
    forged = f"{head}.{b64(json.dumps(payload).encode())}.{signature}"
    assert await refused(verifier, forged) is RefusalReason.SIGNATURE


async def test_a_token_signed_by_another_key_under_the_servers_kid_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    impostor = Key.rsa(auth_server.keys[0].kid)
    token = sign(auth_server, claims(auth_server), key=impostor)
    assert await refused(verifier, token) is RefusalReason.SIGNATURE


async def test_alg_none_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = alg_none(auth_server, claims(auth_server))
    assert await refused(verifier, token) is RefusalReason.ALGORITHM


async def test_hs256_signed_with_the_public_key_is_refused(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    token = hs256_with_public_key(auth_server, claims(auth_server))
    assert await refused(verifier, token) is RefusalReason.ALGORITHM


async def test_hs256_is_refused_even_by_a_policy_that_lists_it(
    http: httpx.AsyncClient, auth_server: AuthorizationServer
) -> None:
    """The settings never allow HS*; the key itself refuses it too (its alg is RS256)."""
    lax, _ = make_verifier(http, auth_server.issuer, algorithms=("HS256", "RS256"))
    token = hs256_with_public_key(auth_server, claims(auth_server))
    assert await refused(lax, token) is RefusalReason.ALGORITHM


async def test_a_token_with_an_unknown_kid_is_refused_and_refetches_are_bounded(
    http: httpx.AsyncClient, auth_server: AuthorizationServer
) -> None:
    monotonic = Monotonic()
    verifier, keys = make_verifier(http, auth_server.issuer, monotonic=monotonic)
    stranger = Key.rsa("never-published")
    for index in range(5):
        token = sign(auth_server, claims(auth_server, jti=str(index)), key=stranger)
        assert await refused(verifier, token) is RefusalReason.UNKNOWN_KEY
    assert keys.fetches == 2  # the first fetch, one refetch for the first unknown kid; then 10 s
    monotonic.now += 10
    assert await refused(verifier, sign(auth_server, claims(auth_server), key=stranger)) is (
        RefusalReason.UNKNOWN_KEY
    )
    assert keys.fetches == 3


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "JWT", None])
async def test_an_access_token_may_be_typed_at_jwt_or_jwt_or_not_at_all(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer, typ: str | None
) -> None:
    """RFC 9068's type, and the generic one common issuers (Keycloak, Entra ID) use."""
    token = sign(auth_server, claims(auth_server), headers={"typ": typ})
    assert jwt.get_unverified_header(token).get("typ") == typ
    assert (await verifier.verify(token)).subject


@pytest.mark.parametrize("typ", ["logout+jwt", "dpop+jwt", "secevent+jwt", "JOSE", 1])
async def test_a_jwt_of_another_type_is_no_access_token(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer, typ: object
) -> None:
    token = sign(auth_server, claims(auth_server), headers={"typ": typ})
    assert await refused(verifier, token) is RefusalReason.WRONG_TYPE


async def test_an_explicit_null_typ_is_not_an_absent_one(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    """PyJWT drops ``typ: None`` when signing, so the header is written by hand here."""
    key = auth_server.keys[0]
    header = b64(json.dumps({"alg": key.alg, "kid": key.kid, "typ": None}).encode())
    body = b64(json.dumps(claims(auth_server)).encode())
    signing_input = f"{header}.{body}".encode()
    signature = jwt.get_algorithm_by_name(key.alg).sign(signing_input, key.private)
    token = f"{header}.{body}.{b64(signature)}"
    assert await refused(verifier, token) is RefusalReason.WRONG_TYPE


async def test_an_id_token_is_refused_by_its_audience(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer
) -> None:
    """Typed ``JWT`` like many access tokens, but its audience is the client, not this server."""
    token = sign(auth_server, claims(auth_server, aud="booking-agent"), headers={"typ": "JWT"})
    assert await refused(verifier, token) is RefusalReason.AUDIENCE


@pytest.mark.parametrize("missing", ["sub", "exp", "aud"])
async def test_required_claims_must_be_present(
    verifier: JwtAccessTokenVerifier, auth_server: AuthorizationServer, missing: str
) -> None:
    token = sign(auth_server, claims(auth_server, **{missing: None}))
    assert await refused(verifier, token) is RefusalReason.CLAIMS


async def test_an_accepted_token_is_cached_until_it_expires(
    http: httpx.AsyncClient, auth_server: AuthorizationServer
) -> None:
    clock = MovableClock()
    verifier, keys = make_verifier(http, auth_server.issuer, clock=clock)
    token = auth_server.access_token(RESOURCE)
    first = await verifier.verify(token)
    assert await verifier.verify(token) is first
    assert keys.lookups == 1
    assert first.expires_at is not None
    clock.offset = timedelta(seconds=first.expires_at + 11 - time.time())
    await verifier.verify(token)  # past exp + leeway by this clock: verified afresh
    assert keys.lookups == 2


async def test_keys_come_from_auth_jwks_url_when_it_is_set(
    http: httpx.AsyncClient, auth_server: AuthorizationServer
) -> None:
    metadata = (await http.get(f"{auth_server.issuer}/.well-known/openid-configuration")).json()
    verifier, _ = make_verifier(http, auth_server.issuer, jwks_url=metadata["jwks_uri"])
    assert (await verifier.verify(auth_server.access_token(RESOURCE))).subject == "booking-agent"


async def test_metadata_naming_another_issuer_gives_no_keys(
    http: httpx.AsyncClient, auth_server: AuthorizationServer
) -> None:
    verifier, _ = make_verifier(http, auth_server.issuer + "/")
    token = sign(auth_server, claims(auth_server, iss=auth_server.issuer + "/"))
    assert await refused(verifier, token) is RefusalReason.KEYS_UNAVAILABLE


async def test_a_rotated_key_is_fetched_once_its_kid_appears(http: httpx.AsyncClient) -> None:
    with AuthorizationServer(resources=[Resource(RESOURCE)], keys=[Key.rsa("old")]) as server:
        monotonic = Monotonic()
        verifier, keys = make_verifier(http, server.issuer, monotonic=monotonic)
        assert (await verifier.verify(server.access_token(RESOURCE))).subject == "booking-agent"
        server.rotate([Key.rsa("new"), server.keys[0]])
        rotated = server.access_token(RESOURCE, "booking:write")
        assert jwt.get_unverified_header(rotated)["kid"] == "new"
        # Right after the first fetch: the new kid's first token fetches the set at once.
        assert (await verifier.verify(rotated)).scopes == ["booking:write"]
        assert keys.fetches == 2


async def test_a_token_of_a_withdrawn_key_is_refused_once_the_key_set_is_fetched_anew(
    http: httpx.AsyncClient,
) -> None:
    with AuthorizationServer(resources=[Resource(RESOURCE)], keys=[Key.rsa("old")]) as server:
        monotonic, clock = Monotonic(), MovableClock()
        verifier, keys = make_verifier(http, server.issuer, monotonic=monotonic, clock=clock)
        token = server.access_token(RESOURCE)  # valid for 600 s
        assert (await verifier.verify(token)).subject == "booking-agent"
        server.rotate([Key.rsa("new")])  # the issuer withdraws "old"
        monotonic.now += keys.max_age_seconds
        clock.offset = timedelta(seconds=keys.max_age_seconds)
        assert await refused(verifier, token) is RefusalReason.UNKNOWN_KEY
