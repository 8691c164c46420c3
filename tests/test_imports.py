"""The package's modules import one another without circles.

Every `import` and `from ... import` of every module counts, at the top of the file or inside a function: a
function-local import hides a circle from the interpreter until the function runs, but it is a circle all the
same. `from pkg import name` is an import of `pkg.name` when that is a module, else of `pkg`; an import of a
package is an import of its `__init__`. A second check collapses each folder of modules
(`xlrepro.training`, `xlrepro.papers.k2020`: a package with no sub-package) to one node, so a path that leaves a
folder and comes back to it (training -> masking -> training.noise) counts.
"""
from __future__ import annotations

import ast
from pathlib import Path

import xlrepro

ROOT = Path(xlrepro.__file__).resolve().parent
PACKAGE = "xlrepro"


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """{dotted module name: file}; a package's name maps to its `__init__.py`."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join([package, *parts])] = path
    return files


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `name` (file `path`) imports anywhere in its body."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found = set()

    def closest(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [closest(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in modules else closest(base))
        else:
            continue
        found.update(t for t in targets if t is not None and t != name)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    files = module_files(root, package)
    modules = set(files)
    return {name: imported_modules(name, path, modules) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a list of nodes, first node not repeated) per strongly connected component that has one."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []
    counter = [0]

    def strongconnect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    return sorted(shortest_cycle(graph, min(component)) for component in components)


def shortest_cycle(graph: dict[str, set[str]], start: str) -> list[str] | None:
    """The shortest path from `start` back to itself (its nodes, `start` first and not repeated), None if none."""
    parents, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    cycle = [v]
                    while parents[cycle[-1]] is not None:
                        cycle.append(parents[cycle[-1]])
                    return cycle[::-1]
                if w not in parents:
                    parents[w] = v
                    nxt.append(w)
        frontier = nxt
    return None


def collapse(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The graph with every module of `package` (its sub-packages included) merged into one node."""
    def node(name):
        return package if name == package or name.startswith(package + ".") else name

    out: dict[str, set[str]] = {}
    for v, targets in graph.items():
        out.setdefault(node(v), set()).update(node(w) for w in targets if node(w) != node(v))
    return out


def leaf_packages(root: Path = ROOT, package: str = PACKAGE) -> list[str]:
    """The sub-packages that hold modules only (`xlrepro.training`, `xlrepro.papers.k2020`), not other packages."""
    packages = [name for name, path in module_files(root, package).items()
                if path.name == "__init__.py" and name != package]
    return sorted(p for p in packages if not any(q.startswith(p + ".") for q in packages))


def test_find_cycles_on_a_known_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d"}}
    assert find_cycles(graph) == [["a", "b", "c"], ["e"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_collapse_finds_a_folder_level_cycle():
    graph = {"p.sub.x": {"p.m"}, "p.m": {"p.sub.y"}, "p.sub.y": set(), "p.sub": set()}
    assert find_cycles(graph) == []
    assert find_cycles(collapse(graph, "p.sub")) == [["p.m", "p.sub"]]


def test_imports_resolve_relative_and_from_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "top.py").write_text("def f():\n    from .sub import leaf, CONST\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import top\nCONST = 1\n")
    (pkg / "sub" / "leaf.py").write_text("import pkg.sub\nfrom ..top import f\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.top"] == {"pkg.sub.leaf", "pkg.sub"}
    assert graph["pkg.sub"] == {"pkg.top"}
    assert graph["pkg.sub.leaf"] == {"pkg.sub", "pkg.top"}


def test_no_module_import_cycles():
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles)


def test_no_folder_level_import_cycles():
    graph = import_graph()
    cycles = [shortest_cycle(collapse(graph, package), package) for package in leaf_packages()]
    cycles = [c for c in cycles if c is not None]
    assert cycles == [], "folder-level import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles)
