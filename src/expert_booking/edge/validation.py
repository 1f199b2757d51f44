"""Strict argument validation: every violation as a JSON Pointer plus a value-free message."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from referencing import Registry

_FORMAT_NAMES = {
    "uuid": "a UUID such as 123e4567-e89b-12d3-a456-426614174000",
    "date-time": "an RFC 3339 date-time with offset and no leap second, e.g. "
    "2030-09-02T02:00:00.000Z",
    "date": "an RFC 3339 date, e.g. 2030-09-02",
    "email": "an e-mail address",
    "uri": "an absolute URI",
}
_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer (a JSON number written without fraction or exponent, such as 3; "
    "not 3.0, a string or a boolean)",
    "number": "a number (not a string or boolean)",
    "boolean": "a boolean",
    "null": "null",
}
FastValidator = Any  # a jsonschema_rs validator (the package ships no type stubs)
LONE_SURROGATE_MESSAGE = "must be valid Unicode text (no lone surrogates)."

# A UTF-16 surrogate code point on its own: the JSON escape \ud800 decodes to one, but it is
# not Unicode text (UTF-8 cannot encode it; SQLite binding and ``str.encode`` fail on it).
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


# ECMA-262 \s (JSON Schema patterns are ECMA-262 regexes); Python's \s differs (\x1c-\x1f, \x85).
_ECMA_SPACE = (
    "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
)
_ECMA_CLASSES = {"s": _ECMA_SPACE, "d": "0-9", "w": "A-Za-z0-9_"}


@functools.lru_cache(maxsize=256)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    r"""Compile a JSON Schema ``pattern`` with ECMA-262 meaning in Python's ``re``.

        ``$`` matches only at the very end (Python's also matches before a final newline, which
        would let ``"CNY
    "`` pass ``^[A-Z]{3}$``), and ``\s``, ``\d``, ``\w`` and their negations
        (outside character classes) use ECMA's ASCII/space sets instead of Python's Unicode ones.
    """
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(_ecma_escape(pattern[i + 1], in_class=in_class))
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif char == "$" and not in_class:
            char = r"\Z"
        out.append(char)
        i += 1
    return re.compile("".join(out))


def _ecma_escape(letter: str, *, in_class: bool) -> str:
    members = _ECMA_CLASSES.get(letter.lower())
    if members is None or (in_class and letter.isupper()):
        return "\\" + letter
    if in_class:
        return members
    return f"[^{members}]" if letter.isupper() else f"[{members}]"


def _pattern(validator: Validator, pattern: str, instance: Any, _schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not ecma_regex(pattern).search(instance):
        yield ValidationError(f"does not match {pattern!r}")


def _is_integer(_checker: Any, instance: Any) -> bool:
    """A real JSON integer only: Python ``int``, not ``bool`` and not a float such as ``1.0``.

    JSON Schema counts ``1.0`` as an integer; the contract allows no type coercion, and the
    domain and the intent hash need the ``int`` the caller meant, so ``1.0`` is refused.
    """
    return isinstance(instance, int) and not isinstance(instance, bool)


StrictValidator: type[Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)
"""Draft 2020-12 with ECMA-262 ``pattern`` semantics and strict integers; else the stock one."""


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """The full validator for ``schema``: no remote ``$ref`` retrieval, formats checked."""
    return StrictValidator(
        schema,
        registry=Registry(),  # self-contained documents: never resolve a remote $ref
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def compile_fast_validator(schema: Mapping[str, Any]) -> FastValidator | None:
    """The ``jsonschema_rs`` twin of ``compile_validator(schema)``: the fast accept path.

    ``None`` when ``jsonschema_rs`` cannot compile the document: then every validation takes
    the full path (slower, same answers).
    """
    try:
        return jsonschema_rs.Draft202012Validator(
            dict(schema), validate_formats=True, formats=_PYTHON_FORMATS
        )
    except ValueError:  # an unsupported schema: no twin is a slower path, never a wrong answer
        return None


def _python_format(func: Callable[[object], object], raises: Any) -> Callable[[str], bool]:
    """``FormatChecker.conforms`` for one format, as a ``jsonschema_rs`` format callback."""

    def check(text: str) -> bool:
        try:
            return bool(func(text))
        except raises:
            return False

    return check


# jsonschema_rs checks each format jsonschema knows with jsonschema's own function, so both
# agree on every format by construction (its native date-time accepts leap seconds such as
# 23:59:60, which rfc3339-validator refuses). Formats jsonschema does not check stay
# jsonschema_rs's own: stricter there can only send an input down the full path.
_PYTHON_FORMATS = {
    name: _python_format(func, raises)
    for name, (func, raises) in Draft202012Validator.FORMAT_CHECKER.checkers.items()
}


def fast_accepts(fast: FastValidator | None, instance: Any) -> bool:
    """Whether ``instance`` is certainly valid, decided by the ``jsonschema_rs`` twin alone.

    True only when there is a twin, it accepts ``instance``, and the instance holds no float
    and no lone surrogate anywhere (keys and opaque members included) and only plain JSON types
    (``dict``, ``list``, ``str``, ``int``, ``bool``, ``None``). Those are where the two
    implementations differ: ``jsonschema_rs`` counts ``1.0`` as an integer and cannot read a
    lone surrogate. False means "not known", never "invalid": the caller then runs the full
    validator, whose verdict wins.
    """
    if fast is None or not _plain_json(instance):
        return False
    try:
        return bool(fast.is_valid(instance))
    except (ValueError, TypeError, OverflowError):  # e.g. a huge int: the full path decides
        return False


def _plain_json(instance: Any) -> bool:
    """No float, no lone surrogate and no type but dict/list/str/int/bool/None (iterative)."""
    pending = [instance]
    pop, push, extend = pending.pop, pending.append, pending.extend
    while pending:
        value = pop()
        kind = type(value)
        if kind is str:
            if not value.isascii() and _LONE_SURROGATE.search(value) is not None:
                return False
        elif kind is dict:
            for key in value:
                if type(key) is not str:
                    return False
                push(key)
            extend(value.values())
        elif kind is list:
            extend(value)
        elif not (kind is int or kind is bool or value is None):
            return False
    return True


def validate_arguments(
    validator: Validator,
    instance: Any,
    *,
    fast: FastValidator | None = None,
    opaque: Collection[str] = (),
) -> list[dict[str, str]]:
    r"""Check ``instance`` against the compiled schema without changing it.

    Nothing is coerced and no default is filled in: the validator only reads. Every error is
    reported (not just the first), as ``{"pointer", "message"}`` sorted by pointer and
    de-duplicated. Messages never repeat the offending value, so customer data sent in the
    wrong place is not echoed back.

    Beyond the schema, every string value and object key must be Unicode text: one holding a
    lone surrogate (U+D800-U+DFFF, which JSON's ``\ud800`` escape can produce) is reported
    at its pointer, so it never reaches storage, hashing or the logs.

    With ``fast``, a valid instance is usually recognised by ``fast_accepts`` (2-10 µs
    instead of 25-100 µs per call here, most of it the jsonschema format functions). Anything
    it does not certainly accept goes through the full jsonschema path, which alone produces
    the violations and decides.

    Args:
        validator: A compiled Draft 2020-12 validator (see ``SchemaRegistry``).
        instance: The decoded JSON arguments.
        fast: The same schema's ``compile_fast_validator`` twin, if any.
        opaque: Top-level members passed on unread, whose text is checked by their own
            schema later (``tool_catalog.call``'s ``arguments``), so their pointers stay
            relative to that schema.

    Returns:
        The violations; empty when the instance is valid.
    """
    if fast_accepts(fast, instance):
        return []
    return full_violations(validator, instance, opaque=opaque)


def full_violations(
    validator: Validator, instance: Any, *, opaque: Collection[str] = ()
) -> list[dict[str, str]]:
    """``validate_arguments`` without the fast accept path: always the full jsonschema run."""
    found: set[tuple[str, str]] = set()
    for error in validator.iter_errors(instance):
        found.update(_describe(error))
    found.update(
        (json_pointer(path), LONE_SURROGATE_MESSAGE) for path in _lone_surrogates(instance, opaque)
    )
    return [{"pointer": pointer, "message": message} for pointer, message in sorted(found)]


def has_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a UTF-16 surrogate code point, i.e. is not valid Unicode text."""
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def unicode_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, so it can be written as UTF-8."""
    return _LONE_SURROGATE.sub("\ufffd", text) if has_lone_surrogate(text) else text


def json_pointer(path: Iterable[str | int]) -> str:
    """RFC 6901 pointer for a path of object keys and array indices (``""`` is the root).

    A lone surrogate in a key becomes U+FFFD: a pointer is sent back to the caller and must
    itself be valid Unicode text.
    """
    return unicode_text(
        "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)
    )


def _lone_surrogates(instance: Any, opaque: Collection[str]) -> Iterator[list[str | int]]:
    """Paths of the strings and keys holding a lone surrogate (iterative: no depth limit)."""
    pending: list[tuple[list[str | int], Any]] = [([], instance)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if has_lone_surrogate(value):
                yield path
        elif isinstance(value, Mapping):
            for key, member in value.items():
                if isinstance(key, str) and has_lone_surrogate(key):
                    yield [*path, key]
                elif not (path == [] and key in opaque):
                    pending.append(([*path, key], member))
        elif isinstance(value, list):
            pending.extend(([*path, index], item) for index, item in enumerate(value))


def _describe(error: ValidationError) -> Iterator[tuple[str, str]]:
    path = list(error.absolute_path)
    keyword = str(error.validator)
    value = error.validator_value
    if keyword == "required" and isinstance(error.instance, Mapping):
        for name in _strings(value):
            if name not in error.instance:
                yield json_pointer([*path, name]), "is required but missing."
        return
    if keyword in {"additionalProperties", "unevaluatedProperties"} and isinstance(
        error.instance, Mapping
    ):
        extras = _unexpected_keys(error.instance, error.schema)
        for name in extras:
            yield json_pointer([*path, name]), "is not allowed: the schema has no such property."
        if extras:
            return
    yield json_pointer(path), _message(keyword, value)


def _unexpected_keys(instance: Mapping[str, Any], schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    declared = schema.get("properties", {})
    patterns = [ecma_regex(pattern) for pattern in schema.get("patternProperties", {})]
    return [
        key
        for key in instance
        if key not in declared and not any(pattern.search(key) for pattern in patterns)
    ]


def _message(keyword: str, value: Any) -> str:  # noqa: PLR0911 - one line per keyword
    if keyword == "type":
        names = [_TYPE_NAMES.get(name, name) for name in _strings(value)]
        return f"must be {' or '.join(names)}."
    if keyword == "format":
        return f"must be {_FORMAT_NAMES.get(str(value), f'a valid {value} string')}."
    if keyword in {"minLength", "maxLength"}:
        bound = "at least" if keyword == "minLength" else "at most"
        return f"must have {bound} {value} characters."
    if keyword in {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}:
        relation = {
            "minimum": ">=",
            "maximum": "<=",
            "exclusiveMinimum": ">",
            "exclusiveMaximum": "<",
        }[keyword]
        return f"must be {relation} {value}."
    if keyword == "pattern":
        return f"must match the pattern {value}."
    if keyword == "enum":
        return f"must be one of {', '.join(_json_literal(item) for item in value)}."
    if keyword == "const":
        return f"must be {_json_literal(value)}."
    if keyword in {"minItems", "maxItems", "minProperties", "maxProperties"}:
        return f"violates {keyword} {value}."
    if keyword == "uniqueItems":
        return "must not contain the same item twice."
    if keyword in {"anyOf", "oneOf"}:
        return "does not match any of the allowed forms."
    return f"does not satisfy the schema keyword {keyword}."


def _strings(value: Any) -> Sequence[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Sequence):
        return [str(item) for item in value]
    return []


def _json_literal(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
