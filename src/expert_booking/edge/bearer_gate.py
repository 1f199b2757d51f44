"""``AUTH_MODE=oauth`` on /mcp: Bearer tokens, per-tool scopes and the RFC 9728 metadata.

What the SDK's ``mcp.server.auth`` gives and what this module adds:

- Used as is: ``AccessToken`` (the verifier's result), ``ProtectedResourceMetadata`` and its
  handler (the metadata document and its JSON answer, CORS included), and
  ``build_resource_metadata_url`` (where RFC 9728 section 3.1 puts it). The metadata is built
  with ``ProtectedResourceMetadata.model_validate`` from the configured strings: an
  ``AnyHttpUrl`` built from ``http://host:port`` gains a ``/``, and the official client then
  refuses the authorization server whose metadata names the issuer without it.
- Not used: ``BearerAuthBackend`` + ``RequireAuthMiddleware``. Their 401 carries no ``scope=``
  and says ``invalid_token`` even when no token was sent (RFC 6750 section 3.1: no error code
  then), their body is OAuth JSON rather than JSON-RPC, and their required scopes are one list
  for the whole endpoint, where each tool needs its own (``tool_registry.required_scope``).

:class:`BearerAuth` runs inside the gate (``edge.gates``) once the body is parsed, so a refusal
names the scope *this* request needs and echoes its JSON-RPC id:

- no ``Authorization: Bearer`` → 401, ``WWW-Authenticate: Bearer resource_metadata="…",
  scope="…"``, ``data.code`` ``AUTHENTICATION_REQUIRED``;
- a token the verifier refuses → 401 with ``error="invalid_token"`` too, ``INVALID_TOKEN``
  (the reason, e.g. ``EXPIRED``, goes only to the refusal line);
- ``Authorization`` sent twice → 400 ``error="invalid_request"``;
- a valid token without the scope → 403 ``error="insufficient_scope", scope="…",
  resource_metadata="…"`` (an OAuth client steps up on it), ``INSUFFICIENT_SCOPE``.

An admitted request carries its principal ``(iss, sub)`` in ``scope[SCOPE_PRINCIPAL]`` (the
``CallContext`` reads it) and loses its ``Authorization`` header: the token goes no further
than this module, neither to the SDK nor to any downstream service, and is never logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from mcp_types import INVALID_REQUEST
from starlette.routing import Route
from starlette.types import ASGIApp, Scope

from expert_booking.call_context import Principal
from expert_booking.edge.refusals import Refusal
from expert_booking.edge.tool_registry import READ_SCOPE, WRITE_SCOPE, required_scope

SCOPE_PRINCIPAL: Final = "expert_booking.principal"
"""ASGI scope key: the verified :class:`~expert_booking.call_context.Principal`."""

SCOPES_SUPPORTED: Final = (READ_SCOPE, WRITE_SCOPE)
WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"

AUTHENTICATION_REQUIRED: Final = "AUTHENTICATION_REQUIRED"
INVALID_TOKEN: Final = "INVALID_TOKEN"  # noqa: S105 - an error code, no secret
INSUFFICIENT_SCOPE: Final = "INSUFFICIENT_SCOPE"
"""``data.code`` of the 401 without a token, the 401 with a refused one, and the 403."""

_AUTHORIZATION: Final = b"authorization"


class TokenChecker(Protocol):
    """Verifies a Bearer token: its access, or why it was refused (a short reason code)."""

    async def verify_or_refusal(self, token: str) -> AccessToken | str:
        """The token's access, or the reason it is refused (never the token)."""
        ...


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """What this resource server publishes (RFC 9728) and names in its challenges."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] = SCOPES_SUPPORTED

    @property
    def metadata_url(self) -> str:
        """The public URL of the metadata: ``/.well-known/…`` inserted before the path."""
        return str(build_resource_metadata_url(self.document().resource))

    def document(self) -> ProtectedResourceMetadata:
        """The SDK's metadata model, its URLs kept exactly as configured."""
        return ProtectedResourceMetadata.model_validate(
            {
                "resource": self.resource,
                "authorization_servers": list(self.authorization_servers),
                "scopes_supported": list(self.scopes_supported),
            }
        )

    def routes(self) -> dict[str, ASGIApp]:
        """The metadata's local paths (path-inserted and root form) and the SDK's handler.

        The path of ``metadata_url`` is among them exactly as the challenges name it (a
        resource ending in ``/`` keeps it there, RFC 9728 section 3.1), and without the slash.
        """
        handler = cors_middleware(
            ProtectedResourceMetadataHandler(self.document()).handle, ["GET", "OPTIONS"]
        )
        resource_path = urlsplit(self.resource).path.rstrip("/")
        named = urlsplit(self.metadata_url).path
        paths = {WELL_KNOWN, f"{WELL_KNOWN}{resource_path}", f"{WELL_KNOWN}/mcp", named}
        return {path: Route(path, handler, methods=["GET", "OPTIONS"]) for path in paths}


def needed_scope(decoded: Any) -> str:
    """The scope a parsed JSON-RPC request needs: a tool's own (``required_scope``), else read.

    Everything but ``tools/call`` lists or describes the catalog, which is ``booking:read``.
    """
    if not isinstance(decoded, Mapping) or decoded.get("method") != "tools/call":
        return READ_SCOPE
    params = decoded.get("params")
    if not isinstance(params, Mapping) or not isinstance(params.get("name"), str):
        return READ_SCOPE
    arguments = params.get("arguments")
    return required_scope(params["name"], arguments if isinstance(arguments, Mapping) else {})


class BearerAuth:
    """Authenticates and authorizes one /mcp request (see the module docstring)."""

    __slots__ = ("_checker", "_metadata", "_metadata_url")

    def __init__(self, checker: TokenChecker, metadata: ResourceMetadata) -> None:
        """Check tokens with ``checker``; challenges point to ``metadata``."""
        self._checker = checker
        self._metadata = metadata
        self._metadata_url = metadata.metadata_url

    @property
    def metadata(self) -> ResourceMetadata:
        """What the metadata routes publish."""
        return self._metadata

    async def admit(
        self, scope: Scope, authorization: str | None, decoded: Any, request_id: Any
    ) -> Refusal | None:
        """``None`` when the request may go on (its principal then in the scope), else why not.

        Args:
            scope: the request's ASGI scope (gets the principal, loses ``Authorization``).
            authorization: the trimmed ``Authorization`` value, ``""`` when absent, ``None``
                when sent more than once.
            decoded: the parsed JSON body.
            request_id: the JSON-RPC id to echo.
        """
        needed = needed_scope(decoded)
        if authorization is None:
            return self._challenge(
                400, "invalid_request", needed, request_id, "AUTHORIZATION_REPEATED"
            )
        scheme, _, token = authorization.partition(" ")
        token = token.strip(" \t")
        if scheme.lower() != "bearer" or not token:
            return self._challenge(401, None, needed, request_id, "NO_BEARER_TOKEN")
        access = await self._checker.verify_or_refusal(token)
        if isinstance(access, str):
            return self._challenge(401, "invalid_token", needed, request_id, access)
        claims = access.claims or {}
        principal = Principal(issuer=str(claims.get("iss", "")), subject=access.subject or "")
        if needed not in access.scopes:
            return self._challenge(
                403,
                "insufficient_scope",
                needed,
                request_id,
                INSUFFICIENT_SCOPE,
                principal=principal,
            )
        scope[SCOPE_PRINCIPAL] = principal
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != _AUTHORIZATION]
        return None

    def _challenge(
        self,
        status: int,
        error: str | None,
        needed: str,
        request_id: Any,
        detail: str,
        *,
        principal: Principal | None = None,
    ) -> Refusal:
        parameters = [] if error is None else [f'error="{error}"']
        parameters += [f'scope="{needed}"', f'resource_metadata="{self._metadata_url}"']
        text = _TEXTS[error]
        data: dict[str, Any] = {
            "code": text.code,
            "requiredScopes": [needed],
            "resourceMetadata": self._metadata_url,
            "recovery": text.recovery.format(scope=needed, metadata=self._metadata_url),
        }
        caller = None
        if principal is not None:
            caller = {"issuer": principal.issuer, "subject": principal.subject}
        return Refusal(
            status,
            INVALID_REQUEST,
            text.message.format(scope=needed),
            text.code,
            data,
            request_id,
            headers=((b"www-authenticate", ("Bearer " + ", ".join(parameters)).encode()),),
            detail=detail,
            caller=caller,
        )


@dataclass(frozen=True, slots=True)
class _Text:
    code: str
    message: str
    recovery: str


_TEXTS: Final[Mapping[str | None, _Text]] = {
    None: _Text(
        code=AUTHENTICATION_REQUIRED,
        message="Authentication required: this server needs an OAuth access token (scope {scope})",
        recovery="Get an access token with scope {scope} for this server from an "
        "authorization server its metadata names ({metadata}), then send it as "
        "Authorization: Bearer <token>.",
    ),
    "invalid_token": _Text(
        code=INVALID_TOKEN,
        message="The access token is not valid for this server (expired, not yet valid, not "
        "issued for it, or not verifiable)",
        recovery="Get a new access token with scope {scope} for this server from an "
        "authorization server its metadata names ({metadata}) and retry with it; do not "
        "retry this token.",
    ),
    "invalid_request": _Text(
        code="INVALID_AUTHORIZATION",
        message="The request carries more than one Authorization header",
        recovery="Send exactly one Authorization: Bearer <token> header with scope {scope}.",
    ),
    "insufficient_scope": _Text(
        code=INSUFFICIENT_SCOPE,
        message="Insufficient scope: this call needs scope {scope}, which the access token lacks",
        recovery="Ask the authorization server named in {metadata} for a token that also has "
        "scope {scope} (an OAuth client re-authorizes on this 403), then call again; a person "
        "may have to consent to the new scope.",
    ),
}
