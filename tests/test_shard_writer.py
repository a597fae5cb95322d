"""transforms/write/shard_writer.py: one shard's rows written to the attempt's own staged file,
the first of repeated keys kept, and every row it cannot store an error row with its reason."""

import pytest
from conftest import encode, photo

from transforms.manifest.labels import LabelMap
from transforms.manifest.rows import ManifestRow, row_position
from transforms.plan.sharding import ShardId
from transforms.write.shard_writer import WriteConfig, write_shard


@pytest.mark.slow
def test_write_shard_keeps_first_duplicate_and_reports_bad_images(tmp_path):
    good = tmp_path / "good.jpg"
    good.write_bytes(encode(photo().resize((32, 32))))
    (tmp_path / "bad.jpg").write_bytes(encode(photo().resize((32, 32)))[:-100])

    def row(key, name, offset):
        return ManifestRow(
            key, str(tmp_path / name), "cat", "train", (), "m", row_position(0, offset)
        )

    rows = [row("k1", "good.jpg", 30), row("k1", "good.jpg", 20), row("k2", "bad.jpg", 40)]
    rows.append(row("k3", "missing.jpg", 50))
    out = list(
        write_shard(ShardId("train", 0, 1), rows, LabelMap(("cat",)), WriteConfig(str(tmp_path)))
    )
    result, errors = out[-1], out[:-1]
    assert result.records == 1 and result.label_counts == ((0, 1),)
    assert sorted((e.key, e.reason.value, e.source) for e in errors) == [
        ("k1", "duplicate_key", "m@30"),
        ("k2", "corrupt_image", "m@40"),
        ("k3", "missing_file", "m@50"),
    ]
    # The attempt's own file in the staging folder, under a name no other attempt uses.
    assert result.staged.startswith(f"{result.file}.") and result.staged != result.file
    staged = sorted(p.name for p in tmp_path.glob(f"{result.file}*"))
    assert staged == [result.staged, f"{result.staged}.rows"]
    assert (tmp_path / result.staged).stat().st_size == result.bytes
