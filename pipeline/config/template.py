"""The Dataflow Flex Template's metadata (deploy/metadata.json), made from the options'
declarations (pipeline/config/flags.py): a parameter for each option but those of this machine
alone, with its label, its help and default in plain words, whether it may be left out, and
the pattern its value must match (the launcher checks it before a worker starts). Written by
`python deploy/template_metadata.py`; tests/test_deploy.py fails when the file differs."""

import json

from tfrecord_pipeline.config.flags import FLAGS
from tfrecord_pipeline.config.option import HERE, Option, plain_help

ABOUT = {
    "name": "tfrecord-pipeline",
    "description": "Image/label manifests to deterministic sharded TFRecords of tf.train.Example",
    "streaming": False,
}


def parameter(option: Option) -> dict:
    """`option` as a template parameter: named by its field, as `--name=value` passes it."""
    about = {
        "name": option.dest,
        "label": option.label or option.dest.replace("_", " ").capitalize(),
        "helpText": plain_help(option),
        "isOptional": not option.required,
    }
    if option.kind.pattern:
        about["regexes"] = [option.kind.pattern]
    return about


def metadata() -> dict:
    return {**ABOUT, "parameters": [parameter(o) for o in FLAGS if o.scope != HERE]}


def render() -> str:
    """deploy/metadata.json's text."""
    return json.dumps(metadata(), indent=2, ensure_ascii=False) + "\n"
