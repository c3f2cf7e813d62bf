"""Fixtures for the submit, status and cancel tests (defined in tests/manager/fixtures.py,
shared with tests/registry). Cluster tests carry the `slurm` / `pbs` markers and use the
fixtures of tests/plugins/cluster.py (`slurm_cluster`, `pbs_cluster`).
"""

from tests.plugins.home import jobkit_home as jobkit_home
