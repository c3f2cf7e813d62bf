"""jobkit's benchmarks: each case measures jobkit against the tool people would use instead,
interleaved in one run (`python -m bench`, see docs/benchmarks.md)."""
