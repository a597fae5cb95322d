"""pipeline/config/options.py: the values the conversion's flags stand for: the preset's
defaults, the image config, `--feature` pairs, `--background`, and what the metadata records.
(Every value checked once a run, and the stages' configs: test_conversion.py.)"""

import pytest
from conftest import make_images, write_manifest

from tfrecord_pipeline import convert, verify
from tfrecord_pipeline.config.options import ConvertOptions, parse_colour
from tfrecord_pipeline.transforms.errors import UserError


def _options(**fields) -> ConvertOptions:
    return ConvertOptions(manifest=["m.csv"], output="out", **fields)


def test_the_preset_gives_its_defaults_and_a_flag_given_wins():
    preset = _options(preset="tpu-imagenet")
    assert (preset.label_offset, preset.num_shards) == (1, "train=1024,validation=128")
    given = _options(preset="tpu-imagenet", label_offset=0, num_shards=8)
    assert (given.label_offset, given.num_shards) == (0, "8")
    assert (_options().label_offset, _options().num_shards) == (0, None)


def test_the_image_config_carries_the_image_flags_in_its_own_units():
    config = _options(max_decode_mb=1.5, background="0,128,255", channels=1).image_config()
    assert config.max_decode_bytes == 1_572_864 and config.background == (0, 128, 255)
    assert config.channels == 1 and _options(max_file_mb=0.5).max_file_bytes == 524_288


@pytest.mark.parametrize(
    "text, colour",
    [("white", (255, 255, 255)), ("black", (0, 0, 0)), ("0,128,255", (0, 128, 255))],
)
def test_a_background_is_a_name_or_three_components(text, colour):
    assert parse_colour(text) == colour


@pytest.mark.parametrize("text", ["grey", "0,128", "0,128,256", "0,-1,0", "a,b,c", "1,2,3,4"])
def test_any_other_background_is_one_line_naming_the_flag(text):
    with pytest.raises(UserError, match="^--background: expected white, black or R,G,B, got "):
        parse_colour(text)


def test_features_are_name_type_pairs_and_a_name_s_last_colon_splits_them():
    assert _options(feature=["a:b:int64", "w:float"]).features() == (
        ("a:b", "int64"),
        ("w", "float"),
    )


@pytest.mark.parametrize(
    "feature, says",
    [
        (["w:int"], "--feature: expected name:"),
        ([":int64"], "--feature: expected name:"),
        (["label:int64"], "--feature: 'label' is reserved"),
        (["image/encoded:bytes"], "--feature: 'image/encoded' is reserved"),
        (["w:int64", "w:float"], "--feature: 'w' is given twice"),
    ],
)
def test_a_feature_that_cannot_be_stored_is_refused(feature, says):
    with pytest.raises(UserError, match=f"^{says}"):
        _options(feature=feature).features()


def test_the_metadata_records_what_shapes_the_output_and_not_how_this_machine_ran():
    recorded = _options(feature=["w:float"], threads=4, image_root="/photos").recorded()
    assert recorded["features"] == [["w", "float"]] and "feature" in recorded
    assert not {"threads", "image_root", "manifest", "output", "progress"} & set(recorded)
    assert recorded["label_offset"] == 0 and recorded["channels"] == 3


def test_python_callers_may_give_one_manifest_and_pathlib_paths(tmp_path):
    """ConvertOptions(manifest="m.csv") read the string as manifests 'm', '.', 'c', ... ('no
    such folder: m'), and a pathlib.Path anywhere ended in a TypeError or AttributeError."""
    manifest = write_manifest(tmp_path / "m.csv", make_images(tmp_path, per_class=1))
    for number, given in enumerate((manifest, str(manifest), [manifest])):
        output = tmp_path / f"out{number}"
        options = ConvertOptions(manifest=given, output=output, image_root=tmp_path, progress=False)
        assert (options.manifest, options.output) == ([str(manifest)], str(output))
        convert(options)
        assert verify(str(output)) == (4, [])
