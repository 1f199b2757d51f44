"""README.md's tool flow names exactly the registry's logical tools, and counts them right."""

from __future__ import annotations

import re
from pathlib import Path

from expert_booking.edge.tool_registry import LOGICAL_NAMES

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## The tool flow"
NUMBERS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)
# "the seven booking tools", "the 8 logical tools": a count of all of them.
COUNT = re.compile(r"\bthe (\w+) (?:booking|logical) tools\b", re.IGNORECASE)


def _section(text: str) -> list[str]:
    lines = text.splitlines()
    assert SECTION in lines, f"README.md has no '{SECTION}' section"
    start = lines.index(SECTION) + 1
    end = next((at for at in range(start, len(lines)) if lines[at].startswith("## ")), len(lines))
    return lines[start:end]


def _tables(lines: list[str]) -> list[list[list[str]]]:
    """Each Markdown table's body rows (header and separator dropped) as lists of cells."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return [
        [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in table[2:]]
        for table in tables
    ]


def _logical_tool_table() -> list[str]:
    """The first column of the tool flow's table that lists ``booking.*`` tools."""
    found = [
        [row[0] for row in rows]
        for rows in _tables(_section(README.read_text(encoding="utf-8")))
        if rows and all(row[0].startswith("`booking.") for row in rows)
    ]
    assert len(found) == 1, f"expected one table of `booking.*` tools under '{SECTION}'"
    return [cell.strip("`") for cell in found[0]]


def test_the_readme_tool_table_names_exactly_the_registered_logical_tools() -> None:
    listed = _logical_tool_table()
    assert sorted(listed) == sorted(LOGICAL_NAMES), (
        f"README.md's logical tool table ('{SECTION}') must list each of "
        "edge/tool_registry.py's LOGICAL_TOOLS once: add a row for a new tool, drop a removed one"
    )


def test_a_count_of_the_booking_tools_in_the_readme_is_the_registered_number() -> None:
    text = README.read_text(encoding="utf-8")
    for match in COUNT.finditer(text):
        word = match.group(1).lower()
        count = int(word) if word.isdigit() else NUMBERS.index(word) if word in NUMBERS else None
        assert count == len(LOGICAL_NAMES), (
            f"README.md says '{match.group(0)}', but edge/tool_registry.py registers "
            f"{len(LOGICAL_NAMES)} logical tools"
        )
