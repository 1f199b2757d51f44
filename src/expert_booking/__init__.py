"""Expert booking MCP server."""
