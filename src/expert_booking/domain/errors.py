"""Stable error codes of the contract, each with its retry rule and a recovery sentence for agents.

``ERROR_CATALOG`` is the single table of codes; ``BookingError`` subclasses carry one code each.
Messages are client-safe: they never contain stack traces, SQL, paths or customer data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from expert_booking.domain.model import Booking


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    retryable: bool
    recovery: str


ERROR_CATALOG: dict[str, ErrorSpec] = {
    "INVALID_ARGUMENTS": ErrorSpec(
        retryable=False,
        recovery="Fix the fields named by each JSON Pointer in details.violations, "
        "re-reading the tool schema with tool_catalog.read if needed, then call again.",
    ),
    "INVALID_CURSOR": ErrorSpec(
        retryable=False,
        recovery="Repeat the search without a cursor, or pass the cursor only with the exact "
        "query it was returned for.",
    ),
    "TOOL_NOT_FOUND": ErrorSpec(
        retryable=False,
        recovery="Use tool_catalog.search to find the exact logical tool name, then call it.",
    ),
    "BOOKING_NOT_FOUND": ErrorSpec(
        retryable=False,
        recovery="Check the bookingId returned by booking.hold_slot; do not invent booking ids.",
    ),
    "SLOT_NOT_FOUND": ErrorSpec(
        retryable=False,
        recovery="Search with booking.search_available_slots and use a slotId it returned.",
    ),
    "SLOT_UNAVAILABLE": ErrorSpec(
        retryable=False,
        recovery="Another booking holds or owns this slot; search again and offer the user "
        "a different free slot.",
    ),
    "BOOKING_EXPIRED": ErrorSpec(
        retryable=False,
        recovery="The hold ran out and the slot was released; hold a slot again with a new "
        "idempotencyKey and ask the user for a new approval.",
    ),
    "VERSION_CONFLICT": ErrorSpec(
        retryable=False,
        recovery="The booking changed; read it with booking.get_booking, show the current "
        "state to the user and obtain a new approval for the new version.",
    ),
    "IDEMPOTENCY_CONFLICT": ErrorSpec(
        retryable=False,
        recovery="This idempotencyKey was already used with different arguments; use a new "
        "UUID for a new request, or resend the original arguments unchanged.",
    ),
    "PAYMENT_PENDING": ErrorSpec(
        retryable=True,
        recovery="Payment has not completed; ask the user to finish paying at paymentPageUrl, "
        "then retry the same confirmation while the approval is still fresh and before "
        "expiresAt (otherwise ask the person to approve again).",
    ),
    "PAYMENT_FAILED": ErrorSpec(
        retryable=False,
        recovery="The payment failed and the slot was released; tell the user and, if they "
        "wish, hold a slot again.",
    ),
    "PAYMENT_CLOSED": ErrorSpec(
        retryable=False,
        recovery="The payment was closed without paying and the slot was released; hold a "
        "slot again if the user still wants it.",
    ),
    "PAYMENT_MISMATCH": ErrorSpec(
        retryable=False,
        recovery="The payment service reported a payment that does not match this booking; "
        "nothing was changed. Do not retry; ask a person to check the payment.",
    ),
    "PAYMENT_UNAVAILABLE": ErrorSpec(
        retryable=True,
        recovery="The payment service could not be reached; nothing was changed. Retry the "
        "same call with the same idempotencyKey after a short wait, before expiresAt.",
    ),
    "HUMAN_APPROVAL_REQUIRED": ErrorSpec(
        retryable=False,
        recovery="Show the user the booking's confirmationIntent and ask them to approve it; "
        "send their approval as humanApproval.",
    ),
    "HUMAN_APPROVAL_REJECTED": ErrorSpec(
        retryable=False,
        recovery="The user rejected this booking; do not confirm it. Ask what they want instead.",
    ),
    "HUMAN_APPROVAL_EXPIRED": ErrorSpec(
        retryable=False,
        recovery="The approval is too old, dated in the future, or dated before the server "
        "issued the intent it approves (details.reason STALE, FUTURE or BEFORE_INTENT); ask "
        "the user to approve the current confirmationIntent again and send the fresh approval.",
    ),
    "APPROVAL_INTENT_HASH_MISMATCH": ErrorSpec(
        retryable=False,
        recovery="Copy intent and intentHash unchanged from the booking's confirmationIntent; "
        "never rebuild or edit them.",
    ),
    "APPROVAL_INTENT_MISMATCH": ErrorSpec(
        retryable=False,
        recovery="The approved intent is not the booking as it is now; read the booking with "
        "booking.get_booking and ask the user to approve its current confirmationIntent.",
    ),
    "INVALID_STATE": ErrorSpec(
        retryable=False,
        recovery="The booking is not in a state that allows this; read it with "
        "booking.get_booking and act on its status.",
    ),
    "STORAGE_BUSY": ErrorSpec(
        retryable=True,
        recovery="The booking store is busy; nothing was changed. Retry the same call with "
        "the same idempotencyKey after a short wait.",
    ),
    "INTERNAL_ERROR": ErrorSpec(
        retryable=False,
        recovery="An unexpected error occurred; quote the operationId when reporting it. "
        "Read the booking with booking.get_booking before trying anything else.",
    ),
}


class BookingError(Exception):
    """Base of every expected, client-safe failure; subclasses fix ``code``."""

    code: ClassVar[str] = "INTERNAL_ERROR"
    default_message: ClassVar[str] = "The request failed."

    def __init__(
        self, message: str | None = None, *, booking: Booking | None = None, **details: Any
    ) -> None:
        self.message = message or self.default_message
        self.details: dict[str, Any] = details
        self.booking = booking  # the edge renders it as details.booking (a snapshot)
        super().__init__(self.message)

    @property
    def retryable(self) -> bool:
        return ERROR_CATALOG[self.code].retryable

    @property
    def recovery(self) -> str:
        return ERROR_CATALOG[self.code].recovery


class InvalidArgumentsError(BookingError):
    code = "INVALID_ARGUMENTS"
    default_message = "The arguments do not match the tool's input schema."


class InvalidCursorError(BookingError):
    code = "INVALID_CURSOR"
    default_message = "The cursor is malformed or belongs to a different query."


class ToolNotFoundError(BookingError):
    code = "TOOL_NOT_FOUND"
    default_message = "No logical tool has this name."


class BookingNotFoundError(BookingError):
    code = "BOOKING_NOT_FOUND"
    default_message = "No booking has this id."


class SlotNotFoundError(BookingError):
    code = "SLOT_NOT_FOUND"
    default_message = "No slot has this id."


class SlotUnavailableError(BookingError):
    code = "SLOT_UNAVAILABLE"
    default_message = "The slot is already held or booked, or has started."


class BookingExpiredError(BookingError):
    code = "BOOKING_EXPIRED"
    default_message = "The hold expired and the slot was released."


class VersionConflictError(BookingError):
    code = "VERSION_CONFLICT"
    default_message = "The booking's version differs from expectedVersion."


class IdempotencyConflictError(BookingError):
    code = "IDEMPOTENCY_CONFLICT"
    default_message = "This idempotencyKey was used before with different arguments."


class PaymentPendingError(BookingError):
    code = "PAYMENT_PENDING"
    default_message = "Payment has not completed; the booking remains held until expiresAt."


class PaymentFailedError(BookingError):
    code = "PAYMENT_FAILED"
    default_message = "The payment failed; the booking was released."


class PaymentClosedError(BookingError):
    code = "PAYMENT_CLOSED"
    default_message = "The payment was closed without paying; the booking was released."


class PaymentMismatchError(BookingError):
    code = "PAYMENT_MISMATCH"
    default_message = "The payment service's answer does not match this booking."


class PaymentUnavailableError(BookingError):
    code = "PAYMENT_UNAVAILABLE"
    default_message = "The payment service could not be queried."


class HumanApprovalRequiredError(BookingError):
    code = "HUMAN_APPROVAL_REQUIRED"
    default_message = "Confirmation needs a human approval of the exact intent."


class HumanApprovalRejectedError(BookingError):
    code = "HUMAN_APPROVAL_REJECTED"
    default_message = "The person rejected this booking."


class HumanApprovalExpiredError(BookingError):
    code = "HUMAN_APPROVAL_EXPIRED"
    default_message = "The approval is not fresh (too old or dated in the future)."


class ApprovalIntentHashMismatchError(BookingError):
    code = "APPROVAL_INTENT_HASH_MISMATCH"
    default_message = "intentHash is not the SHA-256 of the approved intent."


class ApprovalIntentMismatchError(BookingError):
    code = "APPROVAL_INTENT_MISMATCH"
    default_message = "The approved intent differs from the booking as it is now."


class InvalidStateError(BookingError):
    code = "INVALID_STATE"
    default_message = "The booking's status does not allow this action."


class StorageBusyError(BookingError):
    code = "STORAGE_BUSY"
    default_message = "The booking store is busy."


class InternalError(BookingError):
    code = "INTERNAL_ERROR"
    default_message = "An unexpected error occurred."
