"""Access-control settings: AUTH_*, QUOTA_*, TRUSTED_PROXIES and the checks ``serve`` makes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from expert_booking import settings as settings_module
from expert_booking.access.ports import QuotaLimits
from expert_booking.settings import AuthMode, Settings, SettingsError

OAUTH = {
    "AUTH_MODE": "oauth",
    "AUTH_ISSUER": "https://login.example/realms/booking",
    "AUTH_RESOURCE": "https://booking.example/mcp",
}


def test_defaults_are_no_authentication_on_loopback_without_quotas() -> None:
    settings = Settings.from_env({})
    assert settings.auth_mode is AuthMode.NONE
    assert settings.auth_issuer is None
    assert settings.auth_jwks_url is None
    assert settings.auth_resource is None
    assert settings.auth_algorithms == ("RS256", "ES256")
    assert settings.auth_leeway_seconds == 10
    assert settings.trusted_proxies == ()
    assert settings.quota_limits is None
    settings.check_serving()


def test_every_access_variable_is_read_and_parsed() -> None:
    settings = Settings.from_env(
        {
            **OAUTH,
            "AUTH_MODE": "OAuth",
            "AUTH_JWKS_URL": "https://login.example/keys",
            "AUTH_ALGORITHMS": "ES256, PS256",
            "AUTH_LEEWAY_SECONDS": "0",
            "QUOTA_PER_CALLER_PER_MINUTE": "5",
            "QUOTA_GLOBAL_PER_MINUTE": "50",
            "TRUSTED_PROXIES": "10.0.0.1, 192.0.2.0/24, ::1",
        }
    )
    assert settings.auth_mode is AuthMode.OAUTH
    assert settings.auth_issuer == "https://login.example/realms/booking"
    assert settings.auth_jwks_url == "https://login.example/keys"
    assert settings.auth_resource == "https://booking.example/mcp"
    assert settings.auth_algorithms == ("ES256", "PS256")
    assert settings.auth_leeway_seconds == 0
    assert settings.quota_limits == QuotaLimits(per_caller_per_minute=5, global_per_minute=50)
    assert settings.trusted_proxies == (
        ipaddress.ip_network("10.0.0.1/32"),
        ipaddress.ip_network("192.0.2.0/24"),
        ipaddress.ip_network("::1/128"),
    )


def test_quotas_are_on_by_default_in_oauth_mode() -> None:
    assert Settings.from_env(OAUTH).quota_limits == QuotaLimits(30, 300)


def test_in_none_mode_any_quota_variable_turns_both_quotas_on() -> None:
    assert Settings.from_env({"QUOTA_GLOBAL_PER_MINUTE": "100"}).quota_limits == QuotaLimits(
        30, 100
    )
    assert Settings.from_env({"QUOTA_PER_CALLER_PER_MINUTE": "3"}).quota_limits == QuotaLimits(
        3, 300
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTH_MODE", "basic"),
        ("AUTH_ALGORITHMS", "none"),
        ("AUTH_ALGORITHMS", "RS256,HS256"),
        ("AUTH_ALGORITHMS", "hs512"),
        ("AUTH_ALGORITHMS", ","),
        ("AUTH_ISSUER", "login.example"),
        ("AUTH_ISSUER", "http://login.example"),
        ("AUTH_ISSUER", "https://login.example/#frag"),
        ("AUTH_RESOURCE", "https://"),
        ("AUTH_RESOURCE", "https://booking.example:0/mcp"),
        ("AUTH_JWKS_URL", "ftp://login.example/keys"),
        ("AUTH_LEEWAY_SECONDS", "-1"),
        ("AUTH_LEEWAY_SECONDS", "301"),
        ("QUOTA_PER_CALLER_PER_MINUTE", "0"),
        ("QUOTA_GLOBAL_PER_MINUTE", "many"),
        ("TRUSTED_PROXIES", "proxy.example"),
        ("TRUSTED_PROXIES", "10.0.0.0/33"),
    ],
)
def test_a_malformed_access_value_is_a_settings_error_naming_the_variable(
    name: str, value: str
) -> None:
    with pytest.raises(SettingsError) as excinfo:
        Settings.from_env({name: value})
    assert str(excinfo.value).startswith(f"{name}=")


def test_http_urls_are_accepted_on_loopback_only() -> None:
    settings = Settings.from_env(
        {"AUTH_ISSUER": "http://127.0.0.1:4444", "AUTH_RESOURCE": "http://localhost:3000/mcp"}
    )
    assert settings.auth_issuer == "http://127.0.0.1:4444"
    assert settings.auth_resource == "http://localhost:3000/mcp"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"])
def test_none_mode_serves_on_loopback(host: str) -> None:
    Settings.from_env({"HOST": host}).check_serving()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "booking.example"])  # noqa: S104 - refused
def test_none_mode_refuses_a_non_loopback_bind_address_naming_the_setting(host: str) -> None:
    with pytest.raises(SettingsError) as excinfo:
        Settings.from_env({"HOST": host}).check_serving()
    assert "AUTH_MODE=none" in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


def test_a_complete_oauth_configuration_serves_on_any_address() -> None:
    """Every request is then checked for a token: binding a public address is the point."""
    Settings.from_env({**OAUTH, "HOST": "0.0.0.0"}).check_serving()  # noqa: S104 - the point


@pytest.mark.parametrize(
    ("missing", "named"),
    [
        (("AUTH_ISSUER",), "AUTH_ISSUER"),
        (("AUTH_RESOURCE",), "AUTH_RESOURCE"),
        (("AUTH_ISSUER", "AUTH_RESOURCE"), "AUTH_ISSUER and AUTH_RESOURCE"),
    ],
)
def test_oauth_mode_refuses_to_start_without_issuer_or_resource(
    missing: tuple[str, ...], named: str
) -> None:
    env = {name: value for name, value in OAUTH.items() if name not in missing}
    with pytest.raises(SettingsError) as excinfo:
        Settings.from_env(env).check_serving()
    assert str(excinfo.value) == f"AUTH_MODE=oauth needs {named}"


def test_every_variable_is_in_env_example_and_the_readme_table() -> None:
    root = Path(__file__).resolve().parents[2]
    example = (root / ".env.example").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    for name in settings_module.VARIABLE_NAMES:
        assert f"{name}=" in example, name
        assert f"`{name}`" in readme, name
