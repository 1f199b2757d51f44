# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ToolCatalogReadInput(BaseModel):
    """
    Each document is fixed (sha256). Errors: INVALID_ARGUMENTS, TOOL_NOT_FOUND.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    uri: Annotated[str, Field(pattern="^tool://[a-z_]+\\.[a-z_]+$")]
    """
    A search item's uri, e.g. "tool://booking.hold_slot".
    """
    offset: Annotated[int, Field(ge=0)]
    """
    0-based first line: 0, then next.offset.
    """
    limit: Annotated[int, Field(ge=1, le=200)]
    """
    Lines per page.
    """
    requestSpanId: UUID | None = None
    """
    User-request UUID; sets meta.traceId.
    """
