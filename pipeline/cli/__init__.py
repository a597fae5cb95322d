"""The command line: one line and an exit status per failure, the progress bar."""
