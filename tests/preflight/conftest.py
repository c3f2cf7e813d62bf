"""Each preflight test gets its own registry (JOBKIT_HOME); its cluster jobs are cancelled
afterwards (tests/plugins/home.py)."""

from tests.plugins.home import jobkit_home as jobkit_home
