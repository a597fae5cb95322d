"""Rows to a shard plan: label ids, splits' shard counts, each row's shard and order, duplicates
and refresh reuse.
"""
