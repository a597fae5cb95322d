"""What the command says about itself: the commands, and `convert --help`, one screen of 24
lines of 80 columns for a newcomer (what it does, what a manifest holds, two examples, the flags
a first run and a refresh need); every flag is in `convert --help-all`
(pipeline/config/arguments.py) and, by the same groups, in the docs' options page."""

from tfrecord_pipeline.config.arguments import ALL_FLAGS, USAGE, full_help
from tfrecord_pipeline.config.flags import FLAGS, in_group
from tfrecord_pipeline.config.option import GROUPS, default_text, synopsis

OVERVIEW = f"""\
usage: {USAGE}
       tfrecord-pipeline verify DATASET [--decode sample|all|none]
       tfrecord-pipeline preview DATASET [--split S] -o sheet.png [--per_class N | --random N]
       tfrecord-pipeline stats DATASET -o report.html
       tfrecord-pipeline rollback ROOT --to VERSION
       tfrecord-pipeline --version

commands:
  convert   turn labelled images (a CSV, JSONL or Parquet manifest, COCO, or class folders)
            into sharded TFRecord files: a new published version of the dataset root DIR
  verify    check the published version against its tfrecord_pipeline.json (exit 1 on a problem)
  preview   a contact sheet of decoded records (PNG, JPEG or WebP), labelled with class and id
  stats     a one-page HTML report: splits, label histogram, image and shard sizes, errors
  rollback  publish an older complete version of a dataset root again; says what it replaced

a command's flags: tfrecord-pipeline COMMAND --help (every flag of convert: --help-all)"""

_ABOUT = """\
Turn labelled images into sharded TFRecord files of tf.train.Example. Each run
writes a new version in DIR/versions/ and publishes it in DIR/LATEST.

manifests (local or gs://): CSV, JSONL or Parquet rows of image_uri (or url),
label, optional split and key; class folders ROOT/<label>/<image> or
ROOT/<split>/<label>/<image>; tar or zip archives; COCO .json or JSONL objects

examples:
  tfrecord-pipeline convert --manifest labels.csv --output datasets/flowers
  tfrecord-pipeline convert --manifest gs://B/labels.csv --output gs://B/data \\
      --runner DataflowRunner --project P --region R --temp_location gs://B/tmp"""

SCREEN = (24, 80)  # the screen `convert --help` fits: lines, columns (tests/test_cli_help.py)


def convert_help(argv: list[str]) -> str | None:
    """What `convert` prints when `argv` asks for help: `--help-all`, every flag by group, or
    `-h`/`--help`, one screen; None when it does not ask."""
    if "--help-all" in argv:
        return full_help().rstrip("\n")
    if "-h" in argv or "--help" in argv:
        return first_screen()
    return None


def first_screen() -> str:
    """`convert --help`: what a first run and its next ones need on one screen (SCREEN): the
    flags that have a brief, a line each, with their defaults where one says something."""
    lines = [f"usage: {USAGE}", "", _ABOUT, "", f"flags (every flag, by group: {ALL_FLAGS}):"]
    for flag in FLAGS:
        if flag.brief:
            default = default_text(flag).replace("`", "")  # Markdown's
            said = "" if default in ("none", "off", "required") else f" (default: {default})"
            lines.append(f"  {synopsis(flag):<20}  {flag.brief}{said}")  # two spaces at least
    return "\n".join(lines)


def markdown_table() -> str:
    """The options page: a heading per group, what its flags are about, and their table."""
    sections = []
    for group, about in GROUPS.items():
        lines = [f"### {group.capitalize()}", "", f"{about[0].upper()}{about[1:]}.", ""]
        lines += ["| flag | default | meaning |", "|---|---|---|"]
        for flag in in_group(group):
            # In a code span `\\|` shows its backslash on the site; HTML's entity shows a bar.
            name = "<code>" + synopsis(flag).replace("|", "&#124;") + "</code>"
            cells = (default_text(flag), flag.meaning)
            lines.append("| " + " | ".join([name, *(c.replace("|", "\\|") for c in cells)]) + " |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)
