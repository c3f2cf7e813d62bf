"""`jobkit report`: what a job used and how to size the next run (docs/report.md)."""
