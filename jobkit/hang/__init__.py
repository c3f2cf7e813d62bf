"""Hang detection: the trainer's heartbeats read (stall.py), every rank's stack dumped
(stacks.py) and compared (compare.py), and `jobkit doctor`'s hang section (report.py)."""
