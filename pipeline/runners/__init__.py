"""The local runner and the Beam pipeline, and refresh's reuse of a published version.

`choice.py` tells which runner Beam's flags name; pipeline/config/conversion.py `prepare` asks it
once per run.
"""
