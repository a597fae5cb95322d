"""The thin Beam steps over the pure logic, a module per stage: manifests.py → plan.py →
shards.py, and error_files.py; steps.py holds what they share and the element shapes between
them; coders.py holds RowBatch, the rows that cross a shuffle, and its coder."""
