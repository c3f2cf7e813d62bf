"""Chains of jobs (docs/chains.md): submitted in order, each stage after the previous one,
never broken in silence."""
