"""The sandbox's server-rendered pages (English, Chinese, German by ``Accept-Language``).

Plain HTML built from escaped strings (no template engine: three small pages), no script, one
form per page, one inline style (:data:`STYLE_SOURCE` lets exactly it through the sandbox's
Content-Security-Policy). Every value put into a page is escaped, and a URL path segment
percent-encoded first; the constant style sheet is the only text written as it is. Every page
says SANDBOX in its title and in a banner.
"""

from __future__ import annotations

import base64
import hashlib
import unicodedata
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any, Final
from urllib.parse import quote

from expert_booking.sandbox.bookings import HELD, BookingView
from expert_booking.sandbox.ledger import PENDING, Payment, shown_id

LANGUAGES: Final = ("en", "zh", "de")
DEFAULT_LANGUAGE: Final = "en"
_SENTENCE_GAP: Final = {"en": " ", "zh": "", "de": " "}  # Chinese sentences end in "。", unspaced

TEXT: Final[Mapping[str, Mapping[str, str]]] = {
    "en": {
        "banner": "SANDBOX: simulated payments, no money moves",
        "payment": "Payment",
        "booking": "Booking",
        "expert": "Expert",
        "time": "Time",
        "amount": "Amount",
        "status": "Payment status",
        "hold": "Booking status",
        "pay": "Pay",
        "fail": "Fail",
        "close": "Close",
        "result": "The payment is now {status}.",
        "already": "This payment is already {status}; it cannot change again.",
        "paid_next": "Go back to your assistant: it can now confirm the booking.",
        "hold_expired": "The hold on this booking ran out at {at} (UTC): it can no longer be "
        "paid. Go back to your assistant to book again.",
        "booking_ended": "The status of this booking is \u201c{status}\u201d: it can no longer "
        "be paid.",
        "not_found": "No booking {booking} in {db}. Is serve using the same database (--db)?",
        "mailbox": "Mailbox",
        "empty": "No messages yet.",
        "event": "Event",
        "PENDING": "pending",
        "PAID": "paid",
        "FAILED": "failed",
        "CLOSED": "closed",
        "HELD": "held",
        "CONFIRMED": "confirmed",
        "EXPIRED": "expired",
        "PAYMENT_FAILED": "payment failed",
        "PAYMENT_CLOSED": "payment closed",
        "CANCELLED": "cancelled",
    },
    "zh": {
        "banner": "SANDBOX 沙盒：模拟支付，不会真实扣款",
        "payment": "支付",
        "booking": "预订",
        "expert": "专家",
        "time": "时间",
        "amount": "金额",
        "status": "支付状态",
        "hold": "预订状态",
        "pay": "支付",
        "fail": "模拟失败",
        "close": "关闭支付",
        "result": "支付状态现为：{status}。",
        "already": "此笔支付的状态已是“{status}”，不能再更改。",
        "paid_next": "请回到您的助手：现在可以确认预订了。",
        "hold_expired": "此预订的保留已于 {at}（UTC）到期，无法再支付。请回到您的助手重新预订。",
        "booking_ended": "此预订状态为“{status}”，无法再支付。",
        "not_found": "{db} 中没有预订 {booking}。serve 是否使用同一个数据库（--db）？",
        "mailbox": "消息箱",
        "empty": "暂无消息。",
        "event": "事件",
        "PENDING": "待支付",
        "PAID": "已支付",
        "FAILED": "支付失败",
        "CLOSED": "已关闭",
        "HELD": "保留中",
        "CONFIRMED": "已确认",
        "EXPIRED": "已过期",
        "PAYMENT_FAILED": "支付失败",
        "PAYMENT_CLOSED": "支付已关闭",
        "CANCELLED": "已取消",
    },
    "de": {
        "banner": "SANDBOX: simulierte Zahlungen, es fließt kein Geld",
        "payment": "Zahlung",
        "booking": "Buchung",
        "expert": "Expertin/Experte",
        "time": "Zeit",
        "amount": "Betrag",
        "status": "Zahlungsstatus",
        "hold": "Buchungsstatus",
        "pay": "Bezahlen",
        "fail": "Fehlschlagen lassen",
        "close": "Zahlung abbrechen",
        "result": "Die Zahlung ist jetzt {status}.",
        "already": "Diese Zahlung ist bereits {status} und kann sich nicht mehr ändern.",
        "paid_next": "Zurück zu Ihrem Assistenten: Er kann die Buchung jetzt bestätigen.",
        "hold_expired": "Die Reservierung dieser Buchung ist seit {at} (UTC) abgelaufen; sie kann "
        "nicht mehr bezahlt werden. Gehen Sie zu Ihrem Assistenten zurück, um neu zu buchen.",
        "booking_ended": "Der Status dieser Buchung ist \u201e{status}\u201c; sie kann nicht mehr "
        "bezahlt werden.",
        "not_found": "Keine Buchung {booking} in {db}. Nutzt serve dieselbe Datenbank (--db)?",
        "mailbox": "Postfach",
        "empty": "Noch keine Nachrichten.",
        "event": "Ereignis",
        "PENDING": "ausstehend",
        "PAID": "bezahlt",
        "FAILED": "fehlgeschlagen",
        "CLOSED": "geschlossen",
        "HELD": "reserviert",
        "CONFIRMED": "bestätigt",
        "EXPIRED": "abgelaufen",
        "PAYMENT_FAILED": "Zahlung fehlgeschlagen",
        "PAYMENT_CLOSED": "Zahlung geschlossen",
        "CANCELLED": "storniert",
    },
}

_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}"
    ".sandbox{background:#ffd54f;color:#000;font-weight:700;padding:.5rem 1rem;"
    "border:3px dashed #000;text-align:center}"
    "dt{font-weight:600;margin-top:.5rem}dd{margin:0}"
    "button{font-size:1rem;margin:1rem .5rem 0 0;padding:.5rem 1.2rem}"
    ".notice{border-left:4px solid #1976d2;padding:.5rem 1rem;background:#e3f2fd}"
    "table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ccc;"
    "padding:.3rem;text-align:left}"
)
STYLE_SOURCE: Final = (
    f"'sha256-{base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()}'"
)
"""The CSP source expression (``style-src``) of the pages' one inline style sheet."""


def _page(language: str, title: str, body: str) -> str:
    text = TEXT[language]
    return (
        f'<!doctype html><html lang="{escape(language)}"><head><meta charset="utf-8">'
        f"<title>SANDBOX · {escape(title)}</title><style>{_STYLE}</style></head><body>"
        f'<p class="sandbox" role="status">{escape(text["banner"])}</p>{body}</body></html>'
    )


def status_word(language: str, status: str) -> str:
    """The localized name of a payment or booking status (the code itself when unknown)."""
    return TEXT[language].get(status, status)


def payment_page(
    language: str,
    booking: BookingView,
    payment: Payment,
    notice: str | None = None,
    *,
    open_for_payment: bool = True,
) -> str:
    """The payment page of one booking: details, status, and Pay / Fail / Close while PENDING.

    A pending payment whose booking is no longer open for payment (``open_for_payment``) gets
    no buttons, and the page says why (:func:`unpayable_notice`) unless ``notice`` says more.
    """
    text = TEXT[language]
    if payment.status == PENDING and not open_for_payment:
        notice = notice or unpayable_notice(language, booking)
    rows = [
        (text["booking"], booking.booking_id),
        (text["expert"], f"{booking.expert_name} ({booking.specialty})"),
        (text["time"], f"{booking.starts_at} – {booking.ends_at} (UTC)"),
        (text["amount"], f"{booking.amount} {booking.currency}"),
        (text["hold"], status_word(language, booking.status)),
    ]
    details = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    status = status_word(language, payment.status)
    body = [
        f"<h1>{escape(text['payment'])}</h1>",
        f"<dl>{details}</dl>",
        (
            f'<p>{escape(text["status"])}: <strong id="payment-status" '
            f'data-status="{escape(payment.status)}">{escape(status)}</strong></p>'
        ),
    ]
    if notice:
        body.append(f'<p class="notice" id="notice">{escape(notice)}</p>')
    if payment.status == PENDING and open_for_payment:
        buttons = "".join(
            f'<button type="submit" name="action" value="{escape(action)}" id="{escape(action)}">'
            f"{escape(text[action])}</button>"
            for action in ("pay", "fail", "close")
        )
        body.append(f'<form method="post" action="{_pay_url(booking.booking_id)}">{buttons}</form>')
    return _page(language, f"{text['payment']} {booking.booking_id}", "".join(body))


def result_notice(language: str, payment: Payment) -> str:
    """The sentence shown after a change."""
    text = TEXT[language]
    notice = text["result"].format(status=status_word(language, payment.status))
    if payment.status != "PAID":
        return notice
    return f"{notice}{_SENTENCE_GAP[language]}{text['paid_next']}"


def unpayable_notice(language: str, booking: BookingView) -> str:
    """Why a booking can no longer be paid: its hold ran out, or it has another status."""
    text = TEXT[language]
    if booking.status == HELD:
        return text["hold_expired"].format(at=booking.expires_at)
    return text["booking_ended"].format(status=status_word(language, booking.status))


def already_final_notice(language: str, status: str) -> str:
    """The sentence shown when a final payment was asked to change."""
    return TEXT[language]["already"].format(status=status_word(language, status))


def not_found_page(language: str, booking_id: str, db_path: str) -> str:
    """The page for an id the server's database does not hold.

    The id comes from the request: the page repeats at most :data:`SHOWN_ID_CHARS` characters of
    it (then ``…``), control and format characters (a bidi override, say) as U+FFFD.
    """
    text = TEXT[language]
    message = text["not_found"].format(
        booking=_printable(shown_id(booking_id)), db=_printable(db_path)
    )
    return _page(
        language, text["payment"], f"<h1>{escape(text['payment'])}</h1><p>{escape(message)}</p>"
    )


def mailbox_page(language: str, messages: Iterable[Mapping[str, Any]]) -> str:
    """The mailbox: one row per message, newest first."""
    text = TEXT[language]
    rows = "".join(
        "<tr>"
        f"<td>{escape(str(m['at']))}</td>"
        f'<td><a href="{_pay_url(str(m["bookingId"]))}">{escape(str(m["bookingId"]))}</a></td>'
        f"<td>{escape(str(m['kind']))}</td>"
        f"<td>{escape(str(m.get('amount', '')))} {escape(str(m.get('currency', '')))}</td>"
        "</tr>"
        for m in messages
    )
    heads = (text["time"], text["booking"], text["event"], text["amount"])
    header = "".join(f"<th>{escape(h)}</th>" for h in heads)
    table = (
        f'<table id="mailbox"><tr>{header}</tr>{rows}</table>'
        if rows
        else f"<p>{escape(text['empty'])}</p>"
    )
    return _page(language, text["mailbox"], f"<h1>{escape(text['mailbox'])}</h1>{table}")


def _pay_url(booking_id: str) -> str:
    """The payment page's path of ``booking_id``, escaped for an HTML attribute."""
    return escape(f"/pay/{quote(booking_id, safe='')}")


def _printable(text: str) -> str:
    """``text`` with its characters of Unicode category C* as U+FFFD."""
    return "".join(
        "\ufffd" if unicodedata.category(char).startswith("C") else char for char in text
    )
