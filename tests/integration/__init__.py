"""Integration tests: adapters against real SQLite files and mocked HTTP transports."""
