"""The read side: load(), verify, preview and stats, on the published version."""
