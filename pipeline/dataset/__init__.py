"""A dataset's layout: versions, the LATEST pointer, metadata, and the commit that publishes a
version.
"""
