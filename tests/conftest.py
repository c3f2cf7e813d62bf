"""Shared pytest set-up: each plugin module in tests/plugins/ owns one kind of fixture."""

pytest_plugins = ["tests.plugins.cluster"]
