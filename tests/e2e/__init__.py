"""End to end: the real CLI, the bundled trainer and the real schedulers (tests/cluster/up.sh)."""
