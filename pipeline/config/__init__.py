"""Flags parsed, then checked once with the runner decided (`conversion.prepare`, asking
`runner_choice` which runner Beam's flags name), into the typed configs each stage takes whole;
presets.
"""
