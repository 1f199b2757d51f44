"""The verifier's policy comes from the AUTH_* settings (bootstrap.verifier_policy)."""

from __future__ import annotations

import pytest

from expert_booking.adapters.jwt_verifier import VerifierPolicy
from expert_booking.bootstrap import verifier_policy
from expert_booking.settings import Settings, SettingsError


def test_the_policy_is_the_auth_settings() -> None:
    settings = Settings.from_env(
        {
            "AUTH_ISSUER": "https://login.example",
            "AUTH_RESOURCE": "https://booking.example/mcp",
            "AUTH_ALGORITHMS": "ES256",
            "AUTH_LEEWAY_SECONDS": "3",
        }
    )
    assert verifier_policy(settings) == VerifierPolicy(
        issuer="https://login.example",
        resource="https://booking.example/mcp",
        algorithms=("ES256",),
        leeway_seconds=3,
    )


def test_without_issuer_or_resource_there_is_no_policy() -> None:
    with pytest.raises(SettingsError):
        verifier_policy(Settings.from_env({"AUTH_ISSUER": "https://login.example"}))
