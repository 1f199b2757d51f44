"""Stable error codes of the contract and the domain's errors, each with its retry rule.

``ErrorCode`` lists the codes (``schemas/error.json`` is the wire's list; a test ties the two);
each ``BookingError`` subclass carries one code. What a caller reads about an error (each
code's standard message and recovery sentence, camelCase detail keys) is the edge's
(``edge/error_texts.py``); the domain holds facts, in ``details`` with snake_case keys and domain
values (datetimes, field names), and where one code has several causes, the cause's sentence
(``reason`` STALE, FUTURE, BEFORE_INTENT, STARTED; ``SLOT_STARTED``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from expert_booking.domain.model import Booking


class ErrorCode(StrEnum):
    """Every stable error code, in the order of the contract's list."""

    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    INVALID_CURSOR = "INVALID_CURSOR"
    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    BOOKING_NOT_FOUND = "BOOKING_NOT_FOUND"
    SLOT_NOT_FOUND = "SLOT_NOT_FOUND"
    SLOT_UNAVAILABLE = "SLOT_UNAVAILABLE"
    BOOKING_EXPIRED = "BOOKING_EXPIRED"
    VERSION_CONFLICT = "VERSION_CONFLICT"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    PAYMENT_PENDING = "PAYMENT_PENDING"
    PAYMENT_FAILED = "PAYMENT_FAILED"
    PAYMENT_CLOSED = "PAYMENT_CLOSED"
    PAYMENT_MISMATCH = "PAYMENT_MISMATCH"
    PAYMENT_UNAVAILABLE = "PAYMENT_UNAVAILABLE"
    HUMAN_APPROVAL_REQUIRED = "HUMAN_APPROVAL_REQUIRED"
    HUMAN_APPROVAL_REJECTED = "HUMAN_APPROVAL_REJECTED"
    HUMAN_APPROVAL_EXPIRED = "HUMAN_APPROVAL_EXPIRED"
    APPROVAL_INTENT_HASH_MISMATCH = "APPROVAL_INTENT_HASH_MISMATCH"
    APPROVAL_INTENT_MISMATCH = "APPROVAL_INTENT_MISMATCH"
    INVALID_STATE = "INVALID_STATE"
    STORAGE_BUSY = "STORAGE_BUSY"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    CATALOG_STALE = "CATALOG_STALE"
    PAID_AFTER_EXPIRY = "PAID_AFTER_EXPIRY"
    RATE_LIMITED = "RATE_LIMITED"
    TOOL_DISABLED = "TOOL_DISABLED"
    RESCHEDULE_PRICE_DIFFERS = "RESCHEDULE_PRICE_DIFFERS"


class BookingError(Exception):
    """Base of every expected, client-safe failure; subclasses fix ``code`` and ``retryable``.

    ``message`` is a specific message for this case, or ``None`` for the code's standard one.
    """

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL_ERROR
    retryable: ClassVar[bool] = False

    def __init__(
        self, message: str | None = None, *, booking: Booking | None = None, **details: Any
    ) -> None:
        self.message = message
        self.details: dict[str, Any] = details
        self.booking = booking  # the edge renders it as details.booking (a snapshot)
        super().__init__(message or self.code.value)


class InvalidArgumentsError(BookingError):
    code = ErrorCode.INVALID_ARGUMENTS


class InvalidCursorError(BookingError):
    code = ErrorCode.INVALID_CURSOR


class ToolNotFoundError(BookingError):
    code = ErrorCode.TOOL_NOT_FOUND


class BookingNotFoundError(BookingError):
    code = ErrorCode.BOOKING_NOT_FOUND


class SlotNotFoundError(BookingError):
    code = ErrorCode.SLOT_NOT_FOUND


class SlotUnavailableError(BookingError):
    code = ErrorCode.SLOT_UNAVAILABLE


SLOT_STARTED = "The slot has already started."
"""The message of a slot refused because its time has come (a hold, a reschedule's target)."""


class BookingExpiredError(BookingError):
    code = ErrorCode.BOOKING_EXPIRED


class VersionConflictError(BookingError):
    code = ErrorCode.VERSION_CONFLICT


class IdempotencyConflictError(BookingError):
    code = ErrorCode.IDEMPOTENCY_CONFLICT


class PaymentPendingError(BookingError):
    code = ErrorCode.PAYMENT_PENDING
    retryable = True


class PaymentFailedError(BookingError):
    code = ErrorCode.PAYMENT_FAILED


class PaymentClosedError(BookingError):
    code = ErrorCode.PAYMENT_CLOSED


class PaymentMismatchError(BookingError):
    code = ErrorCode.PAYMENT_MISMATCH


class PaymentUnavailableError(BookingError):
    code = ErrorCode.PAYMENT_UNAVAILABLE
    retryable = True


class HumanApprovalRequiredError(BookingError):
    code = ErrorCode.HUMAN_APPROVAL_REQUIRED


class HumanApprovalRejectedError(BookingError):
    code = ErrorCode.HUMAN_APPROVAL_REJECTED


class HumanApprovalExpiredError(BookingError):
    code = ErrorCode.HUMAN_APPROVAL_EXPIRED


class ApprovalIntentHashMismatchError(BookingError):
    code = ErrorCode.APPROVAL_INTENT_HASH_MISMATCH


class ApprovalIntentMismatchError(BookingError):
    code = ErrorCode.APPROVAL_INTENT_MISMATCH


class InvalidStateError(BookingError):
    code = ErrorCode.INVALID_STATE


class StorageBusyError(BookingError):
    code = ErrorCode.STORAGE_BUSY
    retryable = True


class InternalError(BookingError):
    code = ErrorCode.INTERNAL_ERROR


class PaidAfterExpiryError(BookingError):
    """The payment service says PAID for a booking whose hold had expired: a refund is owed."""

    code = ErrorCode.PAID_AFTER_EXPIRY


class CatalogStaleError(BookingError):
    """The caller read the tool documents at another catalog version than the server's."""

    code = ErrorCode.CATALOG_STALE


class RateLimitedError(BookingError):
    """The caller's or the global quota is spent; nothing ran (``details``: limit, retry)."""

    code = ErrorCode.RATE_LIMITED
    retryable = True


class ToolDisabledError(BookingError):
    """An operator switched the tool off (``details``: the tool's name and the reason)."""

    code = ErrorCode.TOOL_DISABLED


class ReschedulePriceDiffersError(BookingError):
    """The target slot's price or currency is not the booking's (differences are not charged)."""

    code = ErrorCode.RESCHEDULE_PRICE_DIFFERS
