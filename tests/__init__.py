"""Test suite of expert-booking-mcp."""
