"""Seed data written once, when a new database is created: three experts, six 2030 UTC slots."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SeedExpert:
    expert_id: str
    name: str
    specialty: str
    keywords: str


@dataclass(frozen=True, slots=True)
class SeedSlot:
    """A one-hour slot; instants in the stored RFC 3339 form, price as the exact string."""

    slot_id: str
    expert_id: str
    starts_at: str
    ends_at: str
    price_amount: str
    price_currency: str


SEED_EXPERTS: tuple[SeedExpert, ...] = (
    SeedExpert(
        expert_id="exp-ai-001",
        name="Dr. Lin Wei",
        specialty="AI",
        keywords="artificial intelligence machine learning LLM agents "
        "人工智能 机器学习 大模型 KI künstliche Intelligenz",
    ),
    SeedExpert(
        expert_id="exp-law-001",
        name="Anna Schmidt",
        specialty="LAW",
        keywords="contract law legal GDPR 法律 合同 Recht Vertrag Datenschutz",
    ),
    SeedExpert(
        expert_id="exp-fin-001",
        name="Chen Jie",
        specialty="FINANCE",
        keywords="tax finance accounting investment 财务 税务 会计 Steuer Finanzen",
    ),
)

SEED_SLOTS: tuple[SeedSlot, ...] = (
    SeedSlot(
        "slot-ai-001",
        "exp-ai-001",
        "2030-09-02T02:00:00.000Z",
        "2030-09-02T03:00:00.000Z",
        "500.00",
        "CNY",
    ),
    SeedSlot(
        "slot-ai-002",
        "exp-ai-001",
        "2030-09-03T02:00:00.000Z",
        "2030-09-03T03:00:00.000Z",
        "500.00",
        "CNY",
    ),
    SeedSlot(
        "slot-law-001",
        "exp-law-001",
        "2030-09-02T08:00:00.000Z",
        "2030-09-02T09:00:00.000Z",
        "800.00",
        "CNY",
    ),
    SeedSlot(
        "slot-law-002",
        "exp-law-001",
        "2030-09-04T08:00:00.000Z",
        "2030-09-04T09:00:00.000Z",
        "800.00",
        "CNY",
    ),
    SeedSlot(
        "slot-fin-001",
        "exp-fin-001",
        "2030-09-05T06:00:00.000Z",
        "2030-09-05T07:00:00.000Z",
        "650.00",
        "CNY",
    ),
    SeedSlot(
        "slot-fin-002",
        "exp-fin-001",
        "2030-09-06T06:00:00.000Z",
        "2030-09-06T07:00:00.000Z",
        "650.00",
        "CNY",
    ),
)
