"""Frozen code and provenance (docs/provenance.md): the snapshot a job runs from, what was
recorded about its code, spec and software, and the `show`, `diff` and `rerun` verbs' logic."""
