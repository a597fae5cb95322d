"""The shape of one option of the `convert` command, declared once (pipeline/config/flags.py
holds them all): from its declaration are made the parser's argument, the field of
`ConvertOptions` with its default, its check, its Flex Template parameter
(pipeline/config/template.py), its `--help-all` line and its row of the docs' options table
(pipeline/cli/help.py)."""

from typing import Any, NamedTuple

from tfrecord_pipeline.config.values import Check, Kind

REQUIRED = object()  # the default of an option that must be given

# Where an option matters: the dataset (recorded in its metadata, compared by a refresh), the
# run (how this run reads and publishes, not recorded), or this machine alone (not recorded, and
# no Flex Template parameter: a terminal's progress bar, tracebacks, local processes).
DATASET, RUN, HERE = "dataset", "run", "here"

# The headings of `--help-all` and of the options page, in order, and what their flags are about.
GROUPS = {
    "input": "what is read: the manifests, their images' folder, splits and labels",
    "output": "where the dataset is written, in what form, and when it is published",
    "images": "how each image is checked, decoded, resized and stored",
    "sharding": "how many shard files each split is written as",
    "runners": "how the conversion runs: on this machine or on Dataflow",
    "refresh": "converting again into a root that already has a published version",
}


class Option(NamedTuple):
    """One option: its flag, the kind of value it takes, its default (REQUIRED: none), its
    meaning in Markdown, and what its value must be (`check`; a kind with choices checks
    those itself). `value`: the value as `--help` writes it (argparse's metavar); `said`: the
    default in words where the value would not say it (`by size`); `brief`, a line of plain
    text, puts it on `convert --help`'s first screen; `label` names its template parameter
    (else made from its name); `dest`, its field where that is not the flag's name."""

    name: str
    kind: Kind
    default: Any
    meaning: str
    check: Check | None = None
    value: str = ""
    said: str = ""
    brief: str = ""
    scope: str = DATASET
    label: str = ""
    field: str = ""
    group: str = ""

    @property
    def dest(self) -> str:
        """The `ConvertOptions` field the option sets."""
        return self.field or self.name.removeprefix("--")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def grouped(*items: "str | Option") -> tuple[Option, ...]:
    """Options from a list in which each group's name comes before its options."""
    options, group = [], ""
    for item in items:
        if isinstance(item, str):
            assert item in GROUPS, item
            group = item
        else:
            options.append(item._replace(group=group))
    return tuple(options)


def failure(option: Option, value: Any) -> str | None:
    """What is wrong with `value` for `option`, in one line, or None: its kind's choices, then
    its check. None is left alone: where it is a default, it means `not given`."""
    if value is None:
        return None
    if option.kind.choices and value not in option.kind.choices:
        return f"{option.name} must be one of {', '.join(option.kind.choices)}"
    if option.check and not option.check.test(value):
        return f"{option.name} {option.check.says.format(value=value)}"
    return None


def default_text(option: Option) -> str:
    """The default as a person reads it: `required`, `off` for a switch that is off unless
    given (`--no_progress` too, though it clears a True field), `none`, or the value."""
    if option.said:
        return option.said
    if option.required:
        return "required"
    value = option.default
    if isinstance(value, bool):
        return "off"
    if value is None or value == []:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def synopsis(option: Option) -> str:
    """The flag with its value, as argparse writes it (`--manifest M [M ...]`)."""
    if not option.value:  # a switch
        return option.name
    more = f" [{option.value} ...]" if option.kind.parse.get("nargs") == "+" else ""
    return f"{option.name} {option.value}{more}"


def plain_help(option: Option) -> str:
    """The meaning without Markdown, then the default."""
    default = default_text(option)
    said = f"{option.meaning} ({default if default == 'required' else 'default: ' + default})"
    return said.replace("`", "")


def help_text(option: Option) -> str:
    """`--help-all`'s line: `plain_help`, argparse's percent signs escaped."""
    return plain_help(option).replace("%", "%%")
