"""What lets a run stop and go on: checkpoint files, the run's checkpointer (resume, restore,
save), random-number-generator states and the preemption signals that ask for a stop."""
