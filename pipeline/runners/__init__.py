"""The local runner and the Beam pipeline, and refresh's reuse of a published version; which
of the two runs is decided before them (pipeline/config/conversion.py `prepare`).
"""
