# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class CatalogItem(BaseModel):
    """
    One logical tool found in the catalog.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    """
    Logical tool name to pass to tool_catalog.call, e.g. "booking.hold_slot".
    """
    title: str
    """
    Short human-readable title.
    """
    uri: Annotated[str, Field(pattern="^tool://[a-z_]+\\.[a-z_]+$")]
    """
    "tool://" + name; pass it to tool_catalog.read to read the tool's full input schema.
    """
    summary: str
    """
    One or two sentences on what the tool does.
    """


class ToolCatalogSearchResult(BaseModel):
    """
    data of a successful tool_catalog.search envelope.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    items: list[CatalogItem]
    """
    At most limit matching logical tools, best match first.
    """
    total: Annotated[int, Field(ge=0)]
    """
    Number of matching logical tools over all pages.
    """
    nextCursor: str | None
    """
    Pass as cursor with the same query to get the next page; null on the last page.
    """
    catalogVersion: Annotated[str, Field(pattern="^[0-9a-f]{16}$")]
    """
    Version of the logical tools' documents; it changes only when one changes. Pass it to tool_catalog.call to be told (CATALOG_STALE) when a document you read has changed since.
    """
