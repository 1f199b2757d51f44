"""The progressive tool catalog: multilingual ranking (golden set), paging, reads, memo."""

# ruff: noqa: RUF001 - real Chinese and German input uses full-width commas and en dashes

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from expert_booking.domain.errors import InvalidCursorError, ToolNotFoundError
from expert_booking.edge import catalog as catalog_module
from expert_booking.edge import catalog_ranking
from expert_booking.edge.catalog import MEMO_QUERY_LIMIT, SUMMARY_LIMIT, ToolCatalog
from expert_booking.edge.catalog_ranking import tokenize
from expert_booking.edge.schemas import SchemaLoadError, SchemaRegistry
from expert_booking.edge.tool_registry import BY_NAME
from expert_booking.edge.tool_registry import LOGICAL_NAMES as LOGICAL_TOOLS

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
REGISTRY = SchemaRegistry.load()
# The golden set's tools by name (a tool added to the registry leaves them as they are).
SEARCH, HOLD, CONFIRM = (
    "booking.search_available_slots",
    "booking.hold_slot",
    "booking.confirm_booking",
)
GET, LIST = "booking.get_booking", "booking.list_bookings"
CANCEL, RESCHEDULE = "booking.cancel_booking", "booking.reschedule_booking"

# Realistic requests (agent or user phrasing) and the tool that should rank first.
GOLDEN: list[tuple[str, str, str]] = [
    # en
    ("en", "book a slot with an AI expert", HOLD),
    ("en", "find available experts next week", SEARCH),
    ("en", "search free time slots for tax advice", SEARCH),
    ("en", "reserve this time slot for me", HOLD),
    ("en", "hold the 10am slot for ten minutes", HOLD),
    ("en", "confirm my booking after payment", CONFIRM),
    ("en", "I have paid, finalize the reservation", CONFIRM),
    ("en", "check the status of my booking", GET),
    ("en", "what is the current state of booking booking-123", GET),
    ("en", "show me open appointments", SEARCH),
    ("en", "which experts are free tomorrow", SEARCH),
    ("en", "complete the booking with the user's approval", CONFIRM),
    ("en", "look up booking details", GET),
    ("en", "lock in an appointment before someone else takes it", HOLD),
    ("en", "approve and confirm the held booking", CONFIRM),
    ("en", "list slots for a machine learning specialist", SEARCH),
    ("en", "are there any openings with a data privacy expert on Friday", SEARCH),
    ("en", "grab the first free slot for me", HOLD),
    ("en", "the user approved the intent and paid, now confirm", CONFIRM),
    ("en", "did the booking expire", GET),
    ("en", "schedule options for a legal consultant", SEARCH),
    ("en", "secure the 3pm appointment while I pay", HOLD),
    ("en", "finish the reservation once payment is done", CONFIRM),
    ("en", "get booking by id", GET),
    ("en", "I need to talk to a cloud architect sometime this month", SEARCH),
    ("en", "put a hold on slot-ai-001 for Alice", HOLD),
    ("en", "payment went through, please confirm the appointment", CONFIRM),
    ("en", "is booking-42 still held or has it been confirmed", GET),
    ("en", "who can I meet about GDPR compliance", SEARCH),
    ("en", "book it", HOLD),
    ("en", "any security auditors available on Monday?", SEARCH),
    ("en", "I'd like to reserve a session with Dr. Chen", HOLD),
    ("en", "customer approved the intent hash, confirm booking", CONFIRM),
    ("en", "show me the booking snapshot", GET),
    ("en", "need an appointment with a blockchain specialist", SEARCH),
    ("en", "take slot 3 before it's gone", HOLD),
    ("en", "we got the PAID status from the payment page, finalize", CONFIRM),
    ("en", "what version is my booking at", GET),
    # zh
    ("zh", "帮我确认这个预约", CONFIRM),
    ("zh", "查看我的预约状态", GET),
    ("zh", "搜索人工智能专家的空闲时段", SEARCH),
    ("zh", "帮我预约一个时段", HOLD),
    ("zh", "我已经付款了，请完成预约", CONFIRM),
    ("zh", "有哪些可预约的专家", SEARCH),
    ("zh", "锁定明天上午的时段", HOLD),
    ("zh", "查询订单详情", GET),
    ("zh", "查找下周有空的税务顾问", SEARCH),
    ("zh", "先帮我占用这个时段", HOLD),
    ("zh", "支付完成后确认预订", CONFIRM),
    ("zh", "这个预约现在是什么状态", GET),
    ("zh", "帮我预订王老师周三的时间", HOLD),
    ("zh", "找一个空闲的时间段", SEARCH),
    ("zh", "批准并确认预约", CONFIRM),
    ("zh", "我的订单怎么样了", GET),
    ("zh", "有没有明天可以约的AI专家", SEARCH),
    ("zh", "帮我把这个时间段先订下来", HOLD),
    ("zh", "用户已经支付，确认订单", CONFIRM),
    ("zh", "看看预约现在的进度", GET),
    ("zh", "查一下周五有哪些空档", SEARCH),
    ("zh", "保留这个时段五分钟", HOLD),
    ("zh", "付完款了，帮我完成确认", CONFIRM),
    ("zh", "预约详情", GET),
    ("zh", "我想找个律师咨询一下，什么时候有空", SEARCH),
    ("zh", "就定这个时间吧", HOLD),
    ("zh", "钱已经付了，帮我确认", CONFIRM),
    ("zh", "我刚才那个预约还在吗", GET),
    ("zh", "推荐几个数据分析方面的专家", SEARCH),
    ("zh", "把周二下午那个时段锁住", HOLD),
    ("zh", "下周三有没有空闲的法律顾问", SEARCH),
    ("zh", "我要预约李专家的咨询", HOLD),
    ("zh", "用户批准了，付款也完成了，请确认预约", CONFIRM),
    ("zh", "帮我查一下订单状态", GET),
    ("zh", "想约个财务专家聊聊", SEARCH),
    ("zh", "先把这个档期占住", HOLD),
    ("zh", "确认支付并完成订单", CONFIRM),
    ("zh", "预约详情和当前版本", GET),
    # de
    ("de", "Termin bestätigen nach Zahlung", CONFIRM),
    ("de", "welche Termine sind frei", SEARCH),
    ("de", "einen Termin beim KI-Experten buchen", HOLD),
    ("de", "Status meiner Buchung abrufen", GET),
    ("de", "freie Termine für Steuerberatung suchen", SEARCH),
    ("de", "Zeitfenster reservieren", HOLD),
    ("de", "ich habe bezahlt, bitte Buchung bestätigen", CONFIRM),
    ("de", "Buchungsdetails anzeigen", GET),
    ("de", "verfügbare Experten finden", SEARCH),
    ("de", "den Termin vorläufig reservieren bis ich zahle", HOLD),
    ("de", "Reservierung abschließen", CONFIRM),
    ("de", "Wie ist der Stand meiner Buchung", GET),
    ("de", "Experten für Datenschutz suchen", SEARCH),
    ("de", "diesen Slot für mich blockieren", HOLD),
    ("de", "Zahlung erledigt, Buchung abschließen", CONFIRM),
    ("de", "Buchung nachschlagen", GET),
    ("de", "Gibt es morgen freie Zeiten bei einem Steuerexperten", SEARCH),
    ("de", "Termin vormerken", HOLD),
    ("de", "Die Zahlung ist durch, jetzt die Buchung bestätigen", CONFIRM),
    ("de", "Was ist der aktuelle Status der Reservierung", GET),
    ("de", "Wann hat ein KI-Berater Zeit", SEARCH),
    ("de", "bitte den Slot für mich festhalten", HOLD),
    ("de", "Buchung nach Freigabe durch den Nutzer abschließen", CONFIRM),
    ("de", "Details zur Buchung ansehen", GET),
    ("de", "Ich suche einen Termin mit einem Cloud-Experten", SEARCH),
    ("de", "Bitte den Termin am Dienstag für mich reservieren", HOLD),
    ("de", "Habe gerade bezahlt – Termin jetzt verbindlich bestätigen", CONFIRM),
    ("de", "Ist meine Reservierung noch gültig?", GET),
    ("de", "Wer hat nächste Woche Zeit für eine Beratung", SEARCH),
    ("de", "Den Slot sofort buchen", HOLD),
    ("de", "Welche Experten haben diese Woche noch freie Slots", SEARCH),
    ("de", "Ich möchte den Termin um 10 Uhr buchen", HOLD),
    ("de", "Zahlung abgeschlossen, Buchung jetzt bestätigen", CONFIRM),
    ("de", "Zeig mir den aktuellen Stand der Buchung", GET),
    ("de", "Suche Rechtsberatung für nächste Woche", SEARCH),
    ("de", "Slot für 5 Minuten reservieren", HOLD),
    ("de", "Kunde hat zugestimmt und bezahlt, bitte abschließen", CONFIRM),
    ("de", "Ist die Buchung abgelaufen?", GET),
    # booking.list_bookings, second round: five misses of an independent black-box audit and
    # twelve phrasings written before the round (8 of those 12 ranked first before it)
    ("de", "meine Buchungen anzeigen", LIST),
    ("en", "show all my bookings", LIST),
    ("en", "check whether my hold was created after a timeout", LIST),
    ("zh", "查看我的所有预约", LIST),
    ("de", "Welche Termine habe ich gebucht", LIST),
    ("en", "what have I booked so far", LIST),
    ("en", "show me my reservations", LIST),
    ("en", "my bookings", LIST),
    ("en", "history of my appointments", LIST),
    ("zh", "我预约过哪些专家", LIST),
    ("zh", "显示我的订单", LIST),
    ("zh", "我的预约记录", LIST),
    ("de", "Zeige meine Reservierungen", LIST),
    ("de", "meine gebuchten Termine", LIST),
    ("de", "Übersicht über meine Termine", LIST),
    ("en", "all reservations I made", LIST),
    ("en", "did the hold I sent earlier actually go through", LIST),
    # ... and what they must not pull to the list: "my", "all", "meine", "anzeigen" elsewhere
    ("en", "cancel my booking", CANCEL),
    ("en", "what is the status of my booking", GET),
    ("en", "has my booking expired", GET),
    ("en", "find all free slots next week", SEARCH),
    ("en", "show every free slot", SEARCH),
    ("de", "Ich möchte meine Buchung bestätigen", CONFIRM),
    ("de", "Ist meine Buchung noch gültig?", GET),
    ("de", "Status meiner Buchung", GET),
    ("de", "meinen Termin stornieren", CANCEL),
    ("de", "freie Termine anzeigen", SEARCH),
    ("de", "Steuerberater Termine anzeigen", SEARCH),
    ("de", "Zeig mir verfügbare Experten", SEARCH),
    ("zh", "我的订单状态", GET),
    ("zh", "把我的预约改到下周", RESCHEDULE),
    # zh-Hant: traditional characters fold to the index's simplified ones
    ("zh-Hant", "幫我確認這個預約", CONFIRM),
    ("zh-Hant", "我剛才那個預約還在嗎", GET),
    ("zh-Hant", "幫我預約一個時段", HOLD),
    ("zh-Hant", "這個預約現在是什麼狀態", GET),
    ("zh-Hant", "我的預約記錄", LIST),
    ("zh-Hant", "顯示我的訂單", LIST),
    ("zh-Hant", "查找下週有空的稅務顧問", SEARCH),
    ("zh-Hant", "先幫我佔用這個時段", HOLD),
    ("zh-Hant", "支付完成後確認預訂", CONFIRM),
    ("zh-Hant", "取消我的預約", CANCEL),
    ("zh-Hant", "把我的預約改到下週", RESCHEDULE),
    ("zh-Hant", "有哪些可預約的專家", SEARCH),
]

# Held out: written before the new tools' keywords were tuned, kept apart so the figure for
# tools added later is not flattered by queries chosen after tuning (issue 13, item 9).
HELD_OUT: list[tuple[str, str, str]] = [
    # booking.list_bookings
    ("en", "list my bookings", LIST),
    ("en", "show all my reservations that are still held", LIST),
    ("en", "my hold request timed out, find the booking made with this idempotency key", LIST),
    ("en", "which of my bookings are confirmed", LIST),
    ("en", "did my confirmation go through? look it up by idempotencyKey", LIST),
    ("zh", "列出我的所有预约", LIST),
    ("zh", "我有哪些预约", LIST),
    ("zh", "查一下我所有已确认的订单", LIST),
    ("de", "alle meine Buchungen auflisten", LIST),
    ("de", "Welche Buchungen habe ich?", LIST),
    ("de", "Liste meiner bestätigten Reservierungen", LIST),
    # booking.cancel_booking and booking.reschedule_booking: written before any keyword tuning
    ("en", "cancel my appointment", CANCEL),
    ("en", "I can't make it anymore, call off the consultation", CANCEL),
    ("en", "please cancel the booking I confirmed yesterday and tell me about the refund", CANCEL),
    ("en", "drop the slot I'm holding, I changed my mind", CANCEL),
    ("en", "move my session to next Tuesday", RESCHEDULE),
    ("en", "reschedule my confirmed booking to a later time", RESCHEDULE),
    ("en", "can I change the time of my appointment to another slot", RESCHEDULE),
    ("en", "postpone the consultation by a day", RESCHEDULE),
    ("zh", "取消我的预约", CANCEL),
    ("zh", "我不想去了，帮我把这个预约退掉", CANCEL),
    ("zh", "把已确认的订单取消并退款", CANCEL),
    ("zh", "帮我改一下预约时间", RESCHEDULE),
    ("zh", "把我的咨询推迟到下周", RESCHEDULE),
    ("zh", "能换到另一个时段吗", RESCHEDULE),
    ("zh", "预约改期到明天下午", RESCHEDULE),
    ("de", "Termin stornieren", CANCEL),
    ("de", "Ich möchte meine Buchung absagen", CANCEL),
    ("de", "Bitte die bestätigte Beratung stornieren und erstatten", CANCEL),
    ("de", "Termin auf nächste Woche verschieben", RESCHEDULE),
    ("de", "Kann ich meine Buchung auf einen anderen Zeitpunkt umbuchen?", RESCHEDULE),
    ("de", "den Beratungstermin auf später verlegen", RESCHEDULE),
    ("de", "Buchung zurücknehmen, ich brauche sie nicht mehr", CANCEL),
    ("en", "I need a different time for my booked expert session", RESCHEDULE),
    ("zh", "这个时间不行了，挪到周五", RESCHEDULE),
]


@pytest.fixture
def catalog() -> ToolCatalog:
    return ToolCatalog(REGISTRY)


def test_golden_set_top1_accuracy_per_language_and_overall(catalog: ToolCatalog) -> None:
    hits: dict[str, list[bool]] = defaultdict(list)
    misses = []
    for language, query, expected in GOLDEN + HELD_OUT:
        ranked = catalog.rank(query)
        top = ranked[0] if ranked else None
        hits[language].append(top == expected)
        if top != expected:
            misses.append(f"{query!r}: got {top}, expected {expected}")
    accuracy = {language: sum(row) / len(row) for language, row in hits.items()}
    overall = sum(sum(row) for row in hits.values()) / len(GOLDEN + HELD_OUT)
    held_out = sum(catalog.rank(query)[:1] == [expected] for _, query, expected in HELD_OUT)
    report = (
        "top-1 accuracy: "
        + ", ".join(
            f"{lang} {acc:.1%} ({len(hits[lang])} queries)" for lang, acc in accuracy.items()
        )
        + f", overall {overall:.1%}, held-out {held_out}/{len(HELD_OUT)}; misses: {misses}"
    )
    print(report)  # noqa: T201 - the figure is the point of this test (run with -s)
    assert all(len(row) >= 12 for row in hits.values()), report
    assert overall >= 0.95, report
    assert all(acc >= 0.85 for acc in accuracy.values()), report
    assert held_out >= 0.9 * len(HELD_OUT), report  # queries not chosen after tuning hold up too


def test_empty_query_lists_every_tool_in_catalog_order(catalog: ToolCatalog) -> None:
    result = catalog.search("", 20, None)
    assert [item["name"] for item in result.data["items"]] == list(LOGICAL_TOOLS)
    assert result.data["total"] == len(LOGICAL_TOOLS)
    assert result.data["nextCursor"] is None


def test_a_query_matching_nothing_returns_no_items(catalog: ToolCatalog) -> None:
    result = catalog.search("zebra xylophone", 5, None)
    assert result.data == {
        "items": [],
        "total": 0,
        "nextCursor": None,
        "catalogVersion": catalog.version,
    }


def test_items_carry_name_human_title_uri_and_a_short_leading_summary(
    catalog: ToolCatalog,
) -> None:
    items = catalog.search("", 4, None).data["items"]
    for item in items:
        schema = REGISTRY[item["name"].replace(".", "_") + "_input"].schema
        assert set(item) == {"name", "title", "uri", "summary"}
        assert item["uri"] == "tool://" + item["name"]
        assert item["title"] == BY_NAME[item["name"]].title
        assert item["title"] != schema["title"]  # not "booking.hold_slot input"
        assert 0 < len(item["summary"]) <= SUMMARY_LIMIT
        assert schema["description"].startswith(item["summary"].removesuffix("…"))


@pytest.mark.parametrize("name", LOGICAL_TOOLS)
def test_a_tool_is_found_by_its_title_alone(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for field in catalog_ranking.FIELD_WEIGHTS:
        if field != "title":
            monkeypatch.setitem(catalog_ranking.FIELD_WEIGHTS, field, 0.0)
    assert ToolCatalog(REGISTRY).rank(BY_NAME[name].title)[0] == name


def test_cursor_pages_through_ranked_results(catalog: ToolCatalog) -> None:
    first = catalog.search("", 3, None).data
    assert first["total"] == len(LOGICAL_TOOLS)
    assert first["nextCursor"] is not None
    second = catalog.search("", 3, first["nextCursor"]).data
    assert second["nextCursor"] is not None
    third = catalog.search("", 3, second["nextCursor"]).data
    assert third["nextCursor"] is None
    names = [item["name"] for item in first["items"] + second["items"] + third["items"]]
    assert names == list(LOGICAL_TOOLS)


def test_a_cursor_is_bound_to_its_query(catalog: ToolCatalog) -> None:
    cursor = catalog.search("", 1, None).data["nextCursor"]
    assert cursor is not None
    with pytest.raises(InvalidCursorError) as excinfo:
        catalog.search("hold", 1, cursor)
    assert excinfo.value.code == "INVALID_CURSOR"
    with pytest.raises(InvalidCursorError):
        catalog.search("", 1, "not a cursor!")


def test_equal_scores_rank_by_name(catalog: ToolCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog._index, "score", lambda doc, terms: 1.0)
    assert catalog.rank("anything") == sorted(LOGICAL_TOOLS)


def test_repeated_catalog_results_are_memo_hits(catalog: ToolCatalog) -> None:
    assert catalog.search("hold", 2, None).cache_hit is False
    assert catalog.search("hold", 2, None).cache_hit is True
    assert catalog.read("tool://booking.hold_slot", 0, 10).cache_hit is False
    assert catalog.read("tool://booking.hold_slot", 0, 10).cache_hit is True


def test_a_long_query_is_answered_but_not_memoised(catalog: ToolCatalog) -> None:
    query = ("hold a slot for me " * 20)[: MEMO_QUERY_LIMIT + 1]
    first = catalog.search(query, 2, None)
    second = catalog.search(query, 2, None)
    assert (first.cache_hit, second.cache_hit) == (False, False)
    assert first.data == second.data
    assert first.data["items"][0]["name"] == HOLD
    at_limit = query[:MEMO_QUERY_LIMIT]
    catalog.search(at_limit, 2, None)
    assert catalog.search(at_limit, 2, None).cache_hit is True


def test_the_memo_stays_bounded() -> None:
    small = ToolCatalog(REGISTRY, memo_size=2)
    for limit in (1, 2, 3):
        small.search("", limit, None)
    assert small.search("", 1, None).cache_hit is False
    assert small.search("", 3, None).cache_hit is True


@pytest.mark.parametrize("name", LOGICAL_TOOLS)
@pytest.mark.parametrize("limit", [1, 7, 40, 200])
def test_pages_joined_reproduce_the_exact_document(
    catalog: ToolCatalog, name: str, limit: int
) -> None:
    uri = f"tool://{name}"
    expected = (SCHEMAS / f"{name.replace('.', '_')}_input.json").read_bytes()
    lines: list[str] = []
    offset: int | None = 0
    pages = 0
    page: Mapping[str, Any] = {}
    while offset is not None:
        page = catalog.read(uri, offset, limit).data
        assert page["offset"] == offset
        assert page["sha256"] == hashlib.sha256(expected).hexdigest()
        assert page["totalLines"] == len(expected.decode().splitlines())
        after = page["totalLines"] - page["offset"] - len(page["lines"])
        assert page["omittedLines"] == after
        assert page["truncated"] is (after > 0) is (page["next"] is not None)
        lines.extend(page["lines"])
        offset = page["next"]["offset"] if page["next"] else None
        if page["next"]:
            assert page["next"] == {"offset": page["offset"] + limit, "limit": limit}
        pages += 1
    text = "\n".join(lines) + "\n"
    assert text.encode() == expected
    assert hashlib.sha256(text.encode()).hexdigest() == page["sha256"]
    assert json.loads(text) == REGISTRY[name.replace(".", "_") + "_input"].schema
    assert pages == -(-page["totalLines"] // limit)


def test_read_page_reports_position_and_how_to_continue(catalog: ToolCatalog) -> None:
    total = len(REGISTRY["booking_hold_slot_input"].lines)
    first = catalog.read("tool://booking.hold_slot", 0, 10).data
    assert first["truncated"] is True
    assert first["next"] == {"offset": 10, "limit": 10}
    assert first["continuation"] == (
        f"Lines 0-9 of {total} shown. Call tool_catalog.read with offset 10 and limit 10 "
        "to continue."
    )
    last = catalog.read("tool://booking.hold_slot", total - 5, 10).data
    assert last["next"] is None
    assert last["truncated"] is False  # the end is reached: nothing after this page is left out
    assert last["omittedLines"] == 0
    middle = catalog.read("tool://booking.hold_slot", 10, 10).data
    assert (middle["truncated"], middle["omittedLines"]) == (True, total - 20)
    assert "End of document" in last["continuation"]
    whole = catalog.read("tool://booking.hold_slot", 0, 200).data
    assert whole["truncated"] is False
    assert whole["omittedLines"] == 0
    assert "whole document" in whole["continuation"]
    for final in (last, whole):  # how to check the joined pages against sha256
        assert final["continuation"].endswith(
            "sha256 covers all lines joined by newlines, with a final newline."
        )


def test_reading_past_the_end_gives_an_empty_page_that_says_so(catalog: ToolCatalog) -> None:
    page = catalog.read("tool://booking.get_booking", 500, 20).data
    assert page["lines"] == []
    assert page["next"] is None
    assert page["truncated"] is False
    assert page["omittedLines"] == 0
    assert page["continuation"].startswith("No lines at offset 500")


def test_reading_an_unknown_uri_is_tool_not_found(catalog: ToolCatalog) -> None:
    with pytest.raises(ToolNotFoundError) as excinfo:
        catalog.read("tool://booking.forget_booking", 0, 10)
    assert excinfo.value.code == "TOOL_NOT_FOUND"


@pytest.mark.parametrize("uri", ["tool://booking.\ud800", "TOOL://Booking.Cancel", "x" * 300])
def test_an_unknown_uri_is_not_echoed_unless_it_has_a_tool_uri_shape(
    catalog: ToolCatalog, uri: str
) -> None:
    with pytest.raises(ToolNotFoundError) as excinfo:
        catalog.read(uri, 0, 10)
    assert excinfo.value.details == {}
    with pytest.raises(ToolNotFoundError) as excinfo:
        catalog.read("tool://booking.forget_booking", 0, 10)
    assert excinfo.value.details == {"uri": "tool://booking.forget_booking"}


def test_tokenizer_folds_umlauts_both_ways_and_splits_identifiers() -> None:
    assert tokenize("Bestätigung") == ["bestaetigung"]
    assert tokenize("Bestätigung", index=True) == ["bestaetigung", "bestatigung"]
    assert tokenize("idempotencyKey starts_after booking.hold_slot") == [
        "idempotency",
        "key",
        "start",
        "after",
        "booking",
        "hold",
        "slot",
    ]
    assert tokenize("ＡＩ专家") == ["ai", "专", "家", "专家"]


def test_traditional_chinese_folds_to_characters_the_index_uses() -> None:
    """Each fold target is a character of some tool's Chinese words or of the stop words."""
    vocabulary = "".join(
        tool.intent_words + tool.topic_words for tool in BY_NAME.values()
    ) + " ".join(sorted(catalog_ranking._STOPWORDS))
    targets = {chr(code) for code in catalog_ranking._TRADITIONAL.values()}
    assert targets
    assert targets <= set(vocabulary)
    assert tokenize("預約確認") == tokenize("预约确认")


def test_registry_loads_every_schema_once_with_its_digest() -> None:
    files = sorted(path.stem for path in SCHEMAS.glob("*.json"))
    assert sorted(REGISTRY) == files
    for stem in files:
        raw = (SCHEMAS / f"{stem}.json").read_bytes()
        document = REGISTRY[stem]
        assert document.text == raw.decode()
        assert document.sha256 == hashlib.sha256(raw).hexdigest()
        assert document.schema == json.loads(raw)
        assert document.lines == tuple(raw.decode().splitlines())


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("crlf.json", b'{\r\n  "type": "object"\r\n}\r\n'),
        ("no_newline.json", b'{"type": "object"}'),
        ("broken.json", b'{"type": \n'),
        ("bad_schema.json", b'{"type": 5}\n'),
    ],
)
def test_registry_refuses_documents_it_cannot_serve(
    tmp_path: Path, name: str, content: bytes
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SchemaLoadError):
        SchemaRegistry.load(tmp_path)


# ------------------------------------------------------------------------ catalog version


def test_search_and_read_carry_the_one_catalog_version(catalog: ToolCatalog) -> None:
    found = catalog.search("list my bookings", 2, None).data
    read = catalog.read("tool://booking.list_bookings", 0, 3).data

    assert found["catalogVersion"] == read["catalogVersion"] == catalog.version
    assert len(catalog.version) == 16
    assert ToolCatalog(SchemaRegistry.load()).version == catalog.version  # a restart keeps it


def test_the_catalog_version_changes_when_a_served_document_or_listing_changes(
    catalog: ToolCatalog,
) -> None:
    entries = tuple(catalog.entries.values())
    first, *rest = entries
    edited_document = replace(first, document=replace(first.document, sha256="0" * 64))
    renamed = replace(first, title=first.title + "!")

    assert catalog_module.catalog_version(entries) == catalog.version
    assert catalog_module.catalog_version((edited_document, *rest)) != catalog.version
    assert catalog_module.catalog_version((renamed, *rest)) != catalog.version
    assert catalog_module.catalog_version(tuple(rest)) != catalog.version
