"""Planned rows to shard files: one shard's images converted and written, in processes on the
local runner; error files.
"""
