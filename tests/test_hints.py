"""pipeline/cli/hints.py: how many shards hashed records are unlikely to leave one of empty."""

import math

from tfrecord_pipeline.cli.hints import shards_left_full


def test_shards_left_full_keeps_the_expected_empty_shards_under_a_twentieth():
    for records in (1, 9, 40, 130, 10_000):
        shards = shards_left_full(records)
        assert 1 <= shards <= records
        expected_empty = shards * math.exp(records * math.log1p(-1 / shards)) if shards > 1 else 0
        assert expected_empty < 1 / 20
        more = shards + 1
        assert more * math.exp(records * math.log1p(-1 / more)) >= 1 / 20
