"""``shown_url``: what a message or log may show of a URL an operator typed."""

from __future__ import annotations

import pytest

from expert_booking.addresses import shown_url


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("http://127.0.0.1:3000/mcp", "http://127.0.0.1:3000/mcp"),
        ("http://127.0.0.1:3000/mcp/a@b?c=d@e", "http://127.0.0.1:3000/mcp/a@b?c=d@e"),
        ("https://user:secret@mcp.example/mcp", "https://***@mcp.example/mcp"),
        ("http://user:p@ss@[::1]:3000/mcp", "http://***@[::1]:3000/mcp"),
        ("http://@127.0.0.1/mcp", "http://***@127.0.0.1/mcp"),
        # No authority for urlsplit to find: the typos a "must be an http URL" error echoes.
        ("user:secret@127.0.0.1:3000/mcp", "***@127.0.0.1:3000/mcp"),
        ("http:/user:secret@127.0.0.1/mcp", "http:/***@127.0.0.1/mcp"),
        ("http:\\\\user:secret@127.0.0.1/mcp", "http:\\\\***@127.0.0.1/mcp"),
    ],
)
def test_userinfo_is_shown_as_stars_and_nothing_else_changes(typed: str, shown: str) -> None:
    assert shown_url(typed) == shown
