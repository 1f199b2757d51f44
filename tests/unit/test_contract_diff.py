"""The contract gate's schema diff: directions, unjudged keywords, branches, removals, the base."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import contract
from harness.contract import (
    document_directions,
    judge_document,
    major_version,
    release_diff,
    removed_documents,
    run_release,
    schema_diff,
)
from harness.contract_release import ReleasedContractError, load_released, released_text
from harness.git_base import NoBaseError, base_file_names, find_base
from harness.schema_breaking import ANNOTATIONS, Direction, breaking_changes, judged_form

RECEIVED, SENT = Direction.RECEIVED, Direction.SENT
BOTH = RECEIVED | SENT
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"

_OLD: dict[str, Any] = {
    "$id": "urn:expert-booking:schema:example:v1",
    "type": "object",
    "required": ["slotId", "status"],
    "properties": {
        "slotId": {"type": "string", "minLength": 1, "maxLength": 50, "pattern": "^s"},
        "status": {"type": "string", "enum": ["HELD", "CONFIRMED"]},
        "count": {"type": "integer", "minimum": 0, "maximum": 9},
        "kind": {"const": "booking"},
        "when": {"type": "string", "format": "date-time"},
        "next": {"anyOf": [{"$ref": "#/$defs/page"}, {"type": "null"}]},
        "page": {"$ref": "#/$defs/page"},
    },
    "additionalProperties": False,
    "$defs": {"page": {"type": "object", "properties": {"offset": {"type": "integer"}}}},
}


def _edit(pointer: str, value: Any = None, *, delete: bool = False) -> dict[str, Any]:
    changed = copy.deepcopy(_OLD)
    *parents, last = pointer.strip("/").split("/")
    node: Any = changed
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node.insert(int(last), value)
    elif delete:
        del node[last]
    else:
        node[last] = value
    return changed


# ------------------------------------------------------------------ widenings of sent documents

WIDENINGS = [
    (
        _edit("/properties/status/enum", ["HELD", "CONFIRMED", "CANCELLED"]),
        '/properties/status: enum value(s) added: "CANCELLED"',
    ),
    (_edit("/properties/status/enum", delete=True), "/properties/status: enum removed"),
    (
        _edit("/properties/slotId/type", ["string", "null"]),
        "/properties/slotId: type widened to allow null",
    ),
    (
        _edit("/properties/count/type", "number"),
        "/properties/count: type widened to allow number",
    ),
    (_edit("/required", ["slotId"]), "/: property 'status' is no longer required"),
    (
        _edit("/properties/kind/const", delete=True),
        '/properties/kind: const removed (was "booking")',
    ),
    (
        _edit("/properties/count/minimum", -1),
        "/properties/count: minimum loosened to -1 (was 0)",
    ),
    (
        _edit("/properties/count/minimum", delete=True),
        "/properties/count: minimum loosened to unset (was 0)",
    ),
    (
        _edit("/properties/slotId/maxLength", 60),
        "/properties/slotId: maxLength loosened to 60 (was 50)",
    ),
    (
        _edit("/properties/count/maximum", delete=True),
        "/properties/count: maximum loosened to unset (was 9)",
    ),
    (
        _edit("/properties/next/anyOf/2", {"type": "string"}),
        "/properties/next: anyOf gained 1 branch(es)",
    ),
    (_edit("/properties/next/anyOf", delete=True), "/properties/next: anyOf removed"),
    (
        _edit("/properties/slotId/pattern", delete=True),
        '/properties/slotId: pattern removed (was "^s")',
    ),
    (
        _edit("/properties/when/format", delete=True),
        '/properties/when: format removed (was "date-time")',
    ),
    (
        _edit("/properties/page/$ref", delete=True),
        '/properties/page: $ref removed (was "#/$defs/page")',
    ),
]


@pytest.mark.parametrize(("new", "reported"), WIDENINGS)
def test_a_widening_breaks_a_reader_of_a_sent_document_only(new, reported):
    assert breaking_changes(_OLD, new, direction=SENT) == [reported]
    assert breaking_changes(_OLD, new, direction=BOTH) == [reported]
    assert breaking_changes(_OLD, new, direction=RECEIVED) == []


def test_an_added_property_of_a_sent_document_is_not_breaking_even_when_required():
    new = _edit("/properties/note", {"type": "string"})
    new["required"].append("note")
    new["$defs"]["page"]["properties"]["limit"] = {"type": "integer"}

    assert breaking_changes(_OLD, new, direction=SENT) == []
    assert breaking_changes(_OLD, new, direction=BOTH) == ["/: property 'note' is newly required"]


@pytest.mark.parametrize("extra", [True, {"type": "string"}])
def test_a_looser_additional_properties_of_a_sent_document_is_not_breaking(extra):
    new = _edit("/additionalProperties", extra)
    assert breaking_changes(_OLD, new, direction=SENT) == []


def test_a_tighter_additional_properties_schema_is_breaking_in_every_direction():
    old = _edit("/additionalProperties", {"type": ["string", "integer"]})
    new = _edit("/additionalProperties", {"type": "string"})
    expected = ["/additionalProperties: type no longer allows integer"]
    assert breaking_changes(old, new, direction=RECEIVED) == expected
    assert breaking_changes(old, new, direction=SENT) == expected
    assert breaking_changes(old, _OLD, direction=SENT) == [
        "/additionalProperties: schema became `false`"
    ]


def test_a_tightening_of_a_sent_document_is_still_reported():
    new = _edit("/properties/slotId/maxLength", 40)
    del new["properties"]["when"]
    assert breaking_changes(_OLD, new, direction=SENT) == [
        "/: property 'when' removed or renamed",
        "/properties/slotId: maxLength tightened to 40 (was 50)",
    ]


def test_a_changed_const_breaks_both_directions():
    new = _edit("/properties/kind/const", "slot")
    assert breaking_changes(_OLD, new, direction=SENT) == ['/properties/kind: const set to "slot"']


# ------------------------------------------------------------------------------ type subsets


def test_integer_widened_to_number_is_not_breaking_for_a_received_document():
    new = _edit("/properties/count/type", "number")
    assert breaking_changes(_OLD, new) == []


def test_number_narrowed_to_integer_is_breaking_for_a_received_document():
    old = _edit("/properties/count/type", "number")
    assert breaking_changes(old, _OLD) == ["/properties/count: type no longer allows number"]


def test_an_integer_kept_inside_a_type_list_with_number_is_not_breaking():
    new = _edit("/properties/count/type", ["number", "null"])
    assert breaking_changes(_OLD, new) == []
    assert breaking_changes(_OLD, new, direction=SENT) == [
        "/properties/count: type widened to allow null, number"
    ]


# -------------------------------------------------------------------------------- branches


@pytest.mark.parametrize("direction", [RECEIVED, SENT])
@pytest.mark.parametrize("keyword", ["anyOf", "oneOf"])
def test_reordered_branches_are_not_breaking(direction, keyword):
    old = {"type": "object", keyword: [{"type": "string"}, {"type": "null"}, {"const": 1}]}
    new = {"type": "object", keyword: [{"const": 1}, {"type": "string"}, {"type": "null"}]}
    assert breaking_changes(old, new, direction=direction) == []


def test_a_changed_branch_among_reordered_ones_is_compared_at_its_new_position():
    old = {"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}]}
    new = {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]}
    assert breaking_changes(old, new) == ["/anyOf/1: maxLength tightened to 5 (was 9)"]


def test_branches_differing_only_in_annotations_are_the_same_branch_moved():
    old = {"anyOf": [{"type": "string", "description": "A name."}, {"type": "null"}]}
    new = {"anyOf": [{"type": "null", "title": "None"}, {"type": "string"}]}
    assert breaking_changes(old, new, direction=BOTH) == []


def test_an_unjudged_keyword_whose_subschemas_changed_only_annotations_is_unchanged():
    old = {"type": "object", "allOf": [{"required": ["a"], "description": "Needs a."}]}
    new = {"type": "object", "allOf": [{"required": ["a"]}]}
    assert breaking_changes(old, new, direction=BOTH) == []
    tighter = {"type": "object", "allOf": [{"required": ["a", "b"]}]}
    assert breaking_changes(old, tighter) == [
        "/: keyword `allOf` changed (not judged: treated as breaking)"
    ]


def test_a_lost_branch_is_breaking_in_every_direction():
    old = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    new = {"anyOf": [{"type": "null"}]}
    assert breaking_changes(old, new) == ["/: anyOf lost 1 branch(es)"]
    assert breaking_changes(old, new, direction=SENT) == ["/: anyOf lost 1 branch(es)"]


def test_a_new_one_of_branch_is_breaking_for_a_received_document_too():
    old = {"oneOf": [{"type": "string"}]}
    new = {"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]}
    assert breaking_changes(old, new) == ["/: oneOf gained 1 branch(es)"]
    anyof_new = {"anyOf": new["oneOf"]}
    assert breaking_changes({"anyOf": old["oneOf"]}, anyof_new) == []


def test_a_widened_one_of_branch_is_breaking_for_a_received_document_too():
    """ "abc" matched only the integer-or-short-string split; now it matches two branches."""
    old = {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]}
    new = {"oneOf": [{"type": "string"}, {"type": ["integer", "string"]}]}
    assert breaking_changes(old, new) == [
        "/oneOf/0: maxLength loosened to unset (was 3)",
        "/oneOf/1: type widened to allow string",
    ]
    anyof = {"anyOf": old["oneOf"]}, {"anyOf": new["oneOf"]}
    assert breaking_changes(*anyof) == []  # anyOf: matching two branches is fine


# ----------------------------------------------------------------------- unjudged keywords

UNJUDGED = [
    ("multipleOf", None, 5, "added"),
    ("not", None, {"const": "x"}, "added"),
    ("dependentRequired", None, {"a": ["b"]}, "added"),
    ("if", None, {"required": ["a"]}, "added"),
    ("then", {"required": ["b"]}, {"required": ["c"]}, "changed"),
    ("else", {"required": ["b"]}, None, "removed"),
    ("propertyNames", None, {"pattern": "^[a-z]+$"}, "added"),
    ("uniqueItems", True, None, "removed"),
    ("contains", None, {"const": 1}, "added"),
    ("patternProperties", {"^x": {"type": "string"}}, {"^x": {"type": "integer"}}, "changed"),
    ("allOf", None, [{"required": ["a"]}], "added"),
    ("prefixItems", None, [{"type": "string"}], "added"),
    ("unevaluatedProperties", None, False, "added"),
]


@pytest.mark.parametrize("direction", [RECEIVED, SENT])
@pytest.mark.parametrize(("keyword", "before", "after", "change"), UNJUDGED)
def test_a_keyword_the_differ_does_not_judge_is_breaking_when_it_changes(
    direction, keyword, before, after, change
):
    old: dict[str, Any] = {"type": "object"}
    new: dict[str, Any] = {"type": "object"}
    if before is not None:
        old[keyword] = before
    if after is not None:
        new[keyword] = after
    assert breaking_changes(
        {"type": "object", "properties": {"x": old}},
        {"type": "object", "properties": {"x": new}},
        direction=direction,
    ) == [f"/properties/x: keyword `{keyword}` {change} (not judged: treated as breaking)"]


@pytest.mark.parametrize("keyword", sorted(ANNOTATIONS))
def test_an_annotation_never_breaks(keyword):
    old = {"type": "object", keyword: "before"}
    new = {"type": "object", keyword: ["after"]}
    assert breaking_changes(old, new, direction=BOTH) == []
    assert breaking_changes(old, {"type": "object"}, direction=BOTH) == []


def _details(**entries: Any) -> dict[str, Any]:
    return {"type": "object", "dependentSchemas": entries}


_ALTERNATIVES = {"properties": {"alternatives": {"type": "array", "maxItems": 3}}}


def test_dependent_schemas_entries_are_judged_by_name_and_direction():
    described = copy.deepcopy(_ALTERNATIVES)
    described["properties"]["alternatives"]["description"] = "Free slots."
    tighter = copy.deepcopy(_ALTERNATIVES)
    tighter["properties"]["alternatives"]["maxItems"] = 2

    assert breaking_changes(_details(a=_ALTERNATIVES), _details(a=described), direction=BOTH) == []
    assert breaking_changes(_details(a=_ALTERNATIVES), _details(a=tighter), direction=SENT) == [
        "/dependentSchemas/a/properties/alternatives: maxItems tightened to 2 (was 3)"
    ]
    assert breaking_changes(_details(), _details(a=_ALTERNATIVES)) == [
        "/: dependentSchemas entry 'a' added"
    ]
    assert breaking_changes(_details(), _details(a=_ALTERNATIVES), direction=SENT) == []
    assert breaking_changes(_details(a=_ALTERNATIVES), _details(), direction=SENT) == [
        "/: dependentSchemas entry 'a' removed"
    ]
    assert breaking_changes(_details(a=_ALTERNATIVES), _details()) == []


def test_boolean_subschemas_are_judged():
    old = {"type": "array", "items": True}
    assert breaking_changes(old, {"type": "array", "items": False}) == [
        "/items: schema became `false`"
    ]
    assert breaking_changes(old, {"type": "array", "items": {"type": "string"}}) == [
        "/items: type no longer allows array, boolean, integer, null, number, object"
    ]
    closed = {"type": "array", "items": False}
    assert breaking_changes(closed, old, direction=SENT) == ["/items: schema `false` became true"]


# -------------------------------------------------------------------- directions by document


def test_directions_follow_the_suffix_the_received_list_and_what_a_document_embeds():
    documents: dict[str, dict[str, Any]] = {
        "thing_input": {"$defs": {"part": {}, "piece": {}}},
        "payment_answer": {},
        "thing_result": {"$defs": {"part": {}, "money": {}}},
        "part": {},
        "piece": {},
        "lonely": {},
    }
    assert document_directions(documents) == {
        "thing_input": RECEIVED,
        "payment_answer": RECEIVED,
        "thing_result": SENT,
        "part": BOTH,
        "piece": BOTH,  # a document of its own is sent, like human_approval
        "lonely": SENT,
    }


def test_a_new_required_field_of_the_payment_answer_fails_the_check():
    old = json.loads((SCHEMAS / "payment_answer.json").read_text(encoding="utf-8"))
    new = copy.deepcopy(old)
    new["properties"]["receiptId"] = {"type": "string", "description": "Receipt."}
    new["required"].append("receiptId")
    documents = {"payment_answer": new}

    failures, notes = judge_document(
        "payment_answer.json", old, new, document_directions(documents)["payment_answer"]
    )

    assert failures == [
        "payment_answer.json: 1 breaking change(s), bump the v<N> at the end of $id to allow it",
        "    /: property 'receiptId' is newly required",
    ]
    assert notes == []


def test_a_bumped_document_turns_its_changes_into_notes():
    new = _edit("/properties/status/enum", ["HELD", "CONFIRMED", "CANCELLED"])
    new["$id"] = "urn:expert-booking:schema:example:v2"
    failures, notes = judge_document("example.json", _OLD, new, SENT)
    assert failures == []
    assert notes[0] == "example.json: 1 breaking change(s), allowed, $id bumped v1 -> v2"


# ------------------------------------------------------------------------------- removals


def test_a_removed_schema_file_fails_unless_retired(monkeypatch):
    failures, notes = removed_documents(["a.json", "b.json", "c.json"], ["a.json"], "f" * 12)
    assert [failure.split(";")[0] for failure in failures] == [
        "b.json: removed since ffffffffffff",
        "c.json: removed since ffffffffffff",
    ]
    assert "RETIRED_DOCUMENTS" in failures[0]
    assert notes == []

    monkeypatch.setattr(contract, "RETIRED_DOCUMENTS", frozenset({"c"}))
    failures, notes = removed_documents(["a.json", "b.json", "c.json"], ["a.json"], "f" * 12)
    assert len(failures) == 1
    assert notes == ["c.json: removed since ffffffffffff, allowed: in RETIRED_DOCUMENTS"]


GIT = shutil.which("git")  # every checkout the tests run in was made with git
# A throwaway repository's commits must not depend on the user's git configuration.
_SETTINGS = (
    *("-c", "user.name=Contract Test", "-c", "user.email=contract@example.invalid"),
    *("-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"),
)


def _git(cwd: Path, *args: str) -> str:
    assert GIT is not None, "these tests build throwaway repositories: install git"
    done = subprocess.run(  # noqa: S603 - git with arguments this test wrote
        [GIT, *_SETTINGS, *args], cwd=cwd, check=True, capture_output=True, text=True
    )
    return done.stdout


def _write(folder: Path, name: str, document: dict[str, Any]) -> None:
    (folder / name).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def _repository(tmp_path: Path) -> tuple[Path, str]:
    """A work tree with schemas/{slot_input,gone_result}.json committed; (schemas, commit)."""
    work = tmp_path / "work"
    schemas = work / "schemas"
    schemas.mkdir(parents=True)
    _git(work, "init", "-q")
    _write(schemas, "slot_input.json", _OLD)
    _write(schemas, "gone_result.json", _OLD)
    (schemas / "README.md").write_text("not a schema\n", encoding="utf-8")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "schemas")
    return schemas, _git(work, "rev-parse", "HEAD").strip()


def test_schema_diff_reports_a_file_removed_since_the_base(tmp_path):
    schemas, base = _repository(tmp_path)
    (schemas / "gone_result.json").unlink()
    _write(schemas, "slot_input.json", _edit("/properties/count/type", "number"))

    assert base_file_names(base, schemas, ".json") == ["gone_result.json", "slot_input.json"]
    failures, notes = schema_diff(base, schemas)

    assert len(failures) == 1
    assert failures[0].startswith(f"gone_result.json: removed since {base[:12]}; ")
    assert notes == []


def test_schema_diff_judges_a_result_by_its_direction(tmp_path):
    schemas, base = _repository(tmp_path)
    _write(schemas, "gone_result.json", _edit("/properties/count/type", "number"))

    failures, _ = schema_diff(base, schemas)

    assert failures == [
        "gone_result.json: 1 breaking change(s), bump the v<N> at the end of $id to allow it",
        "    /properties/count: type widened to allow number",
    ]


# ------------------------------------------------------------------------------- the base


def test_the_first_commit_has_no_base_and_the_message_says_why(tmp_path):
    schemas, _ = _repository(tmp_path)
    with pytest.raises(NoBaseError, match=r"^HEAD is the first commit and origin/main does not"):
        find_base(None, cwd=schemas)


def test_a_shallow_clone_has_no_base_and_the_message_says_how_to_get_one(tmp_path):
    schemas, _ = _repository(tmp_path)
    work = schemas.parent
    (work / "later.txt").write_text("later\n", encoding="utf-8")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "later")
    _git(tmp_path, "clone", "-q", "--depth", "1", f"file://{work}", "clone")

    with pytest.raises(NoBaseError) as raised:
        find_base(None, cwd=tmp_path / "clone")

    message = str(raised.value)
    assert message.startswith("shallow clone without the commit before HEAD")
    assert "origin/main is HEAD itself" in message
    assert "git fetch --deepen=1" in message
    assert "--base REV" in message


def test_a_later_commit_is_compared_with_the_one_before(tmp_path):
    schemas, first = _repository(tmp_path)
    (schemas / "gone_result.json").unlink()
    _git(schemas.parent, "commit", "-q", "-a", "-m", "remove")
    assert find_base(None, cwd=schemas) == first
    assert base_file_names(first, schemas, ".json") == ["gone_result.json", "slot_input.json"]


def test_no_base_is_a_pass_with_a_warning_line(monkeypatch, capsys):
    def no_base(explicit: str | None) -> str:
        raise NoBaseError("shallow clone without the commit before HEAD")

    monkeypatch.setattr(contract, "find_base", no_base)

    assert contract._check_breaking_step(None) is True
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == (
        "  WARNING no base revision, breaking changes NOT checked: "
        "shallow clone without the commit before HEAD"
    )


# ----------------------------------------------------------------- the released contract


def test_judged_form_drops_annotations_only_where_a_schema_is():
    document = {
        "$id": "urn:expert-booking:schema:example:v1",
        "description": "An example.",
        "type": "object",
        "properties": {
            "description": {"type": "string", "title": "A property named like a keyword"},
            "kind": {"enum": ["title", "default"], "default": "title"},
        },
        "required": ["description"],
        "anyOf": [{"required": ["kind"], "$comment": "either"}],
        "$defs": {"page": {"type": "integer", "examples": [1]}},
    }
    assert judged_form(document, keep=frozenset({"$id"})) == {
        "$id": "urn:expert-booking:schema:example:v1",
        "type": "object",
        "properties": {"description": {"type": "string"}, "kind": {"enum": ["title", "default"]}},
        "required": ["description"],
        "anyOf": [{"required": ["kind"]}],
        "$defs": {"page": {"type": "integer"}},
    }


def _release(folder: Path, version: str, **documents: dict[str, Any]) -> Path:
    path = folder / "released.json"
    path.write_text(released_text(version, documents), encoding="utf-8")
    return path


def test_the_released_contract_catches_a_break_the_last_commit_did_not_make(tmp_path):
    """A breaking commit followed by another passes the git step; the released contract fails it."""
    schemas, _ = _repository(tmp_path)
    released = _release(tmp_path, "1.0.0", slot_input=_OLD, gone_result=_OLD)
    _write(schemas, "slot_input.json", _edit("/properties/count/maximum", 5))
    _git(schemas.parent, "commit", "-q", "-a", "-m", "tighten count")
    (schemas.parent / "later.txt").write_text("later\n", encoding="utf-8")
    _git(schemas.parent, "add", ".")
    _git(schemas.parent, "commit", "-q", "-m", "an unrelated commit")

    assert schema_diff(find_base(None, cwd=schemas), schemas) == ([], [])
    release, failures, _ = release_diff(released, schemas)

    assert release == "1.0.0"
    assert failures == [
        "slot_input.json: 1 breaking change(s), bump the v<N> at the end of $id to allow it",
        "    /properties/count: maximum tightened to 5 (was 9)",
    ]


def test_a_version_no_release_has_may_break_again_before_the_release(tmp_path):
    """v2 since the release: a second break before the release needs no v3; v1 still does."""
    schemas, _ = _repository(tmp_path)
    released = _release(tmp_path, "1.0.0", slot_input=_OLD, gone_result=_OLD)
    bumped = _edit("/properties/count/maximum", 5)
    bumped["$id"] = "urn:expert-booking:schema:example:v2"
    _write(schemas, "slot_input.json", bumped)
    _git(schemas.parent, "commit", "-q", "-a", "-m", "v2")
    again = copy.deepcopy(bumped)
    again["properties"]["count"]["maximum"] = 3
    _write(schemas, "slot_input.json", again)
    _write(schemas, "gone_result.json", _edit("/properties/count/maximum", 3))
    _git(schemas.parent, "commit", "-q", "-a", "-m", "break again")
    base = find_base(None, cwd=schemas)  # the v2 commit

    failures, notes = schema_diff(base, schemas, released)

    assert failures == [
        "gone_result.json: 1 breaking change(s), bump the v<N> at the end of $id to allow it",
        "    /properties/count: maximum tightened to 3 (was 9)",
    ]
    assert notes == [
        "slot_input.json: 1 breaking change(s), allowed, v2 is unreleased (release 1.0.0 has v1)",
        "    /properties/count: maximum tightened to 3 (was 5)",
    ]
    assert schema_diff(base, schemas)[0][-2].startswith("slot_input.json: 1 breaking")
    assert release_diff(released, schemas)[1] == failures  # the release step agrees on v1


def test_the_released_contract_reports_removed_and_new_documents(tmp_path):
    released = _release(tmp_path, "1.0.0", slot_input=_OLD, gone_result=_OLD)
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    _write(schemas, "slot_input.json", _OLD)
    _write(schemas, "new_result.json", _OLD)

    _, failures, notes = release_diff(released, schemas)

    assert [failure.split(";")[0] for failure in failures] == [
        "gone_result.json: removed since release 1.0.0"
    ]
    assert notes == ["new_result.json: new since release 1.0.0, skipped"]


def test_the_committed_released_contract_is_judged_and_a_missing_one_fails(tmp_path, capsys):
    release, _ = load_released()
    assert re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", release)
    assert contract._check_released_step() is True
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.startswith("[3/4] breaking changes against the released contract")
    # The release line, then only notes (a schema file new since the release), then ok.
    assert lines[0] == f"  release {release}"
    assert lines[-1] == "  ok"
    for line in lines[1:-1]:
        assert line.startswith(("  note ", "       ")), line

    assert contract._check_released_step(tmp_path / "contract-released.json") is False
    assert "  FAIL contract-released.json is missing; it is committed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "text", ["{", "[]", '{"release": 1, "documents": {}}', '{"release": "1", "documents": []}']
)
def test_a_malformed_released_contract_is_an_error_not_a_pass(tmp_path, text):
    path = tmp_path / "released.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ReleasedContractError):
        load_released(path)
    assert run_release(path, SCHEMAS, version="9.9.9") == 1


def _canonical_schemas(folder: Path, **documents: dict[str, Any]) -> Path:
    folder.mkdir()
    for stem, document in documents.items():
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        (folder / f"{stem}.json").write_text(text, encoding="utf-8")
    return folder


_VALID: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:expert-booking:schema:slot_input:v1",
    "type": "object",
    "properties": {"count": {"type": "integer", "maximum": 9, "description": "How many."}},
    "additionalProperties": False,
}


def test_release_records_the_schemas_and_refuses_what_would_swallow_a_break(tmp_path, capsys):
    path = tmp_path / "released.json"
    schemas = _canonical_schemas(tmp_path / "schemas", slot_input=_VALID)
    assert run_release(path, schemas, version="1.0.0") == 0
    recorded = judged_form(_VALID, keep=frozenset({"$id"}))
    assert load_released(path) == ("1.0.0", {"slot_input": recorded})
    assert run_release(path, schemas, version="1.0.0") == 0  # nothing changed: nothing to do

    tighter = copy.deepcopy(_VALID)
    tighter["properties"]["count"]["maximum"] = 5
    _canonical_schemas(tmp_path / "tighter", slot_input=tighter)
    capsys.readouterr()
    assert run_release(path, tmp_path / "tighter", version="1.0.0") == 1
    assert run_release(path, tmp_path / "tighter", version="1.1.0") == 1
    out = capsys.readouterr().out
    assert "FAIL release 1.0.0 is already recorded with other schemas" in out
    assert "FAIL slot_input.json: 1 breaking change(s), bump the v<N>" in out
    assert load_released(path)[0] == "1.0.0"  # refused: the record is untouched

    tighter["$id"] = "urn:expert-booking:schema:slot_input:v2"
    _canonical_schemas(tmp_path / "bumped", slot_input=tighter)
    assert run_release(path, tmp_path / "bumped", version="2.0.0") == 0
    assert release_diff(path, tmp_path / "bumped") == ("2.0.0", [], [])


# ----------------------------------------------------------------------- the version record


def test_every_document_above_v1_has_a_line_under_versions_in_the_readme():
    readme = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    versions = readme.split("\n## Versions\n", 1)[1]
    for path in sorted(SCHEMAS.glob("*.json")):
        major = major_version(json.loads(path.read_text(encoding="utf-8")))
        assert major is not None
        for version in range(2, major + 1):
            assert re.search(rf"^- `{path.stem}` v{version}\b", versions, re.MULTILINE), (
                f"{path.stem} v{version} has no line under Versions in schemas/README.md"
            )
