"""Reading an HTTP answer's body as sent, up to a cap: the one rule for every outbound fetch.

The request asks for ``Accept-Encoding: identity``; an answer that is content-encoded anyway is
refused, never decoded (a small compressed body can inflate to gigabytes), and the body is
read as it travels, so reading stops at ``limit`` bytes instead of after the whole body.
"""

from __future__ import annotations

from typing import Final

import httpx

IDENTITY_HEADERS: Final = {"accept-encoding": "identity"}
"""The request header that asks for the body as it is (merge into a request's headers)."""


class EncodedBodyError(ValueError):
    """The answer carries a ``Content-Encoding`` although identity was asked for."""


class BodyTooLargeError(ValueError):
    """The answer's body is longer than the cap."""


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed ``response`` as sent, refused once it exceeds ``limit`` bytes.

    Raises:
        EncodedBodyError: a ``Content-Encoding`` other than identity.
        BodyTooLargeError: a declared or actual length over ``limit``.
    """
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in {"", "identity"}:
        raise EncodedBodyError("a Content-Encoding was sent although identity was asked")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"the answer declares more than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():  # identity only (checked above): as sent
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError(f"the answer is longer than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
