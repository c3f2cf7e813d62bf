"""Backends: the contract (base.py), the registry (registry.py), one module or folder each."""
