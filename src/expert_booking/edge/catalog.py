"""The progressive tool catalog: ranked search and line-paged reads of the logical tool schemas."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from expert_booking.domain.cursor import decode_cursor, encode_cursor, query_binding
from expert_booking.domain.errors import ToolNotFoundError
from expert_booking.edge.mcp_tools import CATALOG_SEARCH
from expert_booking.edge.schemas import SchemaDocument, SchemaRegistry
from expert_booking.edge.tool_registry import LOGICAL_TOOLS, LogicalTool

URI_PREFIX = "tool://"
SUMMARY_LIMIT = 200
MEMO_QUERY_LIMIT = 200
"""Longer search queries are answered but not memoised (only the body limit bounds a query)."""
_ECHOABLE_URI = re.compile(r"tool://[a-z_]+\.[a-z_]+")

# Field weights of the BM25F index (name and keywords say most about intent; prose least).
FIELD_WEIGHTS = {
    "name": 3.0,
    "intent": 3.0,
    "topic": 0.5,
    "params": 1.0,
    "title": 1.0,
    "description": 0.15,
}
_K1 = 1.2
_CJK_UNIGRAM_WEIGHT = 0.3
_MAX_CJK_GRAM = 4
_MIN_STEM = 4
_B = 0.75
_STOPWORD_TEXT = (
    "a an the to of for with and or in on at by as is are was were be been it its this that "
    "these those there here my me i we our you your he she they them from into up out over "
    "any some each no not only also but if then so than such can could will would "
    "should may might must do does did has have had please want need like what how whose "
    "e g etc input one two new other same "
    "ich wir ein eine einen einem einer der die das den dem des mit für und oder zu ist sind "
    "war hat habe haben es gibt bitte von vom zum zur im am an "
    "auf beim bei noch schon jetzt nur auch nicht wie was wo durch "
    "我 的 了 吗 呢 个 一 这 那 帮 请 要 想 是 在 和 给 把 吧 啊 下 有"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_UMLAUTS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue"})
_PLAIN = str.maketrans({"ä": "a", "ö": "o", "ü": "u"})
_SUFFIXES = ("en", "es", "e", "s")


def tokenize(text: str, *, index: bool = False) -> list[str]:
    """Search terms of ``text``: casefolded NFKC words; CJK characters and 2- to 4-grams.

    German umlauts fold to ``ae``/``oe``/``ue``; an ``index`` tokenisation also keeps the plain
    vowel (``bestatigen``) so a query typed without umlauts matches too.
    """
    spaced = _CAMEL.sub(" ", text)
    normalised = unicodedata.normalize("NFKC", spaced).casefold()
    terms: list[str] = []
    for word in _WORD.findall(normalised):
        for part in _CJK.split(word):
            if part:
                terms.extend(_latin_terms(part, index=index))
        for run in _CJK.findall(word):
            terms.extend(ch for ch in run if ch not in _STOPWORDS)
            terms.extend(
                run[i : i + n] for n in range(2, _MAX_CJK_GRAM + 1) for i in range(len(run) - n + 1)
            )
    return terms


def keyword_terms(words: str) -> list[str]:
    """Index terms of a keyword list: a CJK keyword stays one term (plus its characters).

    Without word segmentation a query is cut into every 2- to 4-gram, so a keyword like
    ``可预约`` ("bookable") matches as a whole instead of leaking its part ``预约`` ("book").
    """
    terms: list[str] = []
    for word in words.split():
        if _CJK.fullmatch(word) and len(word) <= _MAX_CJK_GRAM:
            terms.append(word)
            terms.extend(ch for ch in word if ch not in _STOPWORDS)
        else:
            terms.extend(tokenize(word, index=True))
    return terms


def _latin_terms(word: str, *, index: bool) -> Iterator[str]:
    if word in _STOPWORDS:
        return
    yield _stem(word.translate(_UMLAUTS))
    if index and word.translate(_PLAIN) != word:
        yield _stem(word.translate(_PLAIN))


def _stem(word: str) -> str:
    """Strip plural and inflection endings (-en, -es, -e, -s) while four letters remain."""
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            if (
                word.endswith(suffix)
                and len(word) - len(suffix) >= _MIN_STEM
                and not word.endswith("ss")
            ):
                word = word[: -len(suffix)]
                changed = True
                break
    return word


class _Bm25fIndex:
    """BM25F over a few documents with weighted fields (Robertson & Zaragoza 2009, section 3).

    Written here, not taken from a library: the corpus is a few fixed documents needing field
    weights, CJK n-grams and umlaut folding that no BM25 package on our pins offers, and fifty
    lines do not justify a dependency.
    """

    def __init__(self, documents: Mapping[str, Mapping[str, list[str]]]) -> None:
        self._fields = {
            doc: {f: Counter(t) for f, t in fs.items()} for doc, fs in documents.items()
        }
        self._lengths = {doc: {f: len(t) for f, t in fs.items()} for doc, fs in documents.items()}
        count = len(documents)
        self._average = {
            field: sum(lengths.get(field, 0) for lengths in self._lengths.values()) / count
            for field in FIELD_WEIGHTS
        }
        # Document frequency comes from the curated fields: schema prose mentions every tool's
        # verbs ("holds or reserves nothing"), which would otherwise erase their idf. A word
        # found only in prose takes its frequency from the prose.
        curated: Counter[str] = Counter()
        prose: Counter[str] = Counter()
        for fields in self._fields.values():
            curated.update(
                {t for f, counts in fields.items() if f != "description" for t in counts}
            )
            prose.update(set(fields.get("description", {})))
        self._idf = {
            term: math.log(1 + (count - n + 0.5) / (n + 0.5))
            for term in prose.keys() | curated.keys()
            for n in [curated.get(term) or prose[term]]
        }

    def score(self, doc: str, terms: set[str]) -> float:
        total = 0.0
        for term in terms:
            idf = self._idf.get(term)
            if idf is None:
                continue
            weighted = 0.0
            for field, counts in self._fields[doc].items():
                tf = counts.get(term, 0)
                if tf:
                    ratio = self._lengths[doc][field] / (self._average[field] or 1.0)
                    b = _B if field == "description" else 0.0  # curated lists: no length norm
                    weighted += FIELD_WEIGHTS[field] * tf / (1 - b + b * ratio)
            if weighted:
                total += _term_weight(term) * idf * weighted * (_K1 + 1) / (_K1 + weighted)
        return total


def _term_weight(term: str) -> float:
    """A single CJK character says little on its own; bigrams carry the meaning."""
    return _CJK_UNIGRAM_WEIGHT if len(term) == 1 and _CJK.match(term) else 1.0


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One logical tool as the catalog lists it."""

    name: str
    title: str
    uri: str
    summary: str
    document: SchemaDocument

    def item(self) -> dict[str, str]:
        """The wire form ``{name, title, uri, summary}``."""
        return {"name": self.name, "title": self.title, "uri": self.uri, "summary": self.summary}


@dataclass(frozen=True, slots=True)
class CatalogResult:
    """``data`` of a catalog envelope and whether it came from the memo (HIT) or not (MISS)."""

    data: Mapping[str, Any]
    cache_hit: bool


class ToolCatalog:
    """Search and read over the fixed logical tools; results never change, so they are memoised.

    The memo is bounded by ``memo_size`` entries, and a search query longer than
    ``MEMO_QUERY_LIMIT`` characters is never kept, so one entry stays small.
    """

    def __init__(
        self,
        registry: SchemaRegistry,
        *,
        memo_size: int = 1024,
        tools: tuple[LogicalTool[Any, Any], ...] = LOGICAL_TOOLS,
    ) -> None:
        self.entries = {tool.name: _entry(tool, registry[tool.input_schema]) for tool in tools}
        self._by_uri = {entry.uri: entry for entry in self.entries.values()}
        self._index = _Bm25fIndex(
            {tool.name: _fields(self.entries[tool.name], tool) for tool in tools}
        )
        self.version = catalog_version(tuple(self.entries.values()))
        self._memo: dict[Hashable, Mapping[str, Any]] = {}
        self._memo_size = memo_size

    def rank(self, query: str) -> list[str]:
        """Names of the matching tools, best first (ties by name); every tool for ``""``."""
        terms = set(tokenize(query))
        if not query.strip():
            return list(self.entries)
        scored = [(self._index.score(name, terms), name) for name in self.entries]
        return [name for score, name in sorted(scored, key=lambda s: (-s[0], s[1])) if score > 0]

    def search(self, query: str, limit: int, cursor: str | None) -> CatalogResult:
        """One page of ranked candidates with ``total`` and a query-bound ``nextCursor``.

        Raises:
            InvalidCursorError: the cursor is malformed or was issued for another query.
        """
        binding = query_binding({"tool": CATALOG_SEARCH, "query": query})
        offset = decode_cursor(cursor, binding) if cursor is not None else 0
        if len(query) > MEMO_QUERY_LIMIT:  # answered, but not kept: the memo holds short keys
            return CatalogResult(self._page(query, limit, offset, binding), cache_hit=False)
        return self._memoised(
            ("search", query, limit, offset), lambda: self._page(query, limit, offset, binding)
        )

    def read(self, uri: str, offset: int, limit: int) -> CatalogResult:
        """Lines ``offset`` .. ``offset + limit - 1`` of a tool's input schema document.

        Raises:
            ToolNotFoundError: no logical tool has this uri.
        """
        entry = self._by_uri.get(uri)
        if entry is None:
            if _ECHOABLE_URI.fullmatch(uri):  # the schema's pattern; never echo other input
                raise ToolNotFoundError(uri=uri)
            raise ToolNotFoundError
        return self._memoised(
            ("read", uri, offset, limit), lambda: _read_page(entry, offset, limit, self.version)
        )

    def _page(self, query: str, limit: int, offset: int, binding: str) -> Mapping[str, Any]:
        names = self.rank(query)
        end = offset + limit
        return {
            "items": [self.entries[name].item() for name in names[offset:end]],
            "total": len(names),
            "nextCursor": encode_cursor(end, binding) if end < len(names) else None,
            "catalogVersion": self.version,
        }

    def _memoised(self, key: Hashable, compute: Any) -> CatalogResult:
        cached = self._memo.get(key)
        if cached is not None:
            return CatalogResult(cached, cache_hit=True)
        data: Mapping[str, Any] = compute()
        if len(self._memo) >= self._memo_size:
            del self._memo[next(iter(self._memo))]
        self._memo[key] = data
        return CatalogResult(data, cache_hit=False)


def catalog_version(entries: tuple[CatalogEntry, ...]) -> str:
    """16 hex digits of SHA-256 over what the catalog serves of each tool, in catalog order.

    Each tool's name, title, summary and its document's digest: a changed, added or removed
    document (or listing) changes the version; a restart with the same documents keeps it.
    """
    digest = hashlib.sha256()
    for entry in entries:
        for part in (entry.name, entry.title, entry.summary, entry.document.sha256):
            digest.update(part.encode())
            digest.update(b"\0")
    return digest.hexdigest()[:16]


def input_stem(name: str) -> str:
    """Schema file stem of an MCP tool's input (``tool_catalog.read`` -> ``..._input``)."""
    return name.replace(".", "_") + "_input"


def _entry(tool: LogicalTool[Any, Any], document: SchemaDocument) -> CatalogEntry:
    return CatalogEntry(
        name=tool.name,
        title=tool.title,
        uri=URI_PREFIX + tool.name,
        summary=summarize(str(document.schema.get("description", ""))),
        document=document,
    )


def summarize(description: str, limit: int = SUMMARY_LIMIT) -> str:
    """Leading whole sentences of ``description`` that fit in ``limit`` characters."""
    summary = ""
    for sentence in re.split(r"(?<=[.!?])\s+", description.strip()):
        candidate = f"{summary} {sentence}".strip()
        if len(candidate) > limit:
            break
        summary = candidate
    if summary:
        return summary
    cut = description[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def _fields(entry: CatalogEntry, tool: LogicalTool[Any, Any]) -> dict[str, list[str]]:
    _, _, local = entry.name.partition(".")
    return {
        "name": tokenize(local, index=True),
        "title": tokenize(entry.title, index=True),
        "description": tokenize(str(entry.document.schema.get("description", "")), index=True),
        "params": tokenize(" ".join(_property_names(entry.document.schema)), index=True),
        "intent": keyword_terms(tool.intent_words),
        "topic": keyword_terms(tool.topic_words),
    }


def _property_names(schema: Any) -> Iterator[str]:
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, Mapping):
                yield from (str(name) for name in value)
            yield from _property_names(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _property_names(item)


def _read_page(entry: CatalogEntry, offset: int, limit: int, version: str) -> Mapping[str, Any]:
    lines = entry.document.lines
    total = len(lines)
    page = list(lines[offset : offset + limit])
    end = offset + len(page)
    remaining = max(0, total - end)  # the lines after this page; earlier ones the caller skipped
    return {
        "uri": entry.uri,
        "lines": page,
        "offset": offset,
        "totalLines": total,
        "truncated": remaining > 0,
        "omittedLines": remaining,
        "next": {"offset": end, "limit": limit} if remaining else None,
        "continuation": _continuation(offset, end, total, limit),
        "sha256": entry.document.sha256,
        "catalogVersion": version,
    }


def _continuation(offset: int, end: int, total: int, limit: int) -> str:
    if offset >= total:
        return (
            f"No lines at offset {offset}: the document has {total} lines (0-{total - 1}). "
            f"Call tool_catalog.read with offset 0 and limit {limit} to read it from the start."
        )
    shown = f"Lines {offset}-{end - 1} of {total} shown."
    if end < total:
        return f"{shown} Call tool_catalog.read with offset {end} and limit {limit} to continue."
    if offset == 0:
        return f"{shown} This is the whole document; nothing is left to read.{_DIGEST_RULE}"
    return f"{shown} End of document; lines 0-{offset - 1} are on the earlier pages.{_DIGEST_RULE}"


# An agent checking the pages it joined gets a false mismatch without the final newline.
_DIGEST_RULE = " sha256 covers all lines joined by newlines, with a final newline."
