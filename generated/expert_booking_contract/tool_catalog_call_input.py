# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). Do not edit.

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict


class ToolCatalogCallInput(BaseModel):
    """
    Call one logical tool (found with tool_catalog.search, schema read with tool_catalog.read). arguments are passed on untransformed and validated strictly against that tool's input schema: no type conversion ("5" is not 5, and 3.0 is not the integer 3), no defaults filled in, unknown fields rejected, strings kept exactly and required to be valid Unicode text (no lone surrogates such as "\\ud800"). A violation returns INVALID_ARGUMENTS with the JSON Pointer of each offending field and runs nothing. Returns the logical tool's own envelope; its side effects, idempotency rules and error codes are those of the called tool. Own errors: INVALID_ARGUMENTS, TOOL_NOT_FOUND, INTERNAL_ERROR.
    """

    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    """
    Logical tool name exactly as listed by tool_catalog.search, e.g. "booking.search_available_slots". An unknown name returns TOOL_NOT_FOUND.
    """
    arguments: dict[str, Any]
    """
    The logical tool's arguments, exactly as its input schema describes them.
    """
    requestSpanId: UUID
    """
    UUID of the user request this call belongs to (required). The trace id in meta is derived from it, so calls sharing it share one trace; use a new UUID for each new user request.
    """
