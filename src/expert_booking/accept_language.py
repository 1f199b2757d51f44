"""``Accept-Language`` (RFC 9110 section 12.5.4): the languages a caller prefers, best first.

One reading for every surface: the MCP edge keeps the caller's best tag in ``CallContext``, the
payment sandbox picks the best language it has a page in.
"""

from __future__ import annotations

from collections.abc import Collection

_TAG_LIMIT = 35
"""RFC 5646 puts a practical limit of 35 characters on a language tag; longer is refused."""
_SUBTAG_LIMIT = 8


def ranked_languages(header: str | None) -> list[str]:
    """The language tags of an ``Accept-Language`` value, most preferred first.

    Highest ``q`` first, then the earliest listed; ``*``, ``q=0`` and malformed entries (a
    ``q`` outside 0-1 or not a number, another parameter, no language tag) are skipped.
    """
    if not header:
        return []
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(header.split(",")):
        tag, _, parameters = item.strip().partition(";")
        tag = tag.strip()
        weight = _weight(parameters)
        if weight is not None and weight > 0 and _is_language_tag(tag):
            ranked.append((-weight, position, tag))
    return [tag for _, _, tag in sorted(ranked)]


def preferred_language(header: str | None) -> str | None:
    """The tag an ``Accept-Language`` value prefers most; ``None`` when none is usable."""
    ranked = ranked_languages(header)
    return ranked[0] if ranked else None


def negotiate(header: str | None, supported: Collection[str], default: str) -> str:
    """The first of the caller's languages (by primary subtag) in ``supported``, else ``default``.

    ``supported`` holds lower-case primary subtags (``"zh"`` serves ``zh-TW`` as well).
    """
    for tag in ranked_languages(header):
        primary = tag.partition("-")[0].lower()
        if primary in supported:
            return primary
    return default


def _weight(parameters: str) -> float | None:
    """The ``q`` of an entry's parameters (1 when absent), ``None`` when malformed."""
    name, _, value = parameters.strip().partition("=")
    if not name.strip():
        return 1.0
    if name.strip().lower() != "q":
        return None
    try:
        weight = float(value.strip())
    except ValueError:
        return None
    return weight if 0 <= weight <= 1 else None  # also refuses nan and inf


def _is_language_tag(tag: str) -> bool:
    parts = tag.split("-")
    return (
        0 < len(tag) <= _TAG_LIMIT
        and all(part.isascii() and part.isalnum() and len(part) <= _SUBTAG_LIMIT for part in parts)
        and parts[0].isalpha()
    )
