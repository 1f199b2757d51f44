"""An OpenAPI 3.1 description of ``POST /mcp`` (``tools/call`` only), built from ``schemas/``.

It exists for fuzzing (schemathesis reads it) and is generated at test time, never committed, so
it cannot drift from the schemas. The request body is a ``oneOf`` with one JSON-RPC ``tools/call``
variant per catalog tool (``params.arguments`` = that tool's input schema) and one per logical
tool behind ``tool_catalog.call`` (``params.arguments`` = ``{name, arguments: <logical input
schema>, requestSpanId}``). Every variant carries the 2026-07-28 ``_meta`` envelope.

The headers are declared as the protocol requires them; a client has to keep them consistent with
the body (``Mcp-Name`` = ``params.name``; ``x-mcp-client-sent-at`` = ``_meta.clientSentAt``,
which :class:`expert_booking.client.ClientSentAtTransport` stamps at the send boundary).

``python -m harness.openapi`` prints the document.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Final

from expert_booking.edge.tool_registry import LOGICAL_TOOLS as REGISTERED_TOOLS

__all__ = (
    "CATALOG_TOOLS",
    "LOGICAL_TOOLS",
    "PROTOCOL_VERSION",
    "RESULT_SCHEMAS",
    "build_openapi",
    "load_schema",
)

SCHEMAS: Final = Path(__file__).resolve().parent.parent / "schemas"
PROTOCOL_VERSION: Final = "2026-07-28"

CATALOG_TOOLS: Final = {
    "tool_catalog.search": "tool_catalog_search_input",
    "tool_catalog.read": "tool_catalog_read_input",
    "tool_catalog.call": "tool_catalog_call_input",
}
"""MCP tool name -> input schema stem."""

LOGICAL_TOOLS: Final = {tool.name: tool.input_schema for tool in REGISTERED_TOOLS}
"""Logical tool name (``tool_catalog.call``'s ``name``) -> input schema stem (the registry's)."""

RESULT_SCHEMAS: Final = {
    "tool_catalog.search": "tool_catalog_search_result",
    "tool_catalog.read": "tool_catalog_read_result",
    **{tool.name: tool.result_schema for tool in REGISTERED_TOOLS},
}
"""Tool or logical tool -> schema of ``data`` in a successful envelope."""

META_KEYS: Final = {
    "protocolVersion": "io.modelcontextprotocol/protocolVersion",
    "clientCapabilities": "io.modelcontextprotocol/clientCapabilities",
    "clientInfo": "io.modelcontextprotocol/clientInfo",
}


_MAX_DEPTH: Final = 32
"""Far deeper than any schema here; guards against a reference cycle."""


def load_schema(stem: str, schemas_dir: Path = SCHEMAS) -> dict[str, Any]:
    """The JSON Schema document ``schemas/<stem>.json``."""
    document: dict[str, Any] = json.loads((schemas_dir / f"{stem}.json").read_text("utf-8"))
    return document


def inline_refs(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with every local ``#/$defs/...`` reference replaced by its target.

    The schemas are self-contained and not recursive, so the result has no ``$ref`` left and
    can be embedded anywhere. ``$schema``, ``$id`` and ``$defs`` are dropped.
    """
    definitions: dict[str, Any] = document.get("$defs", {})

    def resolve(node: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise ValueError("reference cycle in schema")
        if isinstance(node, list):
            return [resolve(item, depth + 1) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        siblings = {
            key: resolve(value, depth + 1)
            for key, value in node.items()
            if key not in {"$ref", "$defs", "$schema", "$id"}
        }
        if reference is None:
            return siblings
        prefix = "#/$defs/"
        if not isinstance(reference, str) or not reference.startswith(prefix):
            raise ValueError(f"unsupported $ref {reference!r}")
        target = resolve(copy.deepcopy(definitions[reference.removeprefix(prefix)]), depth + 1)
        return {**target, **siblings}

    resolved: dict[str, Any] = resolve(document, 0)
    return resolved


def _meta_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "The 2026-07-28 per-request envelope plus the client send time.",
        "required": [META_KEYS["protocolVersion"], META_KEYS["clientCapabilities"], "clientSentAt"],
        "properties": {
            META_KEYS["protocolVersion"]: {"const": PROTOCOL_VERSION},
            META_KEYS["clientCapabilities"]: {"type": "object", "maxProperties": 0},
            META_KEYS["clientInfo"]: {
                "type": "object",
                "required": ["name", "version"],
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 40},
                    "version": {"type": "string", "minLength": 1, "maxLength": 20},
                },
                "additionalProperties": False,
            },
            "clientSentAt": {
                "type": "string",
                "format": "date-time",
                "description": "Equal to header x-mcp-client-sent-at (stamped by the client).",
            },
        },
        "additionalProperties": False,
    }


def _tools_call(name: str, arguments: dict[str, Any], title: str) -> dict[str, Any]:
    return {
        "title": title,
        "type": "object",
        "required": ["jsonrpc", "id", "method", "params"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {
                "type": ["integer", "string"],
                "minimum": 1,
                "maximum": 2**31 - 1,
                "minLength": 1,
                "maxLength": 64,
            },
            "method": {"const": "tools/call"},
            "params": {
                "type": "object",
                "required": ["name", "arguments", "_meta"],
                "properties": {
                    "name": {"const": name},
                    "arguments": arguments,
                    "_meta": {"$ref": "#/components/schemas/RequestMeta"},
                },
                "additionalProperties": False,
            },
        },
        "additionalProperties": False,
    }


def _ref(stem: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{stem}"}


def _header(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": schema,
    }


def build_openapi(schemas_dir: Path = SCHEMAS) -> dict[str, Any]:
    """The OpenAPI 3.1 document (a fresh dict on every call)."""
    stems = sorted(
        {*CATALOG_TOOLS.values(), *LOGICAL_TOOLS.values(), *RESULT_SCHEMAS.values(), "envelope"}
    )
    components: dict[str, Any] = {
        stem: inline_refs(load_schema(stem, schemas_dir)) for stem in stems
    }
    components["RequestMeta"] = _meta_schema()
    variants = [
        _tools_call(name, _ref(stem), f"tools/call {name}")
        for name, stem in CATALOG_TOOLS.items()
        if name != "tool_catalog.call"
    ]
    variants += [
        _tools_call(
            "tool_catalog.call",
            {
                "type": "object",
                "required": ["name", "arguments", "requestSpanId"],
                "properties": {
                    "name": {"const": logical},
                    "arguments": _ref(stem),
                    "requestSpanId": {"type": "string", "format": "uuid"},
                },
                "additionalProperties": False,
            },
            f"tools/call tool_catalog.call -> {logical}",
        )
        for logical, stem in LOGICAL_TOOLS.items()
    ]
    json_rpc_response = {
        "type": "object",
        "required": ["jsonrpc", "id"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["integer", "string", "null"]},
            "result": {"type": "object"},
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
            },
        },
    }
    answer = {"content": {"application/json": {"schema": json_rpc_response}}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "expert-booking-mcp POST /mcp (tools/call)",
            "version": PROTOCOL_VERSION,
            "description": "Generated from schemas/ by harness/openapi.py for fuzzing.",
        },
        "paths": {
            "/mcp": {
                "post": {
                    "operationId": "toolsCall",
                    "summary": "Call one of the three MCP tools (MCP 2026-07-28, JSON response).",
                    "parameters": [
                        _header(
                            "MCP-Protocol-Version",
                            {"const": PROTOCOL_VERSION},
                            "Must equal _meta protocolVersion.",
                        ),
                        _header("Mcp-Method", {"const": "tools/call"}, "Must equal method."),
                        _header(
                            "Mcp-Name", {"enum": list(CATALOG_TOOLS)}, "Must equal params.name."
                        ),
                        _header(
                            "x-mcp-client-sent-at",
                            {"type": "string", "format": "date-time"},
                            "Client send time; must equal params._meta.clientSentAt.",
                        ),
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"oneOf": variants}}},
                    },
                    "responses": {
                        "200": {"description": "JSON-RPC result (a CallToolResult).", **answer},
                        "400": {"description": "JSON-RPC error (protocol or header).", **answer},
                        "404": {"description": "JSON-RPC error: method not found.", **answer},
                        "413": {"description": "Request body over 32 KiB."},
                    },
                }
            }
        },
        "components": {"schemas": components},
    }


def main() -> int:
    """Print the document as JSON."""
    json.dump(build_openapi(), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
