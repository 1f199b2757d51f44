"""JWKS discovery and caching rules, with the issuer's endpoints stubbed (respx)."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator

import httpx
import pytest
import respx
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from expert_booking.adapters.jwks import (
    KEY_TYPES,
    MAX_DOCUMENT_BYTES,
    JwksCache,
    JwksUnavailableError,
    metadata_urls,
)
from expert_booking.setting_values import SUPPORTED_AUTH_ALGORITHMS

ISSUER = "https://login.example/realms/booking"
JWKS = "https://login.example/realms/booking/certs"

pytestmark = pytest.mark.anyio


class Monotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def jwk(kid: str, use: str | None = "sig") -> dict[str, object]:
    key = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()).public_key(), as_dict=True)
    return {**key, "kid": kid, **({"use": use} if use else {})}


def key_set(*kids: str) -> httpx.Response:
    """A JWKS answer with a fresh signing key per ``kid``."""
    return httpx.Response(200, json={"keys": [jwk(kid) for kid in kids]})


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def test_metadata_urls_insert_rfc8414_before_the_path_and_append_openid() -> None:
    assert metadata_urls(ISSUER) == (
        "https://login.example/.well-known/oauth-authorization-server/realms/booking",
        "https://login.example/realms/booking/.well-known/openid-configuration",
    )
    assert metadata_urls("https://login.example") == (
        "https://login.example/.well-known/oauth-authorization-server",
        "https://login.example/.well-known/openid-configuration",
    )


@respx.mock
async def test_openid_metadata_is_the_fallback_and_encryption_keys_are_ignored(
    http: httpx.AsyncClient,
) -> None:
    rfc8414, openid = metadata_urls(ISSUER)
    respx.get(rfc8414).mock(return_value=httpx.Response(404))
    respx.get(openid).mock(
        return_value=httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": JWKS})
    )
    respx.get(JWKS).mock(
        return_value=httpx.Response(200, json={"keys": [jwk("a"), jwk("enc", use="enc")]})
    )
    keys = JwksCache(http, issuer=ISSUER, clock=Monotonic())
    found = await keys.key("a", "ES256")
    assert found is not None
    assert found.algorithm_name == "ES256"
    assert await keys.key("enc", "ES256") is None


@respx.mock
async def test_a_jwks_uri_that_is_plain_http_off_loopback_is_refused(
    http: httpx.AsyncClient,
) -> None:
    rfc8414, _ = metadata_urls(ISSUER)
    respx.get(rfc8414).mock(
        return_value=httpx.Response(
            200, json={"issuer": ISSUER, "jwks_uri": "http://login.example/certs"}
        )
    )
    with pytest.raises(JwksUnavailableError):
        await JwksCache(http, issuer=ISSUER, clock=Monotonic()).key("a", "ES256")


@respx.mock
async def test_a_failed_refresh_keeps_the_keys_already_known(http: httpx.AsyncClient) -> None:
    route = respx.get(JWKS)
    route.mock(return_value=key_set("a"))
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock, max_age_seconds=60)
    assert await keys.key("a", "ES256") is not None
    route.mock(return_value=httpx.Response(503))
    clock.now += 61
    assert await keys.key("a", "ES256") is not None
    assert route.call_count == 2


@respx.mock
async def test_until_a_first_fetch_succeeds_attempts_are_rate_limited_too(
    http: httpx.AsyncClient,
) -> None:
    route = respx.get(JWKS).mock(return_value=httpx.Response(503))
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock)
    for _ in range(3):
        with pytest.raises(JwksUnavailableError):
            await keys.key("a", "ES256")
    assert route.call_count == 1
    clock.now += 10
    route.mock(return_value=key_set("a"))
    assert await keys.key("a", "ES256") is not None


@respx.mock
async def test_an_unknown_kid_refetches_at_once_then_at_most_once_per_interval(
    http: httpx.AsyncClient,
) -> None:
    route = respx.get(JWKS).mock(return_value=key_set("a"))
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock)
    assert await keys.key("a", "ES256") is not None
    route.mock(return_value=key_set("a", "b"))
    assert await keys.key("b", "ES256") is not None  # rotated in: found by its first token
    for made_up in ("x", "y", "z"):
        assert await keys.key(made_up, "ES256") is None
    assert route.call_count == 2  # the first fetch and "b"'s; the made-up kids wait 10 s
    clock.now += 10
    assert await keys.key("w", "ES256") is None
    assert route.call_count == 3


class SlowKeySet:
    """A JWKS endpoint that answers ``keys`` only once released, counting its requests."""

    def __init__(self, *kids: str) -> None:
        self.body = {"keys": [jwk(kid) for kid in kids]}
        self.asked = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def __call__(self, _request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.asked.set()
        await self.release.wait()
        return httpx.Response(200, json=self.body)


async def _together(keys: JwksCache, endpoint: SlowKeySet, kid: str) -> list[object]:
    """Twenty lookups of ``kid`` at once, the first fetch held open until all are waiting."""
    lookups = asyncio.gather(*(keys.key(kid, "ES256") for _ in range(20)))
    await asyncio.wait_for(endpoint.asked.wait(), 5)
    endpoint.release.set()
    return list(await asyncio.wait_for(lookups, 5))


@respx.mock
async def test_tokens_that_arrive_together_share_one_fetch(http: httpx.AsyncClient) -> None:
    first = SlowKeySet("a")
    respx.get(JWKS).mock(side_effect=first)
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic())
    assert all(found is not None for found in await _together(keys, first, "a"))
    assert first.calls == 1
    rotated = SlowKeySet("a", "b")
    respx.get(JWKS).mock(side_effect=rotated)
    assert all(found is not None for found in await _together(keys, rotated, "b"))
    assert rotated.calls == 1


@respx.mock
async def test_after_a_failed_fetch_an_unknown_kid_waits_the_interval_too(
    http: httpx.AsyncClient,
) -> None:
    route = respx.get(JWKS).mock(return_value=key_set("a"))
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock, max_age_seconds=60)
    assert await keys.key("a", "ES256") is not None
    clock.now += 60
    route.mock(return_value=httpx.Response(503))
    assert await keys.key("a", "ES256") is not None  # the scheduled fetch fails: "a" stays
    route.mock(return_value=key_set("a", "b"))
    assert await keys.key("b", "ES256") is None
    assert route.call_count == 2
    clock.now += 10
    assert await keys.key("b", "ES256") is not None
    assert route.call_count == 3


@respx.mock
async def test_a_token_without_kid_gets_the_key_only_when_there_is_one(
    http: httpx.AsyncClient,
) -> None:
    route = respx.get(JWKS).mock(return_value=key_set("a"))
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock, max_age_seconds=1)
    assert await keys.key(None, "ES256") is not None
    route.mock(return_value=key_set("a", "b"))
    clock.now += 10
    assert await keys.key(None, "ES256") is None


class Stream(httpx.AsyncByteStream):
    """A body of ``chunks`` pieces of 64 KiB, counting how many were read."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.read += 1
            yield b" " * 65536


@respx.mock
async def test_a_key_set_over_the_cap_is_refused_after_reading_no_more_than_the_cap(
    http: httpx.AsyncClient,
) -> None:
    """Read as it travels: a 64 MiB answer without a length stops at the 256 KiB cap."""
    body = Stream(1024)
    respx.get(JWKS).mock(return_value=httpx.Response(200, stream=body))
    with pytest.raises(JwksUnavailableError):
        await JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic()).key("a", "ES256")
    assert body.read == MAX_DOCUMENT_BYTES // 65536 + 1


@respx.mock
async def test_a_key_set_declaring_a_length_over_the_cap_is_not_read(
    http: httpx.AsyncClient,
) -> None:
    body = Stream(8)
    headers = {"content-length": str(MAX_DOCUMENT_BYTES + 1)}
    respx.get(JWKS).mock(return_value=httpx.Response(200, headers=headers, stream=body))
    with pytest.raises(JwksUnavailableError):
        await JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic()).key("a", "ES256")
    assert body.read == 0


@respx.mock
async def test_key_documents_are_asked_for_as_sent_and_a_compressed_one_is_refused(
    http: httpx.AsyncClient,
) -> None:
    """A compressed body could inflate far past the cap: it is refused, never decoded."""
    document = json.dumps({"keys": [jwk("a")]}).encode()
    route = respx.get(JWKS).mock(
        return_value=httpx.Response(
            200, headers={"content-encoding": "gzip"}, content=gzip.compress(document)
        )
    )
    with pytest.raises(JwksUnavailableError):
        await JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic()).key("a", "ES256")
    assert route.calls.last.request.headers["accept-encoding"] == "identity"


@respx.mock
async def test_a_key_set_entry_that_is_no_usable_key_refuses_its_tokens_and_is_logged_once(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    broken = {"kty": "RSA", "n": "AQAB", "e": "AQAB", "alg": ["RS256"], "kid": "b", "use": "sig"}
    respx.get(JWKS).mock(return_value=httpx.Response(200, json={"keys": [jwk("a"), broken]}))
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic())
    with caplog.at_level("WARNING", logger="expert_booking.auth"):
        assert await keys.key("b", "RS256") is None
        assert await keys.key("b", "RS256") is None
    assert [r.getMessage() for r in caplog.records if "not usable" in r.getMessage()] == [
        f"signing key b of {ISSUER} is not usable: unhashable type: 'list'"
    ]
    assert await keys.key("a", "ES256") is not None


@respx.mock
async def test_a_key_document_nested_too_deeply_is_a_failed_fetch(
    http: httpx.AsyncClient,
) -> None:
    depth = 50_000  # 100 KB, under the size cap, far beyond the parser's recursion limit
    nested = httpx.Response(200, content=b"[" * depth + b"]" * depth)
    route = respx.get(JWKS).mock(return_value=nested)
    clock = Monotonic()
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=clock)
    for _ in range(3):
        with pytest.raises(JwksUnavailableError):
            await keys.key("a", "ES256")
    assert route.call_count == 1  # the failed fetch backs off like any other
    clock.now += 10
    route.mock(return_value=key_set("a"))
    assert await keys.key("a", "ES256") is not None


@respx.mock
async def test_keys_sharing_a_kid_each_verify_their_own_algorithm(
    http: httpx.AsyncClient,
) -> None:
    """RFC 7517 section 4.5 lets keys of different types share a kid (one key set used to keep
    only the last, so tokens signed with the other were refused)."""
    ec_key = {**jwk("shared"), "alg": "ES256"}
    rsa_key = {
        **RSAAlgorithm.to_jwk(
            rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key(),
            as_dict=True,
        ),
        "kid": "shared",
        "use": "sig",
        "alg": "RS256",
    }
    respx.get(JWKS).mock(return_value=httpx.Response(200, json={"keys": [ec_key, rsa_key]}))
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic())
    for algorithm, stated in (("ES256", ec_key), ("RS256", rsa_key)):
        found = await keys.key("shared", algorithm)
        assert found is not None
        assert (found.key_type, found.algorithm_name) == (stated["kty"], algorithm)
    assert await keys.key(None, "ES256") is None  # two keys: a token must name one


@respx.mock
async def test_keys_sharing_a_kid_without_alg_are_told_apart_by_type_and_curve(
    http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither states ``alg``: the kty and crv decide, and a healthy key is never logged."""
    p384 = ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP384R1()).public_key(), as_dict=True)
    rsa_key = RSAAlgorithm.to_jwk(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key(), as_dict=True
    )
    entries = [{**entry, "kid": "shared"} for entry in (rsa_key, p384, jwk("x"))]
    respx.get(JWKS).mock(return_value=httpx.Response(200, json={"keys": entries}))
    keys = JwksCache(http, issuer=ISSUER, jwks_url=JWKS, clock=Monotonic())
    with caplog.at_level("WARNING", logger="expert_booking.auth"):
        for algorithm, curve in (("ES256", "secp256r1"), ("ES384", "secp384r1")):
            found = await keys.key("shared", algorithm)
            assert found is not None
            assert (found.key_type, found.key.curve.name) == ("EC", curve)
        found = await keys.key("shared", "RS256")
        assert found is not None
        assert found.key_type == "RSA"
        assert await keys.key("shared", "EdDSA") is None
    assert caplog.records == []


def test_every_algorithm_the_settings_allow_has_its_key_type() -> None:
    assert set(KEY_TYPES) == SUPPORTED_AUTH_ALGORITHMS
