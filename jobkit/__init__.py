"""jobkit: one YAML job spec to a running, tracked distributed PyTorch job."""

__version__ = "0.1.0"
