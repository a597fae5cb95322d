"""The TensorFlow Model Garden's dataloaders (tf-models-official 2.20.0), imported as they are.

`official/vision/__init__.py` imports `official.vision.configs` and `official.vision.tasks`,
whose models, trainers and COCO evaluators need hundreds of MB of packages no dataloader uses
(opencv, scipy, matplotlib, pycocotools); requirements-readers.txt installs the Model Garden
without them. So `official.vision` is registered as a package whose `__init__` does not run;
every module under it, and every other package `__init__` (`official.core`'s included), is
the installed file, run unmodified.
"""

import importlib
import sys
import types
from pathlib import Path

VISION = "official.vision"


def dataloader(name: str) -> types.ModuleType:
    """`official.vision.dataloaders.<name>` (`classification_input`, `tf_example_decoder`)."""
    if VISION not in sys.modules:
        official = importlib.import_module("official")
        package = types.ModuleType(VISION)
        package.__path__ = [str(Path(official.__file__).parent / "vision")]
        sys.modules[VISION] = package
    return importlib.import_module(f"{VISION}.dataloaders.{name}")
