"""Write deploy/metadata.json, the Flex Template's parameters, from the options' declarations
(pipeline/config/template.py). Run from the project's virtualenv after an option changes:
python deploy/template_metadata.py"""

from pathlib import Path

from tfrecord_pipeline.config.template import render

if __name__ == "__main__":
    (Path(__file__).parent / "metadata.json").write_text(render())
