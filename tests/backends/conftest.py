"""Each backend test gets its own JOBKIT_HOME, and the Slurm/PBS jobs of that registry are
cancelled afterwards (tests/plugins/home.py). Cluster tests carry the slurm / pbs / sge / ssh
markers and use the fixtures of tests/plugins/cluster.py and tests/plugins/sge.py."""

from tests.plugins.home import jobkit_home as jobkit_home
