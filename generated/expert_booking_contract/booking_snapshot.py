# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AnyUrl, AwareDatetime, BaseModel, ConfigDict, Field


class Customer(BaseModel):
    """
    The person the booking is for. Every string is stored and echoed exactly as sent: no trimming, no lower-casing, no reformatting. phone and note appear in a snapshot only if they were sent. Customer data is never written to logs.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=200, min_length=1)]
    """
    Full name as the person wants it shown (1 to 200 characters).
    """
    email: Annotated[str, Field(max_length=254, min_length=3, pattern="^[^@\\s]+@[^@\\s]+$")]
    """
    E-mail address with exactly one @ and no spaces (3 to 254 characters). Kept exactly as typed; capitalisation is preserved.
    """
    phone: Annotated[str | None, Field(max_length=40)] = None
    """
    Optional phone number in any notation (at most 40 characters).
    """
    note: Annotated[str | None, Field(max_length=1000)] = None
    """
    Optional message for the expert (at most 1000 characters).
    """


class Intent(BaseModel):
    """
    Exactly what the person approves: booking, slot, start, price and booking version. Issued by the server in a booking's confirmationIntent; copy all six fields unchanged. The canonical form (v1) is the UTF-8 JSON of these six keys sorted by name (amount, bookingId, currency, slotId, startsAt, version) with no whitespace.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    amount: Annotated[str, Field(pattern="^[0-9]+\\.[0-9]{2}$")]
    """
    Price as a string with two decimals, e.g. "500.00".
    """
    bookingId: str
    """
    The booking being approved.
    """
    currency: Annotated[str, Field(pattern="^[A-Z]{3}$")]
    """
    ISO 4217 currency code, three capital letters, e.g. "CNY".
    """
    slotId: str
    """
    The slot the booking holds.
    """
    startsAt: AwareDatetime
    """
    Start of the slot, RFC 3339 UTC with milliseconds, e.g. "2030-09-02T02:00:00.000Z". Compared as an exact string: do not reformat it.
    """
    version: Annotated[int, Field(ge=1)]
    """
    Booking version the approval is for; it must equal the current version of the booking.
    """


class Payment(BaseModel):
    """
    The server's record of the external payment. The server never creates or changes a payment; it only reads its status from the payment service during booking.confirm_booking.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    queryId: str
    """
    Id under which the payment service is queried; always equal to bookingId, so repeated confirmations query the same payment.
    """
    status: Literal["PENDING", "PAID", "FAILED", "CLOSED"]
    """
    PENDING until the server has seen a final answer from the payment service; then PAID, FAILED or CLOSED. The server only ever moves PENDING to one final value.
    """
    amount: Annotated[str, Field(pattern="^[0-9]+\\.[0-9]{2}$")]
    """
    Amount due, two decimals, e.g. "500.00".
    """
    currency: Annotated[str, Field(pattern="^[A-Z]{3}$")]
    """
    ISO 4217 currency code, e.g. "CNY".
    """
    paidAt: AwareDatetime | None
    """
    When the payment service says the payment was made; null unless status is PAID.
    """


class SlotChange(BaseModel):
    """
    A slot the booking had before a reschedule.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    slotId: str
    """
    The previous slot.
    """
    expertId: str
    """
    The previous slot's expert.
    """
    startsAt: AwareDatetime
    """
    Start of the previous slot.
    """
    endsAt: AwareDatetime
    """
    End of the previous slot.
    """
    changedAt: AwareDatetime
    """
    When the booking moved away from it.
    """


class ConfirmationIntent(BaseModel):
    """
    A server-issued approval challenge, present in a booking snapshot while the booking is HELD with payment PENDING (null otherwise). Show the person the booking, expert, time, amount, currency and version it describes; if they approve, copy intent and intentHash unchanged into humanApproval of booking.confirm_booking. Never rebuild, reorder or edit them. The hash binds the content but is not a signature of who approved.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    intent: Intent
    """
    The intent to approve, copied unchanged from confirmationIntent.intent.
    """
    intentHash: Annotated[str, Field(pattern="^sha256:[0-9a-f]{64}$")]
    """
    "sha256:" followed by the 64 lowercase hex digits of the SHA-256 of the canonical intent (UTF-8 JSON of intent with keys sorted, no whitespace). Issued by the server; copy it unchanged, never compute or edit it.
    """


class BookingSnapshot(BaseModel):
    """
    The complete current state of one booking: data of a successful booking.hold_slot, booking.confirm_booking, booking.get_booking, booking.cancel_booking or booking.reschedule_booking envelope. Timestamps are RFC 3339 UTC with milliseconds, e.g. "2030-09-02T02:00:00.000Z".
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    bookingId: str
    """
    Server-issued, unguessable booking id; also the payment query id.
    """
    slotId: str
    """
    The held or booked slot (after a reschedule, the new one).
    """
    expertId: str
    """
    The expert of the slot.
    """
    startsAt: AwareDatetime
    """
    Start of the slot.
    """
    endsAt: AwareDatetime
    """
    End of the slot.
    """
    customer: Customer
    """
    The customer exactly as sent to booking.hold_slot.
    """
    status: Literal["HELD", "CONFIRMED", "EXPIRED", "PAYMENT_FAILED", "PAYMENT_CLOSED", "CANCELLED"]
    """
    HELD: the slot is reserved until expiresAt and can be confirmed or cancelled. CONFIRMED: paid and confirmed; it can be rescheduled (it stays CONFIRMED, history grows) or cancelled. EXPIRED: the hold ran out before confirmation and the slot was released (final). PAYMENT_FAILED / PAYMENT_CLOSED: the payment service reported the payment failed / closed unpaid, and the slot was released (final). CANCELLED: cancelled with booking.cancel_booking; the slot was released (final).
    """
    version: Annotated[int, Field(ge=1)]
    """
    Grows by one with every change of the booking. Pass the current value as expectedVersion to booking.confirm_booking, booking.cancel_booking or booking.reschedule_booking.
    """
    heldAt: AwareDatetime
    """
    When the hold was created.
    """
    expiresAt: AwareDatetime
    """
    When the hold ends: heldAt + the hold lifetime (300 seconds by default, HOLD_TTL_SECONDS), but never later than startsAt (expiresAt = min(heldAt + hold lifetime, startsAt)). A booking still HELD at this instant becomes EXPIRED and its slot is released.
    """
    confirmedAt: AwareDatetime | None
    """
    When the booking was confirmed; null unless CONFIRMED.
    """
    paymentPageUrl: AnyUrl
    """
    Page where the person pays, outside the agent. Give it to the person; never try to pay on their behalf.
    """
    payment: Payment
    """
    The external payment of this booking as last seen by the server.
    """
    refundDue: bool
    """
    true when the server has recorded that a refund is owed to the person outside this server (e.g. paid after the hold expired: PAID_AFTER_EXPIRY); false otherwise. This server never moves money: refunds and re-booking are handled by support.
    """
    confirmationIntent: ConfirmationIntent | None
    """
    The approval challenge to show the person while the booking is HELD with payment PENDING; null in every other state (a confirmed booking cannot be approved again).
    """
    history: list[SlotChange]
    """
    Every slot a booking.reschedule_booking moved this booking away from, oldest first, each with the time of the move; empty if never rescheduled.
    """
    cancelledAt: AwareDatetime | None
    """
    When the booking was cancelled; null unless CANCELLED.
    """
