"""The training itself: one rank's set-up, the DDP+AMP step loop, how long it runs, loss
scaling, the optimizer, evaluation and the allocator settings for CPU steps."""
