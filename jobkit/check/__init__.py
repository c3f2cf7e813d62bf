"""`jobkit check`: everything knowable about a job before it queues (docs/check.md)."""
