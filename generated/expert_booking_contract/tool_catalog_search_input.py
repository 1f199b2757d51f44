# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ToolCatalogSearchInput(BaseModel):
    """
    The catalog is fixed. Errors: INVALID_ARGUMENTS, INVALID_CURSOR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    query: str
    """
    English, Chinese or German words, e.g. "hold slot"; "" lists all.
    """
    limit: Annotated[int, Field(ge=1, le=20)]
    """
    Most items to return.
    """
    cursor: str | None = None
    """
    nextCursor of the same query's previous page.
    """
    requestSpanId: UUID | None = None
    """
    User-request UUID; sets meta.traceId.
    """
