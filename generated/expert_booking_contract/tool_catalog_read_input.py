# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ToolCatalogReadInput(BaseModel):
    """
    Read the complete input schema of one logical tool, page by page: lines offset to offset + limit - 1 (0-based) of a fixed JSON document. The result reports totalLines, truncated, omittedLines, next ({offset, limit} of the following page, or null at the end), a continuation sentence and the sha256 of the whole document. Read until next is null before calling the tool, keep the joined document unchanged in context, and do not read it again. Read-only, no side effects. Errors: INVALID_ARGUMENTS, TOOL_NOT_FOUND, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    uri: Annotated[str, Field(pattern="^tool://[a-z_]+\\.[a-z_]+$")]
    """
    uri of a tool_catalog.search item, e.g. "tool://booking.hold_slot".
    """
    offset: Annotated[int, Field(ge=0)]
    """
    0-based first line to return; 0 for the first page, then next.offset.
    """
    limit: Annotated[int, Field(ge=1, le=200)]
    """
    Number of lines to return (1 to 200). Required: there is no default.
    """
    requestSpanId: UUID | None = None
    """
    Optional UUID of the user request this call belongs to; the trace id in meta is derived from it, so calls sharing it share one trace.
    """
