"""Fixtures for the registry tests: each test gets its own JOBKIT_HOME (autouse), and
`jobkit` runs the CLI in this process (tests/manager/fixtures.py, shared with tests/manager).
"""

from tests.manager.fixtures import jobkit_home as jobkit_home
