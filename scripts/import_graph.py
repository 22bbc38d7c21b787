"""Measure and check the direction of imports between the layers (see
docs/adr/0128-layers-point-one-way-checked-by.md).

`python scripts/import_graph.py` prints the figures; `--check` exits 1 on any import against the
layers, any runtime import cycle between modules, any import cycle between packages or any import
of a conftest (run by `make lint`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Each top-level package and the folder that holds it (the SDK is a distribution of its own).
SOURCES = {
    "breaker_panel": Path("sdk/python/src/breaker_panel"),
    "runs": Path("runs"),
    "breakers": Path("breakers"),
    "controlplane": Path("controlplane"),
}
PACKAGES = tuple(SOURCES)
# Bottom first: a module may import from its own layer and the layers below it, never above.
LAYERS = (
    ("sdk", ("breaker_panel",)),
    ("runs", ("runs",)),
    ("breakers", ("breakers",)),
    ("ui", ("controlplane.dashboard",)),
    ("controlplane", ("controlplane",)),
)
# The UI is imported by the URLconf only (and by itself).
UI_PACKAGE, UI_IMPORTERS = "controlplane.dashboard", ("controlplane.urls",)
# A boundary package and its one public module: nothing outside the package imports another of
# its modules (the outage replay: issue 22).
BOUNDARIES = {"breakers.replay": "breakers.replay.outage"}
# Test and benchmark support: what each folder may not import (its top-level package names).
# The apps never import test code; bench/ shares what it needs with tests/ through scripts/testing/.
FORBIDDEN = {
    **{str(folder): ("tests", "scripts", "bench") for folder in SOURCES.values()},
    "bench": ("tests",),
}


def layer_of(module: str) -> int:
    """The index in LAYERS of the most specific prefix that owns `module`."""
    best, best_len = -1, -1
    for index, (_name, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _behind_boundary(source: str, target: str) -> str | None:
    """The public module ``source`` should import instead of ``target``, or None when it may."""
    for package, public in BOUNDARIES.items():
        if _in(target, package) and not _in(source, package) and target != public:
            return public
    return None


def module_files(root: Path = ROOT) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in SOURCES.items():
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = [package, *path.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports_in(child, True)
            for child in node.orelse:
                yield from _imports_in(child, type_only)
        else:
            yield from _imports_in(node, type_only)


def _imports_in(node: ast.AST, type_only: bool) -> Iterator[tuple[ast.stmt, bool]]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node, type_only
    else:
        yield from _imports(node, type_only)


def edges(modules: dict[str, Path]) -> dict[tuple[str, str], bool]:
    """(importer, imported) -> True when every import of that pair is type-only."""
    found: dict[tuple[str, str], bool] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node, type_only in _imports(tree):
            for target in _targets(node, name, is_package, modules):
                if target == name or (target.startswith(name + ".") and is_package):
                    continue
                key = (name, target)
                found[key] = found.get(key, True) and type_only
    return found


def _targets(
    node: ast.stmt, name: str, is_package: bool, modules: dict[str, Path]
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in modules or alias.name.split(".")[0] in PACKAGES:
                yield _known(alias.name, modules)
        return
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parent = name.split(".") if is_package else name.split(".")[:-1]
        parent = parent[: len(parent) - node.level + 1]
        base = ".".join([*parent, base] if base else parent)
    if base.split(".")[0] not in PACKAGES:
        return
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        yield candidate if candidate in modules else _known(base, modules)


def _known(module: str, modules: dict[str, Path]) -> str:
    while module and module not in modules:
        module = module.rpartition(".")[0]
    return module


def forbidden_imports(root: Path = ROOT) -> list[str]:
    """``file -> module`` for each import of a package its folder may not use (FORBIDDEN)."""
    found = []
    for folder, banned in FORBIDDEN.items():
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else []:
            for node, _ in _imports(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue  # relative: inside its own package
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else names
                for name in names:
                    if name.split(".")[0] in banned:
                        found.append(f"{path.relative_to(root)} -> {name}")
    return found


def conftest_imports(root: Path = ROOT) -> list[str]:
    """``file -> module`` for each import of a conftest: pytest loads conftests itself, and what
    tests share goes through fixtures or a support module."""
    found = []
    for folder in ("tests", "bench", "scripts", *map(str, SOURCES.values())):
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else []:
            for node, _ in _imports(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    assert isinstance(node, ast.ImportFrom)
                    base = "." * node.level + (node.module or "")
                    names = [f"{base}.{alias.name}".lstrip(".") for alias in node.names]
                    names = [base] if "conftest" in base.split(".") else names
                for name in names:
                    if "conftest" in name.split("."):
                        found.append(f"{path.relative_to(root)} -> {name}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_of(module: str, modules: dict[str, Path]) -> str:
    """The package a module counts for when cycles are looked for between packages: the package
    that holds it. A module directly inside a top-level package (``breakers.models``,
    ``runs.services``) counts as itself: Django fixes where an app's models, admin and tasks live,
    and they sit at both ends of the app (everything reads the models, admin and tasks reach into
    every room), so taking the app's top level as one package would make every app a cycle."""
    if modules[module].name == "__init__.py":
        return module
    parent = module.rpartition(".")[0]
    return module if parent in PACKAGES else parent


def package_cycles(found: dict[tuple[str, str], bool], modules: dict[str, Path]) -> list[list[str]]:
    """Cycles between packages, through any import (TYPE_CHECKING ones too: a package that names
    another's types still depends on it). A cycle of top-level modules alone is one between
    modules, reported as such."""
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in found:
        source_package, target_package = package_of(source, modules), package_of(target, modules)
        if source_package != target_package:
            graph[source_package].add(target_package)

    def is_package(unit: str) -> bool:
        return unit not in modules or modules[unit].name == "__init__.py"

    return [cycle for cycle in cycles(graph) if any(is_package(unit) for unit in cycle)]


def report(root: Path = ROOT) -> tuple[list[str], list[list[str]]]:
    """Print the figures; returns what ``--check`` fails on: wrong-way and forbidden imports,
    and cycles (runtime ones between modules, any between packages)."""
    modules = module_files(root)
    found = edges(modules)
    runtime: dict[str, set[str]] = defaultdict(set)
    every: dict[str, set[str]] = defaultdict(set)
    upward: list[str] = []
    for (source, target), type_only in sorted(found.items()):
        every[source].add(target)
        if not type_only:
            runtime[source].add(target)
        kind = " (type-only)" if type_only else ""
        if layer_of(target) > layer_of(source):
            upward.append(f"{source} -> {target}{kind}")
        elif _in(target, UI_PACKAGE) and not _in(source, UI_PACKAGE) and source not in UI_IMPORTERS:
            upward.append(f"{source} -> {target}{kind} (only the URLs import the UI)")
        elif private := _behind_boundary(source, target):
            upward.append(f"{source} -> {target}{kind} (import {private} instead)")
    runtime_cycles = cycles(runtime)
    type_cycles = [c for c in cycles(every) if c not in runtime_cycles]
    largest = max(modules.items(), key=lambda item: len(item[1].read_text().splitlines()))
    print(f"modules: {len(modules)}, import edges: {len(found)}")
    print(f"imports against the layers ({' < '.join(n for n, _ in LAYERS)}): {len(upward)}")
    for line in upward:
        print(f"  {line}")
    print(f"runtime import cycles: {len(runtime_cycles)}")
    for cycle in runtime_cycles:
        print(f"  {' <-> '.join(cycle)}")
    print(f"cycles only through TYPE_CHECKING imports: {len(type_cycles)}")
    for cycle in type_cycles:
        print(f"  {' <-> '.join(cycle)}")
    between_packages = package_cycles(found, modules)
    print(f"package-level cycles: {len(between_packages)}")
    for cycle in between_packages:
        print(f"  {' <-> '.join(cycle)}")
    support = forbidden_imports(root)
    print(f"imports of test or benchmark code where it does not belong: {len(support)}")
    for line in support:
        print(f"  {line}")
    conftests = conftest_imports(root)
    print(f"imports of a conftest: {len(conftests)}")
    for line in conftests:
        print(f"  {line}")
    lines = len(largest[1].read_text().splitlines())
    print(f"largest module: {largest[1].relative_to(root)} ({lines} lines)")
    return upward + support + conftests, runtime_cycles + between_packages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail on upward imports or cycles")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tree to read")
    args = parser.parse_args()
    upward, runtime_cycles = report(args.root)
    if args.check and (upward or runtime_cycles):
        print("import check failed: see docs/adr/0128-layers-point-one-way-checked-by.md")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
