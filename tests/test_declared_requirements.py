"""Every package the package's code imports is declared in setup.py (install_requires or the read
side's extras), one by one within Google's `google` namespace, which deptry (`make lint`) sees as
one package: a module that imports `google.auth` needs google-auth declared, not whichever
`google-cloud-*` distribution happens to be."""

import ast
import functools
import pathlib
import re
import sys
from importlib import metadata

from declared_requirements import declared, requirement_files
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parent.parent
CODE = ("pipeline", "transforms")
NAMESPACES = {"google"}  # shared by many distributions: a module is named by its first two parts


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module(dotted: str) -> str:
    parts = dotted.split(".")
    return ".".join(parts[:2]) if parts[0] in NAMESPACES and len(parts) > 1 else parts[0]


def imported(source: str) -> set[str]:
    """The third-party modules `source` imports, at any depth (a lazy import counts)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    modules = {_module(name) for name in names}
    return {
        m for m in modules if m.split(".")[0] not in {*sys.stdlib_module_names, "tfrecord_pipeline"}
    }


@functools.cache
def shipped_by() -> dict[str, set[str]]:
    """Module (as `_module` names it) -> the installed distributions that hold it."""
    found = {m: set(map(_canonical, d)) for m, d in metadata.packages_distributions().items()}
    for namespace in NAMESPACES:
        for name in found.pop(namespace, ()):
            for file in metadata.distribution(name).files or ():
                if len(file.parts) > 2 and file.parts[0] == namespace:
                    found.setdefault(f"{namespace}.{file.parts[1]}", set()).add(name)
    return found


def undeclared(modules: set[str], requirements: list[str]) -> set[str]:
    """The modules no declared distribution ships (a declared name that is not installed, as
    `tensorflow` where tensorflow-cpu is, counts for the module of its own name)."""
    names = {_canonical(Requirement(r).name) for r in requirements}
    shipping = shipped_by()
    return {m for m in modules if not shipping.get(m, set()) & names and _canonical(m) not in names}


def test_the_package_imports_only_what_setup_py_declares():
    code = requirement_files(declared())["code.txt"]
    modules = set()
    for folder in CODE:
        for path in (ROOT / folder).rglob("*.py"):
            modules |= imported(path.read_text())
    assert "google.auth" in modules and "pyarrow" in modules  # the check sees lazy imports
    assert undeclared(modules, code) == set()


def test_a_google_package_counts_as_itself_not_as_the_namespace():
    source = "import google.auth\nfrom google.cloud import storage\n"
    assert imported(source) == {"google.auth", "google.cloud"}
    assert undeclared(imported(source), ["google-cloud-storage>=2"]) == {"google.auth"}
    assert undeclared(imported(source), ["google-cloud-storage", "google-auth"]) == set()


def test_the_read_side_extras_are_the_packages_and_the_test_extra_apart():
    files = requirement_files(declared())
    assert "tensorflow>=2.16" in files["code.txt"] and "grain>=0.2.18" in files["code.txt"]
    assert "pytest" in files["test.txt"] and "pytest" not in files["code.txt"]
