"""Names of the wire-timestamp contract (CONTRACT section 2), shared by server and client."""

from __future__ import annotations

CLIENT_SENT_HEADER = "x-mcp-client-sent-at"
SERVER_RECEIVED_HEADER = "x-mcp-server-received-at"
SERVER_RESPONDED_HEADER = "x-mcp-server-responded-at"

CLIENT_SENT_META = "clientSentAt"
SERVER_RECEIVED_META = "serverReceivedAt"
SERVER_RESPONDED_META = "serverRespondedAt"
SERVER_RESULT_CREATED_META = "serverResultCreatedAt"

# ASGI scope keys set by the timestamp middleware for the tool handlers.
SCOPE_RECEIVED_AT = "expert_booking.server_received_at"
SCOPE_CLIENT_SENT_AT = "expert_booking.client_sent_at"

SUPPORTED_PROTOCOL_VERSION = "2026-07-28"
