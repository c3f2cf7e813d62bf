"""Each report test gets its own JOBKIT_HOME (tests/plugins/home.py)."""

from tests.plugins.home import jobkit_home as jobkit_home
