"""Containers (docs/containers.md): the `container:` section, and the per-node launch command
wrapped in the runtime's own command line (one module per runtime)."""
