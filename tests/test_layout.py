"""The code's shape, checked: no import cycles between modules or packages, and no module over
250 lines.

Imports inside functions count: a lazy import hides a cycle from the interpreter, not from a
reader following the data path.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Each folder of the checkout and the name it is installed under (setup.py's package_dir).
PACKAGES = {"pipeline": "tfrecord_pipeline", "transforms": "tfrecord_pipeline.transforms"}
MAX_LINES = 250
GENERATED = {"tfrecord_pipeline.transforms.tfrecord.proto.example_pb2"}


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for folder, installed in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((installed, *(parts[:-1] if parts[-1] == "__init__" else parts)))
            modules[name] = path
    return modules


def _imported(tree: ast.AST, modules: dict[str, pathlib.Path]) -> set[str]:
    """The project's modules `tree` imports, at any depth."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names.add(submodule if submodule in modules else node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name in modules}


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports; packages' `__init__` left out (a package is not a
    concern of its own, and importing a submodule runs its parents)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            continue
        imported = _imported(ast.parse(path.read_text()), modules)
        graph[name] = {other for other in imported if modules[other].name != "__init__.py"}
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for other in edges:
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(sorted(graph[other]))))
                    break
                if other in on_stack:
                    low[node] = min(low[node], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_cycles_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def _folder(module: str) -> str:
    """The module's name in the checkout's folders: tfrecord_pipeline.transforms.plan.sharding
    -> transforms.plan.sharding, tfrecord_pipeline.dataset.commit -> pipeline.dataset.commit."""
    for folder, installed in sorted(PACKAGES.items(), key=lambda item: -len(item[1])):
        if module == installed or module.startswith(installed + "."):
            return folder + module.removeprefix(installed)
    raise ValueError(module)


def _package(module: str) -> str:
    """transforms.plan.sharding -> transforms.plan; a top-level module is its own."""
    return ".".join(_folder(module).split(".")[:2])


def test_no_import_cycles_between_packages():
    """The folders read in one direction too: no two packages import each other."""
    graph = {}
    for name, imported in import_graph().items():
        edges = graph.setdefault(_package(name), set())
        edges.update(_package(other) for other in imported if _package(other) != _package(name))
    for edges in list(graph.values()):
        for package in edges:
            graph.setdefault(package, set())
    assert cycles(graph) == []


def test_the_conversion_logic_never_reaches_into_the_pipeline():
    """transforms/ is the pure logic and its Beam steps; pipeline/ builds on it, never the
    other way round."""
    reaching = {
        (name, other)
        for name, imported in import_graph().items()
        if _folder(name).startswith("transforms.")
        for other in imported
        if _folder(other).startswith("pipeline.")
    }
    assert reaching == set()


@pytest.mark.parametrize("name", sorted(set(_modules()) - GENERATED))
def test_module_is_short(name):
    lines = len(_modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines"


def test_every_package_says_what_it_holds():
    for name, path in _modules().items():
        if path.name == "__init__.py":
            assert ast.get_docstring(ast.parse(path.read_text())), name
