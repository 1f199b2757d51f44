"""The progressive tool catalog: ranked search and line-paged reads of the logical tool schemas."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from expert_booking.domain.cursor import decode_cursor, encode_cursor, query_binding
from expert_booking.domain.errors import ToolNotFoundError
from expert_booking.edge.catalog_ranking import Bm25fIndex, keyword_terms, tokenize
from expert_booking.edge.mcp_tools import CATALOG_SEARCH
from expert_booking.edge.schemas import SchemaDocument, SchemaRegistry
from expert_booking.edge.tool_registry import LOGICAL_TOOLS, LogicalTool

URI_PREFIX = "tool://"
SUMMARY_LIMIT = 200
MEMO_QUERY_LIMIT = 200
"""Longer search queries are answered but not memoised (only the body limit bounds a query)."""
_ECHOABLE_URI = re.compile(r"tool://[a-z_]+\.[a-z_]+")


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
        self._index = Bm25fIndex(
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
