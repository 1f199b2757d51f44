"""Adapters implementing the ports: system clock, SQLite store, HTTP payment query."""
