"""Parquet manifests: the same column rules as CSV and JSONL, typed values judged as JSON's are,
row groups read apart, and hostile files as error rows or one line (exit status 2)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import error_rows, make_images, read_manifest, write_manifest

from tfrecord_pipeline.cli.main import main
from tfrecord_pipeline.transforms.errors import ErrorRow, Reason, UserError
from tfrecord_pipeline.transforms.manifest.rows import ManifestRow, ReadConfig
from tfrecord_pipeline.transforms.manifest.sources import describe


def write_parquet(path, columns: dict, row_group_size: int = 1024):
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


def _reasons(items) -> list:
    return [item.reason.value if isinstance(item, ErrorRow) else item.label for item in items]


def test_rows_are_read_by_the_json_rules_and_known_by_their_row_index(tmp_path):
    path = write_parquet(
        tmp_path / "m.parquet",
        {
            "url": ["a.jpg", "b.jpg", None, "d.jpg", "e.jpg"],  # `url` stands for image_uri
            "label": [3, None, 1, 2, 1 << 40],  # typed: integers stay integers
            "split": ["train", "test", "train", "bad split", None],
            "caption": ["never", "read", "at", "all", "!"],
        },
        row_group_size=2,
    )
    items = read_manifest(path)
    assert _reasons(items) == ["3", "bad_row", "bad_row", "bad_split", str(1 << 40)]
    assert items[0] == ManifestRow(
        "a.jpg", "a.jpg", "3", "train", (), str(path), items[0].position, f"{tmp_path}/"
    )
    assert [item.source for item in items] == [f"{path}#{row}" for row in range(5)]
    assert items[1].row == (("url", "b.jpg"), ("label", "None"), ("split", "test"))


@pytest.mark.parametrize(
    "values, reason",
    [
        ([1.5, 2.0], "bad_label"),  # a float is not a label (in JSON neither)
        ([True, False], "bad_label"),
        ([["cat"], ["dog"]], "bad_label"),
        ([{"name": "cat"}, {"name": "dog"}], "bad_label"),
        ([b"cat", b"dog"], "bad_label"),
        ([None, None], "bad_row"),
    ],
)
def test_a_label_column_of_the_wrong_type_gives_error_rows(tmp_path, values, reason):
    path = write_parquet(tmp_path / "m.parquet", {"image_uri": ["a.jpg", "b.jpg"], "label": values})
    assert _reasons(read_manifest(path)) == [reason, reason]


def test_feature_columns_are_typed_as_their_flags_say(tmp_path):
    path = write_parquet(
        tmp_path / "m.parquet",
        {
            "image_uri": ["a.jpg", "b.jpg", "c.jpg"],
            "label": ["x", "y", "z"],
            "weight": ["0.5", "heavy", None],
            "id": [7, 8, 9],
        },
    )
    config = ReadConfig(features=(("weight", "float"), ("id", "int64")))
    items = read_manifest(path, 0, config)
    assert items[0].features == (("weight", 0.5), ("id", 7))
    assert [item.reason.value for item in items[1:]] == ["bad_feature", "bad_feature"]


def test_a_schema_without_a_required_column_is_a_usage_error(tmp_path):
    path = write_parquet(tmp_path / "m.parquet", {"image_uri": ["a.jpg"], "caption": ["x"]})
    with pytest.raises(UserError, match=r"missing column\(s\) label"):
        describe(str(path), 0, ReadConfig())
    with pytest.raises(UserError, match=r"missing column\(s\) label, w"):
        describe(str(path), 0, ReadConfig(features=(("w", "float"),)))
    empty = write_parquet(
        tmp_path / "e.parquet",
        {"image_uri": pa.array([], pa.string()), "label": pa.array([], pa.string())},
    )
    with pytest.raises(UserError, match="no rows"):
        describe(str(empty), 0, ReadConfig())


@pytest.mark.parametrize("body", [b"", b"image_uri,label\na.jpg,x\n", b"PAR1" + bytes(100)])
def test_a_file_that_is_not_parquet_is_one_line_and_exit_2(tmp_path, capsys, body):
    path = tmp_path / "m.parquet"
    path.write_bytes(body)
    status = main(["convert", "--manifest", str(path), "--output", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"tfrecord-pipeline: error: {path}: not a readable Parquet file")


def test_a_row_group_that_cannot_be_decoded_is_one_error_row(tmp_path):
    path = write_parquet(
        tmp_path / "m.parquet",
        {
            "image_uri": [f"{i}.jpg" for i in range(30)],
            "label": [str(i % 3) for i in range(30)],
        },
        row_group_size=10,
    )
    group = pq.ParquetFile(path).metadata.row_group(1).column(0)
    start = group.dictionary_page_offset if group.has_dictionary_page else group.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + 4 : start + 40] = bytes(36)  # the page header, zeroed
    path.write_bytes(bytes(data))
    items = read_manifest(path)
    (error,) = [item for item in items if isinstance(item, ErrorRow)]
    assert error.reason is Reason.BAD_ROW and error.source == f"{path}#10"
    assert error.message.startswith("row group 1 cannot be read:") and "\n" not in error.message
    assert len(items) == 21  # the other row groups' rows, and the one error


@pytest.mark.slow
def test_a_parquet_manifest_converts_to_the_bytes_of_its_csv(tmp_path, convert):
    rows = make_images(tmp_path, per_class=3)
    rows.append({"image_uri": "images/gone.jpg", "label": "coffee"})
    csv_manifest = write_manifest(tmp_path / "m.csv", rows)
    parquet_manifest = write_parquet(
        tmp_path / "m.parquet",
        {
            "url": [row["image_uri"] for row in rows],
            "label": [row["label"] for row in rows],
        },
        row_group_size=4,
    )
    flags = ("--num_shards", "2", "--max_error_rate", "1")
    from_csv, csv_info = convert(csv_manifest, *flags, output=tmp_path / "from-csv")
    from_parquet, info = convert(parquet_manifest, *flags, output=tmp_path / "from-parquet")
    assert info.records == csv_info.records == 12 and info.errors_by_reason == {"missing_file": 1}
    shards = sorted(p.relative_to(from_csv) for p in from_csv.glob("*.tfrecord"))
    assert len(shards) == 2
    for shard in shards:
        assert (from_parquet / shard).read_bytes() == (from_csv / shard).read_bytes()
    (error,) = error_rows(from_parquet)
    assert error["source"] == f"{parquet_manifest}#12"
