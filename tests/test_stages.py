"""The stage list (transforms/stages.py) against the two executors and the picture of them in
docs/architecture.md: every stage has a pure function that exists, a local form and a Beam form,
and the picture (docs/stages.svg) is the one this list draws. After changing the list, redraw it:
`python tests/test_stages.py > docs/stages.svg`."""

import importlib
import sys
from html import escape
from pathlib import Path

from tfrecord_pipeline.transforms.beam import conversion as beam_conversion
from tfrecord_pipeline.transforms.local import conversion as local_conversion
from tfrecord_pipeline.transforms.stages import STAGES, Job, stages_of

PICTURE = Path(__file__).parent.parent / "docs" / "stages.svg"

# The picture's grid: three columns (local form, stage, Beam form), a row a stage.
WIDTH, ROW, TOP = 960, 80, 80
COLUMNS = ((20, 270), (335, 290), (670, 270))  # (x, width) of each column's boxes
BOX = 56


def test_every_stage_names_a_pure_function_that_exists():
    for stage in STAGES:
        module, name = stage.decides.split(":")
        found = importlib.import_module(f"tfrecord_pipeline.{module}")
        for part in name.split("."):
            found = getattr(found, part)
        assert callable(found), stage


def test_each_executor_has_a_form_for_every_stage_and_no_other():
    names = [stage.name for stage in STAGES]
    assert list(local_conversion.FORMS) == names
    assert list(beam_conversion.FORMS) == names


def test_a_job_runs_the_stages_its_options_ask_for():
    job = Job([], None, None, None, dedup=False, max_file_bytes=0, published=None, publish=None)
    always = [stage.name for stage in stages_of(job)]
    assert "DropDuplicateContent" not in always and "RefreshRows" not in always
    both = stages_of(job._replace(dedup=True, published=object()))
    assert [stage.name for stage in both] == [stage.name for stage in STAGES]


def test_the_picture_is_the_one_the_stage_list_draws():
    drawn = stages_picture()
    assert PICTURE.read_text() == drawn, "redraw: python tests/test_stages.py > docs/stages.svg"
    for stage in STAGES:
        assert f">{stage.name}" in drawn


def _box(column: int, row: int, lines: list[str], bold: bool = False) -> str:
    x, width = COLUMNS[column]
    y = TOP + row * ROW
    weight = ' font-weight="bold"' if bold else ""
    texts = "".join(
        f'<text x="{x + width / 2}" y="{y + 18 + 15 * index}"{weight if index == 0 else ""}>'
        f"{escape(line)}</text>"
        for index, line in enumerate(lines)
    )
    return f'<rect x="{x}" y="{y}" width="{width}" height="{BOX}" rx="6"/>{texts}'


def _form(function) -> list[str]:
    """A form's box: its name, and its docstring's first sentence (what it runs over)."""
    return [f"{function.__name__}()", function.__doc__.split(".\n")[0].rstrip(".")]


def stages_picture() -> str:
    """docs/stages.svg: the stages in order down the middle, each beside its local form (left)
    and its Beam form (right), from the code itself."""
    height = TOP + len(STAGES) * ROW + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="12" '
        'text-anchor="middle">',
        "<style>rect{fill:#f6f8fa;stroke:#57606a}line{stroke:#57606a}"
        ".stage rect{fill:#ddf4ff;stroke:#0969da}</style>",
    ]
    titles = (
        ("local runner", "transforms/local/conversion.py"),
        ("transforms/stages.py STAGES", "the pure function that decides"),
        ("Beam (Direct, portable, Dataflow)", "transforms/beam/conversion.py"),
    )
    for (x, width), (title, where) in zip(COLUMNS, titles, strict=True):
        parts.append(f'<text x="{x + width / 2}" y="30" font-weight="bold">{title}</text>')
        parts.append(f'<text x="{x + width / 2}" y="50">{escape(where)}</text>')
    for row, stage in enumerate(STAGES):
        y = TOP + row * ROW + BOX / 2
        module, function = stage.decides.split(":")
        top = "" if module.startswith("transforms.") else "pipeline/"
        title = f"{stage.name} (with {stage.when})" if stage.when else stage.name
        parts.append(f'<line x1="290" y1="{y}" x2="335" y2="{y}"/>')
        parts.append(f'<line x1="625" y1="{y}" x2="670" y2="{y}"/>')
        if row:
            parts.append(f'<line x1="480" y1="{y - ROW + BOX / 2}" x2="480" y2="{y - BOX / 2}"/>')
        local, beam = local_conversion.FORMS[stage.name], beam_conversion.FORMS[stage.name]
        parts.append(_box(0, row, _form(local)))
        parts.append('<g class="stage">')
        parts.append(_box(1, row, [title, f"{top}{module.replace('.', '/')}.py", function], True))
        parts.append("</g>")
        parts.append(_box(2, row, _form(beam)))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    sys.stdout.write(stages_picture())
