"""The JSON Schema documents of the contract, read once at startup and compiled once."""

from __future__ import annotations

import hashlib
import importlib.resources
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from jsonschema.protocols import Validator

from expert_booking.edge.validation import (
    FastValidator,
    compile_fast_validator,
    compile_validator,
)

_REPO_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


class SchemaLoadError(RuntimeError):
    """A schema document is missing, unreadable or invalid; raised at startup only."""


@dataclass(frozen=True, slots=True)
class SchemaDocument:
    """One schema file: its exact text, parsed form, digest, lines and compiled validators.

    ``validator`` (jsonschema) decides and reports violations; ``fast`` (its ``jsonschema_rs``
    twin, or ``None``) is the accept path of ``validate_arguments``.
    """

    stem: str
    text: str
    schema: Mapping[str, Any]
    sha256: str
    lines: tuple[str, ...]
    validator: Validator
    fast: FastValidator | None


class SchemaRegistry(Mapping[str, SchemaDocument]):
    """All schema documents by file stem (``booking_hold_slot_input`` ...); immutable."""

    def __init__(self, documents: Mapping[str, SchemaDocument]) -> None:
        self._documents = dict(documents)

    def __getitem__(self, stem: str) -> SchemaDocument:
        return self._documents[stem]

    def __iter__(self) -> Iterator[str]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)

    @classmethod
    def load(cls, directory: Traversable | Path | None = None) -> SchemaRegistry:
        """Read and compile every ``*.json`` document of the schema directory.

        The full meta-schema check (``check_schema``, ~7 ms a document here) is not
        repeated at startup: ``nox -s contract`` and ``tests/unit/test_schemas.py`` run it on
        the same files before they ship. Startup checks only the root: a JSON object declaring
        Draft 2020-12 and ``"type": "object"``.

        Args:
            directory: Where the documents live; by default the installed package's
                ``expert_booking/schemas`` (wheel) or the checkout's ``schemas/`` (editable).

        Raises:
            SchemaLoadError: no directory, unreadable JSON, a document that is not a Draft
                2020-12 object schema, or a text that ``tool_catalog.read`` could not
                reproduce line by line.
        """
        root = directory if directory is not None else locate_schema_directory()
        documents: dict[str, SchemaDocument] = {}
        for entry in sorted(root.iterdir(), key=lambda item: item.name):
            if entry.is_file() and entry.name.endswith(".json"):
                document = _load_document(entry.name.removesuffix(".json"), entry.read_bytes())
                documents[document.stem] = document
        if not documents:
            raise SchemaLoadError(f"no schema documents in {root}")
        return cls(documents)


def locate_schema_directory() -> Traversable:
    """The schema directory of an installed wheel, else of the source checkout.

    Raises:
        SchemaLoadError: neither location exists.
    """
    packaged = importlib.resources.files("expert_booking") / "schemas"
    if packaged.is_dir():
        return packaged
    if _REPO_SCHEMAS.is_dir():
        return _REPO_SCHEMAS
    raise SchemaLoadError("schema directory not found (expert_booking/schemas or <repo>/schemas)")


def _load_document(stem: str, raw: bytes) -> SchemaDocument:
    try:
        text = raw.decode("utf-8")
        schema = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaLoadError(f"{stem}.json is not UTF-8 JSON: {exc}") from exc
    if not isinstance(schema, dict):
        raise SchemaLoadError(f"{stem}.json is not a JSON object")
    lines = tuple(text.splitlines())
    # tool_catalog.read promises that the pages, joined with "\n" plus a final newline,
    # reproduce the document byte for byte (and so its sha256).
    if "\n".join(lines) + "\n" != text:
        raise SchemaLoadError(f"{stem}.json must use LF line ends and end with one newline")
    if schema.get("$schema") != DRAFT_2020_12 or schema.get("type") != "object":
        raise SchemaLoadError(
            f'{stem}.json must declare "$schema": "{DRAFT_2020_12}" and "type": "object"'
        )
    return SchemaDocument(
        stem=stem,
        text=text,
        schema=schema,
        sha256=hashlib.sha256(raw).hexdigest(),
        lines=lines,
        validator=compile_validator(schema),
        fast=compile_fast_validator(schema),
    )
