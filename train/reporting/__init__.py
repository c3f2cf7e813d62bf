"""What a run leaves for people and for jobkit to read: where it writes, console and rank
logs, metrics, heartbeats, GPU figures, dashboards and profiler traces."""
