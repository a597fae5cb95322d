"""Parquet and Arrow manifests that hold their images, as Hugging Face `datasets` writes them
(transforms/manifest/embedded.py, transforms/manifest/arrow.py). The files are made with
pyarrow carrying the schema and metadata `datasets` writes (benchmarks/make_hf_fixtures.py
shows how `datasets` itself makes them; tests/data/hf_schema.json is what it wrote)."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import encode, photo, read_manifest

from tfrecord_pipeline.transforms.archive.members import read_member
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, UserError
from tfrecord_pipeline.transforms.manifest.embedded import Embedded, embedded_images
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig

NAMES = ["rocket", "cat", "camera"]
WRITTEN = json.loads((Path(__file__).parent / "data" / "hf_schema.json").read_text())


def hf_table(images: list[bytes], labels: list[int], names=NAMES) -> pa.Table:
    """A table as `datasets` writes an Image and a ClassLabel feature."""
    features = {"image": {"_type": "Image"}, "label": {"names": names, "_type": "ClassLabel"}}
    metadata = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("image", image), ("label", pa.int64())], metadata=metadata)
    cells = [{"bytes": data, "path": f"{i}.png"} for i, data in enumerate(images)]
    return pa.table({"image": cells, "label": labels}, schema=schema)


def write_arrow_stream(table: pa.Table, path: Path) -> Path:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    return path


def test_the_schema_is_the_one_datasets_writes():
    table = hf_table([b"x"], [0])
    assert str(table.schema.field("image").type) == WRITTEN["image"]
    assert json.loads(table.schema.metadata[b"huggingface"]) == WRITTEN["metadata"]
    assert embedded_images(table.schema) == Embedded("image", tuple(NAMES))


def test_a_plain_bytes_column_holds_images_and_an_image_uri_column_names_them():
    plain = pa.schema([("image", pa.binary()), ("label", pa.string())])
    assert embedded_images(plain) == Embedded("image")
    named = pa.schema([("image_uri", pa.string()), ("image", pa.binary()), ("label", pa.int64())])
    assert embedded_images(named) is None


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_rows_point_into_the_staged_file_and_carry_their_classlabel_names(tmp_path, kind):
    images = [encode(photo(), "PNG"), encode(photo("rocket.jpg")), b"gone"]
    table = hf_table(images, [2, 0, 5])
    path = tmp_path / f"hf.{kind}"
    pq.write_table(table, path) if kind == "parquet" else write_arrow_stream(table, path)
    config = ReadConfig(unpack_to=str(tmp_path / "staging"), max_file_bytes=1 << 20)
    rows = read_manifest(str(path), config=config)
    first, second, bad = rows
    assert (first.key, first.label, second.label) == (f"hf.{kind}#0", "camera", "rocket")
    assert read_member(first.member, first.image_uri, 1 << 20) == images[0]
    assert isinstance(bad, ErrorRow) and bad.reason == Reason.BAD_LABEL
    assert len(list((tmp_path / "staging").iterdir())) == 1


def test_a_truncated_file_is_an_error_row_or_a_usage_error(tmp_path):
    table = hf_table([encode(photo(), "PNG")] * 5, [1] * 5)
    stream = write_arrow_stream(table, tmp_path / "data.arrow")
    data = stream.read_bytes()
    stream.write_bytes(data[: len(data) * 3 // 4])
    config = ReadConfig(unpack_to=str(tmp_path / "staging"), max_file_bytes=1 << 20)
    rows = read_manifest(str(stream), config=config)
    assert all(isinstance(row, ManifestRow) for row in rows[:-1])
    assert isinstance(rows[-1], ErrorRow) and rows[-1].reason == Reason.BAD_ROW
    parquet = tmp_path / "cut.parquet"
    pq.write_table(table, parquet)
    parquet.write_bytes(parquet.read_bytes()[:-100])
    with pytest.raises(UserError, match="not a readable Parquet"):
        read_manifest(str(parquet), config=config)


def test_an_image_over_the_limit_is_not_staged(tmp_path):
    path = tmp_path / "hf.parquet"
    pq.write_table(hf_table([b"x" * 2000, b"y" * 10], [0, 1]), path)
    config = ReadConfig(unpack_to=str(tmp_path / "staging"), max_file_bytes=1000)
    big, small = read_manifest(str(path), config=config)
    assert (big.member.size, big.member.stored) == (2000, 0)
    assert [p.stat().st_size for p in (tmp_path / "staging").iterdir()] == [10]
