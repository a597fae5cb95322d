"""Flags parsed, then checked once with the runner decided (`conversion.prepare`), into the
typed configs each stage takes whole; presets.
"""
