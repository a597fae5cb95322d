"""The local runner and the Beam pipeline, chosen in one place, and refresh's reuse of a
published version.
"""
