"""Unit tests: pure functions and in-process components."""
