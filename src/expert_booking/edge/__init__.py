"""The MCP edge: HTTP app, transport gates, tools, wire mapping. Frameworks live here."""
