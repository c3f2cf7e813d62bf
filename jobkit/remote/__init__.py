"""Submitting to a cluster over ssh from a laptop, and every verb on its jobs (docs/remote.md)."""
