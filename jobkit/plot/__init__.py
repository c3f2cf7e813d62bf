"""`jobkit plot`: training curves from the metrics.jsonl the bundled trainer writes.

sources.py (which files a job has), read.py (the files read), join.py (attempts joined into
one curve), chart.py (what to draw, pure), png.py (matplotlib) and term.py (plotext): the
two drawing libraries are imported only there, only when a chart is drawn.
"""
