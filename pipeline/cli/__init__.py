"""The command line: one line and an exit status per failure, the summary of a run."""
