# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class ToolCatalogSearchInput(BaseModel):
    """
    Find logical booking tools by keywords. Returns name, title, uri ("tool://<name>") and a summary for each match, plus total and nextCursor. Read-only, no side effects; results of the fixed catalog never change while the server runs. Next step: read the tool's full input schema with tool_catalog.read (uri), then call it with tool_catalog.call (name). Errors: INVALID_ARGUMENTS, INVALID_CURSOR, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    query: str
    """
    Keywords matched against tool names, titles and summaries, e.g. "hold slot" or "confirm"; an empty string lists every tool.
    """
    limit: Annotated[int, Field(ge=1, le=20)]
    """
    Maximum number of items to return (1 to 20). Required: there is no default.
    """
    cursor: str | None = None
    """
    Opaque nextCursor from a previous call with the same query; with any other query it is rejected with INVALID_CURSOR.
    """
    requestSpanId: UUID | None = None
    """
    Optional UUID of the user request this call belongs to; the trace id in meta is derived from it, so calls sharing it share one trace.
    """
