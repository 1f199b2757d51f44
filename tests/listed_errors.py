"""The error codes a tool's schema lists, the way a model reads them ("... Errors: A, B (why), C.").

Tests that meet a refusal check its code against the list of the tool that answered: a code a
tool can return but its schema does not name is a list to fix (the cancel list once missed
``PAID_AFTER_EXPIRY``).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from expert_booking.domain.errors import ErrorCode
from expert_booking.edge.catalog import input_stem
from expert_booking.edge.mcp_tools import CATALOG_READ, CATALOG_SEARCH
from expert_booking.edge.tool_registry import BY_NAME

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

# What ``tool_catalog.call`` answers itself, before or instead of the logical tool ("errors
# are the tool's own", says its schema).
CALL_ERRORS = frozenset(
    {
        ErrorCode.INVALID_ARGUMENTS,
        ErrorCode.TOOL_NOT_FOUND,
        ErrorCode.TOOL_DISABLED,
        ErrorCode.CATALOG_STALE,
        ErrorCode.RATE_LIMITED,
        ErrorCode.INTERNAL_ERROR,
    }
)

_LIST = re.compile(r"Errors: (.+)\.$")
_REMARK = re.compile(r" \([^)]*\)")


@cache
def listed_errors(stem: str) -> frozenset[str]:
    """The codes the description of ``schemas/<stem>.json`` ends with."""
    description = json.loads((SCHEMAS / f"{stem}.json").read_text(encoding="utf-8"))["description"]
    found = _LIST.search(description)
    assert found is not None, f"{stem}: its description does not end with 'Errors: ...'"
    return frozenset(code.strip() for code in _REMARK.sub("", found.group(1)).split(","))


def assert_listed(tool: str, code: str) -> None:
    """``code`` is one that ``tool`` lists: a catalog tool, or a logical tool (through
    ``tool_catalog.call``, which adds its own; any name it does not know gets only those)."""
    if tool in (CATALOG_SEARCH, CATALOG_READ):
        listed = listed_errors(input_stem(tool))
    elif tool in BY_NAME:
        listed = listed_errors(BY_NAME[tool].input_schema) | CALL_ERRORS
    else:
        listed = CALL_ERRORS
    assert code in listed, f"{tool} answered {code}, which its schema does not list"
