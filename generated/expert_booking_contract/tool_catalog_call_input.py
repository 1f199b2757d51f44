# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict


class ToolCatalogCallInput(BaseModel):
    """
    arguments are checked strictly against the tool's schema: no coercion ("5" is not 5, 3.0 is not 3), no defaults, no unknown fields, strings kept exactly; a violation runs nothing (INVALID_ARGUMENTS, each field's JSON Pointer). Side effects, idempotency and errors are the tool's own.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    """
    Logical tool name from tool_catalog.search (else TOOL_NOT_FOUND).
    """
    arguments: dict[str, Any]
    """
    The tool's arguments, exactly as its schema says.
    """
    requestSpanId: UUID
    """
    User-request UUID, shared by its calls (one meta.traceId).
    """
    catalogVersion: str | None = None
    """
    Optional: from search/read; if stale: CATALOG_STALE, nothing runs.
    """
