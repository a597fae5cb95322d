"""tfrecord-pipeline: also what Dataflow workers install from (--setup_file ./setup.py)."""

import pathlib
import runpy

from setuptools import find_packages, setup

# The checkout keeps its two folders; installed, they are one package that cannot collide with a
# user's own `pipeline` or `transforms`: pipeline/ is `tfrecord_pipeline`, transforms/ is
# `tfrecord_pipeline.transforms`. Wheels, sdists (what Dataflow workers build) and editable
# installs all honour this mapping.
PACKAGE_DIR = {"tfrecord_pipeline": "pipeline", "tfrecord_pipeline.transforms": "transforms"}
# The one place the version is written (`tfrecord-pipeline --version`, every dataset's
# metadata); run, not imported: the package is not installed while this runs.
VERSION_FILE = pathlib.Path(__file__).parent / "pipeline" / "version.py"
TENSORFLOW = "tensorflow>=2.16"
DATAFLOW = "apache-beam[gcp]>=2.60"
PACKAGES = [
    name
    for installed, folder in PACKAGE_DIR.items()
    for name in (installed, *(f"{installed}.{sub}" for sub in find_packages(folder)))
]

setup(
    name="tfrecord-pipeline",
    version=runpy.run_path(str(VERSION_FILE))["__version__"],
    description="Image/label manifests to deterministic sharded TFRecords, with Apache Beam",
    python_requires=">=3.10",
    package_dir=PACKAGE_DIR,
    packages=PACKAGES,
    package_data={"tfrecord_pipeline.transforms.tfrecord.proto": ["*.proto"]},
    # The conversion path, local runner and DirectRunner, gs:// included (the project's own
    # Cloud Storage client): no TensorFlow and no Beam's [gcp] extra, on purpose (a small, quick
    # install; workers start fast). Submitting to Dataflow is the `dataflow` extra's.
    install_requires=[
        "apache-beam>=2.60",
        "pillow>=10",
        # The fast path for 8-bit JPEGs (transforms/image/fastpath.py): libjpeg-turbo's decoder and
        # encoder, libvips' resampling; wheels for Linux x86-64 and arm64, libvips included.
        "simplejpeg>=1.8",
        "pyvips>=3",
        "pyvips-binary>=8.16",
        "google-crc32c>=1.5",
        "protobuf>=6.33,<7",
        # --file_format array_record's writer (transforms/write/array_records.py), imported only
        # then; on the workers' image, so a Dataflow job can write ArrayRecord shards. Its last
        # release with wheels for Python 3.10 (TPU VM images) is 0.8.1, which writes the same.
        "array-record>=0.8.6; python_version >= '3.11'",
        "array-record>=0.8.1; python_version < '3.11'",
        # Imported by name, so declared even though Beam or requests brings some in; the floors
        # are the ones those already require, so the resolution does not change.
        "pyarrow>=14.0.1",  # Parquet manifests (transforms/manifest/)
        "numpy>=1.21.2",  # the fast path's pixels (image/fastpath.py); 3.10's first wheels
        "requests>=2.32.4",  # the Cloud Storage client's connection pool, retried errors (storage/)
        "urllib3>=1.26",  # the retried connection errors (transforms/storage/retry.py)
        "certifi>=2023.5.7",  # the CA bundle of the pooled connections (storage/connection.py)
        "google-auth>=2.26.1",  # default credentials, their errors (storage/connection.py, retry)
    ],
    extras_require={
        # `--runner DataflowRunner`: Beam's Dataflow client and what it stages the job with
        # (pipeline/config/runner_choice.py names this extra when it is missing).
        "dataflow": [DATAFLOW],
        # The read side's extras. A machine that already holds tensorflow-cpu or tensorflow-tpu
        # (a TPU VM's image) needs no extra for `load()`, and only tensorflow-datasets for TFDS:
        # they import `tensorflow`, whichever distribution installed it, and an extra would put
        # the full `tensorflow` distribution over it.
        "tf": [TENSORFLOW],  # load(): the dataset as a tf.data pipeline
        "tfds": [TENSORFLOW, "tensorflow-datasets>=4.9.10"],  # tfds_builder(), tfds.load
        "grain": ["grain>=0.2.18"],  # grain_source(): random access for JAX input pipelines
        "test": [
            DATAFLOW,  # tests build Dataflow jobs (--dry_run) and a Flex Template's launch
            # Imported by name by the tests and benchmarks (the emulator's fixtures, the peers a
            # benchmark measures against, Google's API errors); the dataflow extra brings both.
            "google-cloud-storage>=2",
            "google-api-core>=2.27.0",
            "tensorflow-cpu>=2.16",
            "tensorflow-datasets>=4.9.10",
            "grain>=0.2.18",
            "jax>=0.10",  # the JAX/Grain page's training example
            "pytest",
            "pytest-timeout",  # a hung run fails the suite (pyproject.toml)
            "pytest-xdist",  # make test and make check on two workers (Makefile)
            "ruff",
            "hypothesis",
            "absl-py",  # test_grain_source: flags parsed as absl.app.run parses them, for Grain
            "cryptography",  # tests/tls_proxy.py: the loopback certificate authority
            "aiohttp",  # benchmarks/latency_store.py, which tests/test_bench.py runs
            "grpcio-tools",
            "gcp-storage-emulator",
            "opencv-python-headless",  # the resampling study's area and aliasing witnesses
            # The PyTorch reader the tests run. torch 2.13.0 is the CPU build the machine's
            # wheel folder holds (pip's find-links), so the lock installs no CUDA libraries.
            "tfrecord[torch]>=1.14.6",
            "torch==2.13.0",
            # The docs site: `mkdocs build --strict` runs in the tests (tests/test_docs.py).
            "mkdocs>=1.6",
            "mkdocs-material>=9.5",
            # `make lint`: the oldest Python a module needs (3.10, python_requires), and every
            # package the code imports declared here (tests/declared_requirements.py).
            "vermin>=1.9",
            "deptry>=0.25",
            "setuptools",  # setup.py run: test_packaging's sdist, tests/declared_requirements.py
            "packaging",  # test_declared_requirements, deploy/pin_requirements.py
        ],
    },
    entry_points={"console_scripts": ["tfrecord-pipeline=tfrecord_pipeline.cli.main:entry_point"]},
)
