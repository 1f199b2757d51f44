"""The released contract: every schema as last released, in the form the breaking diff judges.

``harness/contract-released.json`` names the release (``[project] version`` of pyproject.toml when
it was written) and holds each document of ``schemas/`` by file stem in its ``judged_form``: the
annotations are gone, as they never break a reader, except the root ``$id`` whose ``v<N>`` allows
a breaking change. ``python -m harness.contract check`` judges ``schemas/`` against it on every
checkout, a shallow clone included, so a breaking change cannot pass by being followed by another
commit (the diff against git compares one merge base only). ``python -m harness.contract release``
rewrites it when a version is released, in the release's commit.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.schema_breaking import judged_form

ROOT = Path(__file__).resolve().parent.parent
RELEASED = ROOT / "harness" / "contract-released.json"
PYPROJECT = ROOT / "pyproject.toml"


class ReleasedContractError(Exception):
    """The released contract file is missing or not the shape ``release`` writes."""


def project_version(pyproject: Path = PYPROJECT) -> str:
    with pyproject.open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def released_text(release: str, documents: Mapping[str, dict[str, Any]]) -> str:
    """The file ``release`` writes: one line per nesting level, sorted, so a release diffs well."""
    record = {
        "release": release,
        "documents": {
            stem: judged_form(document, keep=frozenset({"$id"}))
            for stem, document in sorted(documents.items())
        },
    }
    return json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def load_released(path: Path = RELEASED) -> tuple[str, dict[str, dict[str, Any]]]:
    """(release, documents by file stem) as recorded in ``path``.

    Raises:
        ReleasedContractError: the file is missing, not JSON, or not ``{"release": str,
            "documents": {stem: object}}``.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReleasedContractError(f"{path.name} is missing") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReleasedContractError(f"{path.name} is unreadable: {exc}") from None
    documents = record.get("documents") if isinstance(record, dict) else None
    release = record.get("release") if isinstance(record, dict) else None
    if (
        not isinstance(release, str)
        or not isinstance(documents, dict)
        or not all(isinstance(document, dict) for document in documents.values())
    ):
        raise ReleasedContractError(
            f'{path.name} is not {{"release": "<version>", "documents": {{"<stem>": {{...}}}}}}'
        )
    return release, documents
