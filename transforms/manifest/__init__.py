"""Manifest files (CSV, JSONL, Parquet, COCO, class-folder trees) read into rows, with their
labels and splits.
"""
