"""Fixtures that find the running cluster (tests/cluster/up.sh). Owned by the cluster work."""
