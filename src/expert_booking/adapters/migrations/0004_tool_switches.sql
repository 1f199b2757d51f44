-- Version 4: per-tool kill switches (`expert-booking-mcp admin tools ...`).
-- A row per disabled logical tool; `tool_switch_version` grows by one with every change, so each
-- server process polls one integer and reloads the rows only when it moved.

CREATE TABLE tool_switches (
    tool        TEXT PRIMARY KEY NOT NULL,
    reason      TEXT NOT NULL CHECK (length(reason) > 0),
    disabled_at TEXT NOT NULL
);

CREATE TABLE tool_switch_version (
    id      INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
    version INTEGER NOT NULL CHECK (version >= 0)
);

INSERT INTO tool_switch_version (id, version) VALUES (1, 0);
