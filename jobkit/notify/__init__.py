"""Notifications (docs/notify.md): a message when a job starts, ends, fails or stalls, sent
once by whichever jobkit process (`jobkit watch`, `submit --wait`) sees it first."""
