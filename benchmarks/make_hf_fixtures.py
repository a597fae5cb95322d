"""How the Hugging Face fixtures of tests/test_embedded.py were checked: run with the real
`datasets` library (not a dependency of this project: install it apart, e.g. in a virtualenv of
its own) it writes a Parquet file and a `save_to_disk` folder of three sample photos with an
Image and a ClassLabel feature, and prints the image column's type and the schema metadata the
tests' pyarrow-made files carry (tests/data/hf_schema.json).

    python benchmarks/make_hf_fixtures.py /tmp/hf
"""

import json
import sys
from pathlib import Path

from datasets import ClassLabel, Dataset, Features, Image

PHOTOS = Path(__file__).resolve().parent.parent / "sample" / "photos"


def main(folder: str) -> None:
    features = Features({"image": Image(), "label": ClassLabel(names=["rocket", "cat", "camera"])})
    images = [str(PHOTOS / name) for name in ("rocket.jpg", "chelsea.png", "camera.png")]
    dataset = Dataset.from_dict({"image": images, "label": [0, 1, 2]}, features=features)
    dataset.to_parquet(f"{folder}/hf.parquet")
    dataset.save_to_disk(f"{folder}/hf_dataset")
    schema = dataset.data.schema
    metadata = json.loads(schema.metadata[b"huggingface"])
    print(json.dumps({"image": str(schema.field("image").type), "metadata": metadata}))


if __name__ == "__main__":
    main(sys.argv[1])
