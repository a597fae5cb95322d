"""Planned rows to shard files: one shard's images converted and written, in processes on the
local runner; the kinds of shard file (TFRecord, gzip TFRecord, ArrayRecord); error files.
"""
