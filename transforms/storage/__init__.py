"""Bytes in and out of local files and Cloud Storage, with the retries a store needs."""
