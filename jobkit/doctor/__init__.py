"""`jobkit doctor`: why a job failed, read from every rank's and node's log.

classes.py is the failure table (data), scan.py reads the job's files into numbered lines
with their rank, host and time, classify.py picks the class and the first failing rank,
diagnosis.py is the result (text and JSON), cache.py keeps the one-line diagnosis that
`jobkit status` shows. docs/troubleshooting.md is the same table for people.
"""
