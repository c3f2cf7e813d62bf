"""The ranks together: the process group and its collectives, `--spawn N`, the stop votes
and the `--check` health check (torch is imported here, never by train.env)."""
