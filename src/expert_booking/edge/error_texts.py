"""What a caller reads about each error code: its message and its recovery sentence.

The wire words for the domain's errors (tool names, argument names, field names) live here, at
the edge; the domain knows only the codes, their retry rule and the facts in ``details``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from expert_booking.domain.errors import BookingError, ErrorCode
from expert_booking.domain.intents import ActionIntent
from expert_booking.domain.model import Intent, format_instant
from expert_booking.edge.wire import render_slot


@dataclass(frozen=True, slots=True)
class ErrorText:
    """The standard message of a code and the recovery sentence an agent acts on."""

    message: str
    recovery: str


ERROR_TEXTS: Mapping[ErrorCode, ErrorText] = {
    ErrorCode.INVALID_ARGUMENTS: ErrorText(
        message="The arguments do not match the tool's input schema.",
        recovery="Fix the fields named by each JSON Pointer in details.violations, "
        "re-reading the tool schema with tool_catalog.read if needed, then call again.",
    ),
    ErrorCode.INVALID_CURSOR: ErrorText(
        message="The cursor is malformed or belongs to a different query.",
        recovery="Repeat the call without a cursor, or pass a cursor only with exactly the "
        "arguments (query or filters) of the call that returned it.",
    ),
    ErrorCode.TOOL_NOT_FOUND: ErrorText(
        message="No logical tool has this name.",
        recovery="Use tool_catalog.search to find the exact logical tool name, then call it.",
    ),
    ErrorCode.BOOKING_NOT_FOUND: ErrorText(
        message="No booking has this id.",
        recovery="Check the bookingId returned by booking.hold_slot; do not invent booking ids.",
    ),
    ErrorCode.SLOT_NOT_FOUND: ErrorText(
        message="No slot has this id.",
        recovery="Search with booking.search_available_slots and use a slotId it returned.",
    ),
    ErrorCode.SLOT_UNAVAILABLE: ErrorText(
        message="The slot is already held or booked, or has started.",
        recovery="A booking holds or owns this slot (maybe an earlier hold of this user's: "
        "see booking.list_bookings), or it has started; offer the user "
        "the free slots in details.alternatives (best first; another caller may take one "
        "first), or search again. Hold the chosen slotId; for a reschedule, send it as "
        "newSlotId instead.",
    ),
    ErrorCode.BOOKING_EXPIRED: ErrorText(
        message="The hold expired and the slot was released.",
        recovery="The hold ran out and the slot was released; nothing was confirmed. If the "
        "person already paid for this booking, do not ask them to pay for it again: tell them "
        "it was not confirmed and a refund is owed (support). To book, hold a slot again with "
        "a new idempotencyKey and ask the user for a new approval.",
    ),
    ErrorCode.VERSION_CONFLICT: ErrorText(
        message="The booking's version differs from expectedVersion.",
        recovery="The booking changed since expectedVersion; this call did nothing. Read it "
        "with booking.get_booking and act on its status: already as wanted (e.g. CONFIRMED by "
        "an earlier call), stop; final, tell the user; else retry with the current version "
        "and, if the action needs one, a new approval of the current intent.",
    ),
    ErrorCode.IDEMPOTENCY_CONFLICT: ErrorText(
        message="This idempotencyKey was used before with different arguments.",
        recovery="This idempotencyKey was already used with different arguments; use a new "
        "UUID for a new request, or resend the original arguments unchanged.",
    ),
    ErrorCode.PAYMENT_PENDING: ErrorText(
        message="Payment has not completed; the booking remains held until expiresAt.",
        recovery="Payment has not completed; ask the user to finish paying at paymentPageUrl, "
        "then retry the same confirmation while the approval is still fresh and before "
        "expiresAt (otherwise ask the person to approve again).",
    ),
    ErrorCode.PAYMENT_FAILED: ErrorText(
        message="The payment failed; the booking was released.",
        recovery="The payment failed and the slot was released; tell the user and, if they "
        "wish, hold a slot again.",
    ),
    ErrorCode.PAYMENT_CLOSED: ErrorText(
        message="The payment was closed without paying; the booking was released.",
        recovery="The payment was closed without paying and the slot was released; hold a "
        "slot again if the user still wants it.",
    ),
    ErrorCode.PAYMENT_MISMATCH: ErrorText(
        message="The payment service's answer does not match this booking.",
        recovery="The payment service reported a payment that does not match this booking; "
        "nothing was changed. Do not retry; ask a person to check the payment.",
    ),
    ErrorCode.PAYMENT_UNAVAILABLE: ErrorText(
        message="The payment service could not be queried.",
        recovery="The payment service could not be reached; nothing was changed. Retry the "
        "same call with the same idempotencyKey after a short wait, before expiresAt.",
    ),
    ErrorCode.HUMAN_APPROVAL_REQUIRED: ErrorText(
        message="This action needs a human approval of the exact intent.",
        recovery="Show the user the intent to approve (a confirmation: the booking's "
        "confirmationIntent; a cancel or reschedule: details.intent) and ask them to approve it; "
        "send their approval as humanApproval.",
    ),
    ErrorCode.HUMAN_APPROVAL_REJECTED: ErrorText(
        message="The person rejected the action they were asked to approve.",
        recovery="The user rejected this action (a confirmation, cancellation or reschedule); "
        "this call changed nothing. Do not retry it; ask the user what they want instead.",
    ),
    ErrorCode.HUMAN_APPROVAL_EXPIRED: ErrorText(
        message="The approval is not fresh (too old, dated in the future, or dated before "
        "the intent it approves was issued).",
        recovery="The approval is too old or dated before the server issued the intent it "
        "approves (details.reason STALE or BEFORE_INTENT; FUTURE has its own sentence); ask "
        "the user to approve the current intent again and send the fresh approval.",
    ),
    ErrorCode.APPROVAL_INTENT_HASH_MISMATCH: ErrorText(
        message="intentHash is not the SHA-256 of the approved intent.",
        recovery="Copy intent and intentHash unchanged from the booking's confirmationIntent "
        "(or details.intent of HUMAN_APPROVAL_REQUIRED); never rebuild or edit them.",
    ),
    ErrorCode.APPROVAL_INTENT_MISMATCH: ErrorText(
        message="The approved intent differs from the booking as it is now.",
        recovery="The approved intent is not the booking as it is now; details.changes names "
        "each field that differs. Show the user details.intent, ask them to approve it, and "
        "send their approval of details.intent and details.intentHash, copied unchanged.",
    ),
    ErrorCode.INVALID_STATE: ErrorText(
        message="The booking's status does not allow this action.",
        recovery="The booking is not in a state that allows this; read it with "
        "booking.get_booking and act on its status.",
    ),
    ErrorCode.STORAGE_BUSY: ErrorText(
        message="The booking store is busy.",
        recovery="The booking store is busy; nothing was changed. Retry the same call with "
        "the same idempotencyKey after a short wait.",
    ),
    ErrorCode.INTERNAL_ERROR: ErrorText(
        message="An unexpected error occurred.",
        recovery="An unexpected error occurred; quote the operationId when reporting it. "
        "Read the booking with booking.get_booking before trying anything else.",
    ),
    ErrorCode.PAID_AFTER_EXPIRY: ErrorText(
        message="The person paid, but the hold had expired; the booking is not confirmed and "
        "a refund is owed (refundDue).",
        recovery="Do not retry. Tell the person the payment arrived after the hold expired: "
        "they should contact support, who owe them a refund, or re-book by holding a free slot "
        "with a new idempotencyKey (and paying again).",
    ),
    ErrorCode.CATALOG_STALE: ErrorText(
        message="The tool documents changed since the catalogVersion that was sent.",
        recovery="Nothing was run. Re-read the tool's document with tool_catalog.read, fix "
        "the arguments to it, and call again with details.currentVersion as catalogVersion.",
    ),
    ErrorCode.RATE_LIMITED: ErrorText(
        message="Too many tool calls in the last minute; this call did not run.",
        recovery="Nothing was run. Wait details.retryAfterSeconds, then send the same call "
        "again (details.limit CALLER: your own quota; GLOBAL: the server's, shared by all).",
    ),
    ErrorCode.TOOL_DISABLED: ErrorText(
        message="An operator has switched this tool off; this call did not run.",
        recovery="Nothing was run. Tell the user the tool is unavailable and why "
        "(details.reason); do not retry it until meta.disabledTools no longer lists it.",
    ),
    ErrorCode.RESCHEDULE_PRICE_DIFFERS: ErrorText(
        message="The new slot's price or currency differs from the booking's.",
        recovery="Nothing was changed: this server charges no price differences. Offer the user "
        "a free slot with the booking's amount and currency, or cancel and book anew.",
    ),
}


def message_of(error: BookingError) -> str:
    """The error's own message, or its code's standard one."""
    return error.message or ERROR_TEXTS[error.code].message


REASON_RECOVERIES: Mapping[tuple[ErrorCode, str], str] = {
    (ErrorCode.HUMAN_APPROVAL_EXPIRED, "FUTURE"): "The approval's approvedAt is later than the "
    "server's clock (details.reason FUTURE): the clock that dated it is ahead, and a new "
    "approval dated by it fails the same way. Date approvedAt by a clock in step with the "
    "server's (meta.serverReceivedAt of a recent result shows the server's time), then ask the "
    "user to approve the current intent again.",
}
"""Recovery sentences for one cause (``details.reason``) of a code, where the code's own would
send an agent the wrong way."""


def recovery_of(error: BookingError) -> str:
    """The recovery sentence of the error's cause (``REASON_RECOVERIES``), else of its code."""
    reason = error.details.get("reason")
    if isinstance(reason, str):
        special = REASON_RECOVERIES.get((error.code, reason))
        if special is not None:
            return special
    return ERROR_TEXTS[error.code].recovery


def wire_details(error: BookingError) -> dict[str, Any]:
    """``details`` as the wire shows them: camelCase keys, RFC 3339 instants.

    The domain names the fields of a payment mismatch (``details["fields"]``) by its own
    snake_case names (an intent mismatch's by the intent's keys); they are shown camelCase.
    Intents are shown as their canonical documents, the alternatives of a taken slot as the
    slot search lists slots (``wire.render_slot``), the changes of an intent mismatch as
    ``{field, approvedValue, currentValue}``. Values the edge put there itself
    (``violations``) pass unchanged.
    """
    shown: dict[str, Any] = {}
    for key, value in error.details.items():
        if isinstance(value, (Intent, ActionIntent)):
            value = value.canonical_doc()  # noqa: PLW2901 - the shown form of the same value
        elif key == "alternatives":
            value = [render_slot(slot) for slot in value]  # noqa: PLW2901 - as above
        elif key == "changes":
            value = [  # noqa: PLW2901 - as above
                {"field": c.field, "approvedValue": c.approved, "currentValue": c.current}
                for c in value
            ]
        elif isinstance(value, datetime):
            value = format_instant(value)  # noqa: PLW2901 - the shown form of the same value
        elif key == "fields":
            value = [camel_case(name) for name in value]  # noqa: PLW2901 - as above
        shown[camel_case(key)] = value
    return shown


def camel_case(name: str) -> str:
    """``approval_ttl_seconds`` -> ``approvalTtlSeconds`` (a camelCase name stays as it is)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
