"""Caller resolution: the principal, else the peer; forwarding headers only from trusted proxies."""

from __future__ import annotations

import ipaddress

import pytest

from expert_booking.access.caller import Caller, resolve_caller
from expert_booking.call_context import LOCAL, Principal

PROXIES = (ipaddress.ip_network("10.0.0.0/24"), ipaddress.ip_network("2001:db8::/64"))


def resolve(
    peer: str | None, *headers: tuple[str, str], principal: Principal | None = None
) -> Caller:
    return resolve_caller(principal=principal, peer=peer, headers=headers, trusted_proxies=PROXIES)


def test_an_authenticated_request_is_its_principal_whatever_the_headers_say() -> None:
    caller = resolve(
        "10.0.0.5",
        ("X-Forwarded-For", "198.51.100.7"),
        principal=Principal("https://login.example", "user-1"),
    )
    assert caller == Caller(kind="principal", issuer="https://login.example", subject="user-1")
    assert caller.log_value() == {"issuer": "https://login.example", "subject": "user-1"}


def test_without_a_principal_the_peer_address_is_the_caller() -> None:
    assert resolve("198.51.100.7") == Caller(kind="address", address="198.51.100.7")


def test_forwarding_headers_from_an_untrusted_peer_are_ignored() -> None:
    caller = resolve(
        "198.51.100.7",
        ("X-Forwarded-For", "203.0.113.9"),
        ("Forwarded", "for=203.0.113.9"),
    )
    assert caller.address == "198.51.100.7"


def test_a_trusted_proxy_names_the_client_in_x_forwarded_for() -> None:
    assert resolve("10.0.0.5", ("X-Forwarded-For", "203.0.113.9")).address == "203.0.113.9"


def test_the_rightmost_untrusted_hop_wins_so_a_client_cannot_prepend_its_own_choice() -> None:
    caller = resolve("10.0.0.5", ("X-Forwarded-For", "1.2.3.4, 203.0.113.9, 10.0.0.7"))
    assert caller.address == "203.0.113.9"


def test_repeated_headers_are_read_in_order() -> None:
    caller = resolve("10.0.0.5", ("x-forwarded-for", "1.2.3.4"), ("X-Forwarded-For", "203.0.113.9"))
    assert caller.address == "203.0.113.9"


def test_forwarded_wins_over_x_forwarded_for_and_its_syntax_is_parsed() -> None:
    caller = resolve(
        "10.0.0.5",
        ("X-Forwarded-For", "1.2.3.4"),
        ("Forwarded", 'for=1.2.3.4;proto=https, For="[2001:db8:1::9]:4711";by=10.0.0.5'),
    )
    assert caller.address == "2001:db8:1::9"


def test_a_forwarded_port_is_not_part_of_the_address() -> None:
    assert resolve("10.0.0.5", ("Forwarded", "for=203.0.113.9:5555")).address == "203.0.113.9"


def test_an_obfuscated_or_unknown_hop_from_a_trusted_proxy_is_the_caller() -> None:
    assert resolve("10.0.0.5", ("Forwarded", "for=_hidden7")).address == "_hidden7"
    assert resolve("10.0.0.5", ("Forwarded", "for=unknown")).address == "unknown"
    assert resolve("10.0.0.5", ("Forwarded", "proto=https")).address == "unknown"


def test_when_every_hop_is_trusted_the_leftmost_is_the_caller() -> None:
    caller = resolve("10.0.0.5", ("X-Forwarded-For", "10.0.0.8, 2001:db8::3"))
    assert caller.address == "10.0.0.8"


def test_a_trusted_proxy_without_forwarding_headers_is_itself_the_caller() -> None:
    assert resolve("10.0.0.5").address == "10.0.0.5"


@pytest.mark.parametrize(
    ("peer", "address"), [(None, "unknown"), ("a-unix-socket", "a-unix-socket")]
)
def test_a_peer_that_is_not_an_ip_address_is_kept_as_given(peer: str | None, address: str) -> None:
    assert resolve(peer, ("X-Forwarded-For", "203.0.113.9")).address == address


def test_keys_are_unique_per_caller_and_never_collide_across_kinds() -> None:
    keys = {
        resolve(None, principal=LOCAL).key,
        resolve(None, principal=Principal("https://a.example", "local")).key,
        resolve(None, principal=Principal("https://a.example", "x")).key,
        resolve("127.0.0.1").key,
        resolve("::1").key,
    }
    assert len(keys) == 5
