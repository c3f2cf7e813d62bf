"""The trainer's configuration: a bundled name or a path, typed `--set key=value` overrides,
the sections and their checks. Torch-free: jobkit reads it at render and submit
(`train.config.load`, through jobkit/spec/trainer_check.py)."""
