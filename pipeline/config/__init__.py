"""Flags parsed and validated once into typed configs; presets."""
