# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict


class ToolCatalogCallInput(BaseModel):
    """
    arguments must match the tool's schema exactly: no coercion ("5" is not 5, 3.0 is not 3), no defaults, no unknown fields, strings kept as sent; a violation runs nothing (INVALID_ARGUMENTS, each field's JSON Pointer). Effects, idempotency and errors are the tool's own.
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
    The tool's arguments, per its schema.
    """
    requestSpanId: UUID
    """
    User-request UUID, shared by its calls (one meta.traceId).
    """
    catalogVersion: str | None = None
    """
    From search/read; if stale: CATALOG_STALE, nothing runs.
    """
