"""submitit."""
