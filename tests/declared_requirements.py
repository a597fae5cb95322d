"""setup.py's declared requirements written as requirements files, for deptry (`make lint`).

deptry reads pyproject tables and requirements files, not setup.py, so this runs setup.py with
`setuptools.setup` swapped for a function that keeps its arguments, and writes them out:
`code.txt`, what the package's own code may import (install_requires and the read side's
extras), and `test.txt`, what the `test` extra adds for the tests and benchmarks.
Usage: python tests/declared_requirements.py FOLDER
"""

import pathlib
import runpy
import sys

import setuptools

SETUP = pathlib.Path(__file__).resolve().parent.parent / "setup.py"
# Extras that only the test suite installs; every other extra is the read side's.
TEST_EXTRAS = {"test"}


def declared() -> dict:
    """setup()'s keyword arguments, as setup.py passes them."""
    captured = {}
    real, setuptools.setup = setuptools.setup, captured.update
    try:
        runpy.run_path(str(SETUP))
    finally:
        setuptools.setup = real
    return captured


def requirement_files(arguments: dict) -> dict[str, list[str]]:
    """File name -> the requirements it lists, in setup.py's order, each once."""
    extras = arguments.get("extras_require", {})
    code = [*arguments["install_requires"]]
    code += [r for name, reqs in extras.items() if name not in TEST_EXTRAS for r in reqs]
    tests = [r for name in sorted(TEST_EXTRAS) for r in extras.get(name, ())]
    return {"code.txt": list(dict.fromkeys(code)), "test.txt": list(dict.fromkeys(tests))}


if __name__ == "__main__":
    folder = pathlib.Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for name, requirements in requirement_files(declared()).items():
        (folder / name).write_text("".join(f"{r}\n" for r in requirements))
