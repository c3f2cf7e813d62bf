"""Fixtures for the registry tests: each test gets its own JOBKIT_HOME (autouse,
tests/plugins/home.py); `jobkit` runs the CLI in this process (tests/plugins/invoke.py).
"""

from tests.plugins.home import jobkit_home as jobkit_home
