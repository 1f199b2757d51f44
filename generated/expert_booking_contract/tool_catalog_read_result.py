# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class NextPage(BaseModel):
    """
    Arguments for the next tool_catalog.read call on the same uri.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    offset: Annotated[int, Field(ge=0)]
    """
    0-based line to continue from.
    """
    limit: Annotated[int, Field(ge=1, le=200)]
    """
    Number of lines to request next.
    """


class ToolCatalogReadResult(BaseModel):
    """
    data of a successful tool_catalog.read envelope: one page of lines of a logical tool's input schema document.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    uri: Annotated[str, Field(pattern="^tool://[a-z_]+\\.[a-z_]+$")]
    """
    The document that was read.
    """
    lines: list[str]
    """
    Lines offset to offset + len(lines) - 1, without line breaks.
    """
    offset: Annotated[int, Field(ge=0)]
    """
    0-based number of the first returned line.
    """
    totalLines: Annotated[int, Field(ge=0)]
    """
    Number of lines of the whole document.
    """
    truncated: bool
    """
    true when lines after this page were not returned (next then says how to read on); false when this page reaches the end of the document.
    """
    omittedLines: Annotated[int, Field(ge=0)]
    """
    Number of lines after this page that were not returned (0 when this page reaches the end).
    """
    next: NextPage | None
    """
    Arguments to read the next page; null when this page reaches the end of the document.
    """
    continuation: str
    """
    A sentence telling how to read on (or that the document is complete).
    """
    sha256: Annotated[str, Field(pattern="^[0-9a-f]{64}$")]
    """
    Lowercase hex SHA-256 of the whole document; it is the same on every page, so pages of one version can be joined safely.
    """
    catalogVersion: Annotated[str, Field(pattern="^[0-9a-f]{16}$")]
    """
    Version of the logical tools' documents; it changes only when one changes. Pass it to tool_catalog.call to be told (CATALOG_STALE) when a document you read has changed since.
    """
