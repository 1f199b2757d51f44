"""The three MCP tools this server lists: the catalog's search, read and call (CONTRACT section 3).

Their names are wire facts read by the dispatcher, the tool listing, the scope rule, the
catalog's cursor binding and the kill-switch command (which refuses to switch these off).
"""

from __future__ import annotations

from typing import Final

CATALOG_SEARCH: Final = "tool_catalog.search"
CATALOG_READ: Final = "tool_catalog.read"
CATALOG_CALL: Final = "tool_catalog.call"
MCP_TOOLS: Final = (CATALOG_SEARCH, CATALOG_READ, CATALOG_CALL)
