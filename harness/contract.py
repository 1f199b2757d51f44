"""Contract gate for ``schemas/``: validity, generated-model drift and unversioned breaking changes.

Usage::

    python -m harness.contract generate          # rewrite generated/expert_booking_contract
    python -m harness.contract check [--base REV]
    python -m harness.contract release           # at a release: record schemas/ as released

``check`` exits 1 when a schema is invalid or not canonically formatted, when the generated
models differ from what the schemas produce now, when a schema changed incompatibly without
bumping the ``v<N>`` at the end of its ``$id`` (judged by who reads it: ``document_directions``)
since the released contract (``harness/contract_release.py``) or since the base revision, or
when a schema that existed in either is gone. With no base revision (no git, a first commit, a
shallow clone) the last step prints a WARNING and passes; the released contract is judged on
every checkout. Everything runs offline.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator  # type: ignore[import-untyped, unused-ignore]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped, unused-ignore]

from harness.contract_release import (
    RELEASED,
    ReleasedContractError,
    load_released,
    project_version,
    released_text,
)
from harness.git_base import BadBaseError, NoBaseError, base_document, base_file_names, find_base
from harness.schema_breaking import Direction, breaking_changes

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"
GENERATED = ROOT / "generated" / "expert_booking_contract"

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"
ID_PATTERN = re.compile(r"^urn:expert-booking:schema:(?P<stem>[a-z0-9_]+):v(?P<major>[1-9][0-9]*)$")

HEADER = (
    "# Generated from schemas/ by `nox -s codegen` (python -m harness.contract generate). "
    "Do not edit."
)

# House style 3.9, passed explicitly so that no [tool.datamodel-codegen] table is involved.
CODEGEN_OPTIONS: tuple[str, ...] = (
    "--input-file-type=jsonschema",
    "--schema-version=2020-12",
    "--output-model-type=pydantic_v2.BaseModel",
    "--target-python-version=3.11",
    "--use-annotated",
    "--field-constraints",
    "--use-standard-collections",
    "--use-union-operator",
    "--enum-field-as-literal=all",
    "--extra-fields=forbid",
    "--output-datetime-class=AwareDatetime",
    "--strict-nullable",
    "--use-schema-description",
    "--use-field-description",
    "--disable-timestamp",
    "--no-allow-remote-refs",
    "--strict-refs",
    "--no-use-type-checking-imports",
    "--formatters",
    "ruff-check",
    "ruff-format",
    f"--custom-file-header={HEADER}",
)

# datamodel-codegen pipes its output through ruff with the working directory as the config root.
# Generation always runs in a scratch directory holding this file, so the result never depends
# on the project's own ruff settings or on where the output is written.
RUFF_TOML = """\
line-length = 100
target-version = "py311"

[lint]
select = ["E4", "E7", "E9", "F", "I"]
"""

GENERATED_EXTRA_FILES = {"py.typed": ""}

# The documents the server receives besides the tool inputs (``*_input``): the payment service's
# answer to a payment query, and the human approval a host builds (never sent back). Every other
# document is one the server sends.
RECEIVED_DOCUMENTS = frozenset({"payment_answer", "human_approval"})

# Documents deleted on purpose (file stems): their removal is a note instead of a failure. Every
# caller of a removed document breaks; list one only when they have all been told (a line under
# Versions in schemas/README.md).
RETIRED_DOCUMENTS: frozenset[str] = frozenset()


# ------------------------------------------------------------------------------------ schemas


def canonical_text(document: Any) -> str:
    """The one accepted on-disk form of a schema: 2-space indent, UTF-8 as is, final newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def schema_files(folder: Path = SCHEMAS) -> list[Path]:
    return sorted(folder.glob("*.json"))


def walk(node: Any, pointer: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every object inside ``node`` with its JSON Pointer, ``node`` itself first."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((pointer, node))
        for key, value in node.items():
            found.extend(walk(value, f"{pointer}/{_escape(key)}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(walk(value, f"{pointer}/{index}"))
    return found


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _resolve_local(document: dict[str, Any], ref: str) -> bool:
    """True when ``ref`` is ``#`` or ``#/...`` and points at something inside ``document``."""
    if not ref.startswith("#"):
        return False
    node: Any = document
    for raw in ref[1:].split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def document_problems(path: Path, text: str) -> list[str]:
    """What is wrong with one schema file; an empty list means it passes."""
    name = path.name
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"{name}: not valid JSON ({exc})"]
    if not isinstance(document, dict):
        return [f"{name}: the root is not a JSON object"]
    problems: list[str] = []
    if text != canonical_text(document):
        problems.append(
            f"{name}: not in canonical form (json.dumps(indent=2, ensure_ascii=False) + newline)"
        )
    try:
        Draft202012Validator.check_schema(document)
    except SchemaError as exc:
        problems.append(
            f"{name}: invalid 2020-12 schema at /{'/'.join(map(str, exc.path))}: {exc.message}"
        )
    if document.get("$schema") != DRAFT_2020_12:
        problems.append(f"{name}: $schema must be {DRAFT_2020_12}")
    match = ID_PATTERN.match(str(document.get("$id", "")))
    if match is None or match["stem"] != path.stem:
        problems.append(f"{name}: $id must be urn:expert-booking:schema:{path.stem}:v<N>")
    if document.get("type") != "object":
        problems.append(f"{name}: the root must have type object")
    for pointer, node in walk(document):
        ref = node.get("$ref")
        if isinstance(ref, str) and not _resolve_local(document, ref):
            problems.append(f"{name}: {pointer}/$ref {ref!r} is not a resolvable local reference")
        if (
            node.get("type") == "object"
            and "properties" in node
            and node.get("additionalProperties") is not False
        ):
            problems.append(
                f"{name}: {pointer or '/'} is an object without additionalProperties: false"
            )
    return problems


def check_documents(folder: Path = SCHEMAS) -> list[str]:
    files = schema_files(folder)
    if not files:
        return [f"no schema found in {folder}"]
    problems: list[str] = []
    for path in files:
        problems.extend(document_problems(path, path.read_text(encoding="utf-8")))
    return problems


# ------------------------------------------------------------------------------------ codegen


def render_models() -> dict[str, str]:
    """Generate the models from ``schemas/`` in a scratch directory; file name -> text."""
    with tempfile.TemporaryDirectory(prefix="contract-codegen-") as scratch:
        workdir = Path(scratch)
        (workdir / "ruff.toml").write_text(RUFF_TOML, encoding="utf-8")
        # Only the schema documents: datamodel-codegen would try to parse schemas/README.md too.
        source = workdir / "schemas"
        source.mkdir()
        for path in schema_files():
            shutil.copyfile(path, source / path.name)
        output = workdir / "expert_booking_contract"
        command = [
            sys.executable,
            "-m",
            "datamodel_code_generator",
            f"--input={source}",
            f"--output={output}",
            *CODEGEN_OPTIONS,
        ]
        result = subprocess.run(command, cwd=workdir, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise CodegenError(result.stderr.strip() or result.stdout.strip())
        rendered = {
            path.relative_to(output).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(output.rglob("*.py"))
        }
    rendered.update(GENERATED_EXTRA_FILES)
    return rendered


class CodegenError(RuntimeError):
    """datamodel-codegen failed; the message is its own output."""


def committed_models() -> dict[str, str]:
    if not GENERATED.is_dir():
        return {}
    return {
        path.relative_to(GENERATED).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(GENERATED.rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and ".ruff_cache" not in path.parts
        and path.suffix != ".pyc"
    }


def drift(expected: dict[str, str], actual: dict[str, str]) -> list[str]:
    """Unified diff from the committed files (``actual``) to freshly generated ones."""
    lines: list[str] = []
    for name in sorted(expected.keys() | actual.keys()):
        old = actual.get(name)
        new = expected.get(name)
        if old == new:
            continue
        lines.extend(
            difflib.unified_diff(
                (old or "").splitlines(keepends=True),
                (new or "").splitlines(keepends=True),
                fromfile=f"committed/{name}" if old is not None else "/dev/null",
                tofile=f"generated/{name}" if new is not None else "/dev/null",
            )
        )
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
    return lines


def write_models() -> list[str]:
    """Replace ``generated/expert_booking_contract`` with fresh output; return written names."""
    rendered = render_models()
    if GENERATED.exists():
        shutil.rmtree(GENERATED)
    GENERATED.mkdir(parents=True)
    for name, text in rendered.items():
        target = GENERATED / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return sorted(rendered)


# ------------------------------------------------------------------------------- schema diff


def major_version(document: dict[str, Any]) -> int | None:
    match = ID_PATTERN.match(str(document.get("$id", "")))
    return int(match["major"]) if match else None


def document_directions(documents: Mapping[str, dict[str, Any]]) -> dict[str, Direction]:
    """Who reads each document (file stem -> direction): the one classification the diff uses.

    ``RECEIVED``: the ``*_input`` documents, ``RECEIVED_DOCUMENTS`` and every document one of
    them embeds under ``$defs``. ``SENT``: every other document and every document one of those
    embeds. A document in both sets gets both.
    """
    own = {
        stem: Direction.RECEIVED
        if stem.endswith("_input") or stem in RECEIVED_DOCUMENTS
        else Direction.SENT
        for stem in documents
    }
    directions = dict(own)
    for host, document in documents.items():
        for name in document.get("$defs", {}):
            if name in directions:
                directions[name] |= own[host]
    return directions


def judge_document(
    name: str,
    old: dict[str, Any],
    new: dict[str, Any],
    direction: Direction,
    *,
    unreleased: str | None = None,
) -> tuple[list[str], list[str]]:
    """One document's breaking changes since the base: (failures, notes).

    The changes are notes when the ``v<N>`` of its ``$id`` went up, or when ``unreleased`` says
    why no released caller reads this version yet; failures otherwise.
    """
    changes = breaking_changes(old, new, direction=direction)
    if not changes:
        return [], []
    old_major, new_major = major_version(old), major_version(new)
    bumped = old_major is not None and new_major is not None and new_major > old_major
    if bumped:
        verdict = f"allowed, $id bumped v{old_major} -> v{new_major}"
    elif unreleased is not None:
        verdict = f"allowed, {unreleased}"
    else:
        verdict = "bump the v<N> at the end of $id to allow it"
    lines = [f"{name}: {len(changes)} breaking change(s), {verdict}"]
    lines.extend(f"    {change}" for change in changes)
    return ([], lines) if bumped or unreleased is not None else (lines, [])


def unreleased_documents(
    documents: Mapping[str, dict[str, Any]], released: Mapping[str, dict[str, Any]], release: str
) -> dict[str, str]:
    """Documents whose version no release has (file stem -> why): new, or bumped since.

    Until the release, such a version may change again without another bump.
    """
    unreleased: dict[str, str] = {}
    for stem, document in documents.items():
        major = major_version(document)
        shipped = released.get(stem)
        if shipped is None:
            unreleased[stem] = f"new since release {release}"
        elif (old := major_version(shipped)) is not None and major is not None and major > old:
            unreleased[stem] = f"v{major} is unreleased (release {release} has v{old})"
    return unreleased


def removed_documents(
    base_names: Iterable[str], current_names: Iterable[str], since: str
) -> tuple[list[str], list[str]]:
    """Schema files at the base (``since`` names it) that are gone now: (failures, notes).

    No version bump can allow a removal (the document that would carry it is gone): only a stem
    listed in ``RETIRED_DOCUMENTS`` turns the failure into a note.
    """
    failures: list[str] = []
    notes: list[str] = []
    for name in sorted(set(base_names) - set(current_names)):
        if Path(name).stem in RETIRED_DOCUMENTS:
            notes.append(f"{name}: removed since {since}, allowed: in RETIRED_DOCUMENTS")
        else:
            failures.append(
                f"{name}: removed since {since}; every caller of it breaks. Keep the file, "
                "or, once every caller has moved off it, add its stem to RETIRED_DOCUMENTS in "
                "harness/contract.py and a line to Versions in schemas/README.md"
            )
    return failures, notes


def compare_documents(
    documents: Mapping[str, dict[str, Any]],
    base: Mapping[str, dict[str, Any]],
    since: str,
    unreleased: Mapping[str, str] | None = None,
) -> tuple[list[str], list[str]]:
    """Judge ``documents`` (file stem -> schema) against ``base``; returns (failures, notes).

    ``unreleased`` (see :func:`unreleased_documents`) turns a document's breaks into notes.
    """
    directions = document_directions(documents)
    failures, notes = removed_documents(
        [f"{stem}.json" for stem in base], [f"{stem}.json" for stem in documents], since
    )
    for stem, document in sorted(documents.items()):
        name = f"{stem}.json"
        old = base.get(stem)
        if old is None:
            notes.append(f"{name}: new since {since}, skipped")
            continue
        failed, noted = judge_document(
            name, old, document, directions[stem], unreleased=(unreleased or {}).get(stem)
        )
        failures.extend(failed)
        notes.extend(noted)
    return failures, notes


def current_documents(folder: Path = SCHEMAS) -> dict[str, dict[str, Any]]:
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8")) for path in schema_files(folder)
    }


def schema_diff(
    base: str, folder: Path = SCHEMAS, released: Path | None = None
) -> tuple[list[str], list[str]]:
    """Compare every schema in ``folder`` with the git revision ``base``; (failures, notes).

    A version no release has (``released``'s record) may break again without a bump; with no
    readable record (the release step fails on that) every break needs one.
    """
    committed: dict[str, dict[str, Any]] = {}
    for name in base_file_names(base, folder, ".json"):
        document = base_document(base, folder / name)
        if document is not None:
            committed[Path(name).stem] = document
    documents = current_documents(folder)
    unreleased: dict[str, str] = {}
    if released is not None:
        try:
            release, shipped = load_released(released)
        except ReleasedContractError:
            pass
        else:
            unreleased = unreleased_documents(documents, shipped, release)
    return compare_documents(documents, committed, base[:12], unreleased)


def release_diff(path: Path = RELEASED, folder: Path = SCHEMAS) -> tuple[str, list[str], list[str]]:
    """Compare every schema in ``folder`` with the released contract; (release, failures, notes).

    Raises:
        ReleasedContractError: ``path`` is missing or malformed.
    """
    release, released = load_released(path)
    failures, notes = compare_documents(current_documents(folder), released, f"release {release}")
    return release, failures, notes


# ---------------------------------------------------------------------------------------- CLI


def _check_documents_step() -> bool:
    print("[1/4] schemas: valid draft 2020-12, canonical formatting, self-contained")
    problems = check_documents()
    for problem in problems:
        print(f"  FAIL {problem}")
    if not problems:
        print(f"  ok ({len(schema_files())} documents)")
    return not problems


def _check_drift_step() -> bool:
    print("[2/4] generated models match schemas/")
    try:
        diff = drift(render_models(), committed_models())
    except CodegenError as exc:
        print(f"  FAIL datamodel-codegen failed:\n{exc}")
        return False
    if diff:
        sys.stdout.writelines(diff)
        print("  FAIL generated/ has drifted; run `nox -s codegen` and commit the result")
        return False
    print("  ok")
    return True


def _print_verdicts(failures: list[str], notes: list[str]) -> bool:
    for label, lines in (("note", notes), ("FAIL", failures)):
        for line in lines:
            print(f"       {line}" if line.startswith(" ") else f"  {label} {line}")
    if not failures:
        print("  ok")
    return not failures


def _check_released_step(path: Path = RELEASED) -> bool:
    print(f"[3/4] breaking changes against the released contract ({path.name})")
    try:
        release, failures, notes = release_diff(path)
    except ReleasedContractError as exc:
        print(f"  FAIL {exc}; it is committed: restore it from git")
        return False
    print(f"  release {release}")
    return _print_verdicts(failures, notes)


def _check_breaking_step(base_rev: str | None) -> bool:
    print("[4/4] breaking changes against the base revision")
    try:
        base = find_base(base_rev)
    except NoBaseError as exc:
        # A pass: CI's clone depth is not known here, and a red build would not deepen it.
        print(f"  WARNING no base revision, breaking changes NOT checked: {exc}")
        return True
    except BadBaseError as exc:
        print(f"  FAIL {exc}")
        return False
    print(f"  base {base[:12]}")
    return _print_verdicts(*schema_diff(base, released=RELEASED))


def run_check(base_rev: str | None) -> int:
    results = [
        _check_documents_step(),
        _check_drift_step(),
        _check_released_step(),
        _check_breaking_step(base_rev),
    ]
    passed = all(results)
    print("contract check passed" if passed else "contract check FAILED")
    return 0 if passed else 1


def run_generate() -> int:
    problems = check_documents()
    if problems:
        for problem in problems:
            print(f"FAIL {problem}")
        return 1
    try:
        written = write_models()
    except CodegenError as exc:
        print(f"datamodel-codegen failed:\n{exc}")
        return 1
    print(f"wrote {len(written)} files to {GENERATED.relative_to(ROOT)}")
    return 0


def run_release(path: Path = RELEASED, folder: Path = SCHEMAS, version: str | None = None) -> int:
    """Record ``folder`` as the contract of ``version`` (``[project] version``); 1 if refused.

    Refused when a schema is invalid, when the version is the one already recorded (bump it
    first, or a release could swallow a breaking change), and when the schemas break the
    recorded release without a ``v<N>`` bump: a release never ships an unversioned break.
    """
    version = version or project_version()
    problems = check_documents(folder)
    documents = current_documents(folder)
    text = released_text(version, documents)
    if path.exists():
        try:
            release, released = load_released(path)
        except ReleasedContractError as exc:
            print(f"FAIL {exc}; restore it from git, it records the last release")
            return 1
        if path.read_text(encoding="utf-8") == text:
            print(f"{path.name} already records release {version} as schemas/ is now")
            return 0
        if release == version:
            problems.append(
                f"release {version} is already recorded with other schemas; bump [project] "
                "version in pyproject.toml first"
            )
        problems.extend(compare_documents(documents, released, f"release {release}")[0])
    if problems:
        for problem in problems:
            print(f"       {problem}" if problem.startswith(" ") else f"FAIL {problem}")
        return 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.name}: release {version}, {len(documents)} documents")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.contract", description=__doc__)
    parser.add_argument("command", choices=("check", "generate", "release"))
    parser.add_argument(
        "--base",
        metavar="REV",
        help="compare schemas with the merge base of HEAD and REV "
        "(default: origin/main if it exists, else HEAD~1)",
    )
    args = parser.parse_args(argv)
    if args.command == "generate":
        return run_generate()
    if args.command == "release":
        return run_release()
    return run_check(args.base)


if __name__ == "__main__":
    sys.exit(main())
