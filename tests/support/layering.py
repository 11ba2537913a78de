"""The import layering of the three distributions, read from the AST of every module
(nothing is imported): which module imports which, and what breaks the layering.

Every import counts, wherever it is in the file (inside a function, under
``TYPE_CHECKING``): a lazy import still ties the two modules together.

* ``forbidden(graph, rules)``: imports a boundary rule forbids, e.g. base (the
  trustgraph-base distribution) importing anything of trustgraph-flow or -cli, or the
  gateway's core importing a processor package;
* ``circles(graph)``: modules that import each other, directly or round a loop;
* ``package_circles(graph)``: packages that do, each module counted as its package's
  (a package apart from its sub-packages): model/text_completion's choice.py
  importing local/provider.py, which imports text_completion/provider.py, was one,
  though no module imported itself round a loop;
* ``upward(graph)``: a module that imports a module of an enclosing package which
  imports back down into the sub-package it came from (storage/triples/service.py →
  storage/stores.py → storage/triples/sqlite.py): the two are one layer in fact, however
  the folders are drawn.

``python -m tests.support.layering`` prints the figures for this checkout.
"""
import ast
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = ("trustgraph-base", "trustgraph-flow", "trustgraph-cli")


@dataclass(frozen=True)
class Module:
    name: str          # dotted: trustgraph.gateway.core.api
    path: Path
    distribution: str  # the folder it ships from: trustgraph-base, ...
    package: bool      # an __init__.py: relative imports start at the module itself


@dataclass(frozen=True)
class Graph:
    modules: dict[str, Module]
    imports: dict[str, set[str]]  # module → the modules it imports (of these modules)


def read(root: Path = REPO, distributions: Iterable[str] = DISTRIBUTIONS) -> Graph:
    """Every module of ``distributions`` under ``root`` and what it imports."""
    modules = {}
    for distribution in distributions:
        base = root / distribution
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if any(part.startswith(".") or part == "node_modules" for part in parts):
                continue
            package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if package else parts)
            modules[name] = Module(name, path, distribution, package)
    return Graph(modules, {name: _imports(module, modules) for name, module in modules.items()})


def _imports(module: Module, known: dict[str, Module]) -> set[str]:
    tree = ast.parse(module.path.read_text(), str(module.path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            start = _absolute(module, node.level, node.module)
            for alias in node.names:  # ``from pkg import mod`` imports pkg.mod
                found.add(_known(f"{start}.{alias.name}", known))
    return {name for name in found if name and name != module.name}


def _absolute(module: Module, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    parts = module.name.split(".")
    base = parts if module.package else parts[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _known(name: str, known: dict[str, Module]) -> str:
    """``name`` or its nearest enclosing module of ours; "" when outside them."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return ""


# --- the rules ---------------------------------------------------------------------------

Edge = tuple[str, str]  # (importer, imported)


@dataclass(frozen=True)
class Rule:
    """Modules ``of`` may import nothing that ``outside`` says is out of bounds."""

    name: str
    of: Callable[[Module], bool]
    outside: Callable[[Module], bool]


def under(*prefixes: str) -> Callable[[Module], bool]:
    return lambda module: any(module.name == prefix or module.name.startswith(prefix + ".")
                              for prefix in prefixes)


def shipped_by(*distributions: str) -> Callable[[Module], bool]:
    return lambda module: module.distribution in distributions


GATEWAY = "trustgraph.gateway"
RULES = (
    Rule("base imports nothing of trustgraph-flow or trustgraph-cli",
         shipped_by("trustgraph-base"), shipped_by("trustgraph-flow", "trustgraph-cli")),
    Rule("the gateway imports no processor package (of trustgraph-flow, only itself)",
         under(GATEWAY), lambda m: shipped_by("trustgraph-flow")(m) and not under(GATEWAY)(m)),
    Rule("the gateway's core imports no API module",
         under(f"{GATEWAY}.core"), lambda m: under(GATEWAY)(m) and not under(
             f"{GATEWAY}.core")(m)),
    Rule("an API module imports only the core's package, never its modules",
         under(f"{GATEWAY}.apis"), lambda m: under(f"{GATEWAY}.core")(m)
         and m.name != f"{GATEWAY}.core"),
    Rule("the answer reader imports nothing but the records",
         under("trustgraph.answers"), lambda m: not under("trustgraph.answers",
                                                          "trustgraph.schema")(m)),
    Rule("the client library imports no processor runtime and no Pulsar transport",
         under("trustgraph.api"), under("trustgraph.base", "trustgraph.pubsub")),
)


def forbidden(graph: Graph, rules: Iterable[Rule] = RULES) -> list[tuple[str, Edge]]:
    """(rule, edge) for every import a rule forbids."""
    found = []
    for rule in rules:
        for importer, imported in _edges(graph):
            if rule.of(graph.modules[importer]) and rule.outside(graph.modules[imported]):
                found.append((rule.name, (importer, imported)))
    return found


def circles(graph: Graph) -> list[list[str]]:
    """Each set of modules that import one another round a loop, sorted."""
    return _loops(graph.imports)


def package_circles(graph: Graph) -> list[list[str]]:
    """Each set of packages that import one another round a loop, sorted."""
    imports: dict[str, set[str]] = {}
    for importer, imported in _edges(graph):
        home = _package(graph.modules[importer])
        imports.setdefault(home, set())
        if (there := _package(graph.modules[imported])) != home:
            imports[home].add(there)
            imports.setdefault(there, set())
    return _loops(imports)


def _loops(imports: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node of ``imports``
    (node → the nodes it imports), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(start: str) -> None:  # iterative: import chains can be long
        work = [(start, iter(sorted(imports[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
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
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(imports[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for name in sorted(imports):
        if name not in index:
            visit(name)
    return sorted(found)


def upward(graph: Graph) -> list[Edge]:
    """Imports from inside a sub-package S of package P up to a module of P outside S
    that itself imports back down into S."""
    found = []
    for importer, imported in _edges(graph):
        owner = _package(graph.modules[imported])
        if not importer.startswith(owner + ".") or importer == owner:
            continue
        # The sub-package of ``owner`` the importer sits in; ``imported`` is outside it.
        branch = ".".join(importer.split(".")[:owner.count(".") + 2])
        if branch == importer or imported.startswith(branch + ".") or imported == branch:
            continue
        if any(down == branch or down.startswith(branch + ".")
               for down in graph.imports[imported]):
            found.append((importer, imported))
    return sorted(found)


def _package(module: Module) -> str:
    return module.name if module.package else module.name.rpartition(".")[0]


def _edges(graph: Graph) -> list[Edge]:
    return [(importer, imported) for importer in sorted(graph.imports)
            for imported in sorted(graph.imports[importer])]


def main() -> int:
    graph = read(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO)
    broken, loops, climbs = forbidden(graph), circles(graph), upward(graph)
    package_loops = package_circles(graph)
    print(f"{len(graph.modules)} modules, {len(_edges(graph))} imports between them")
    print(f"forbidden imports: {len(broken)}")
    for rule, (importer, imported) in broken:
        print(f"  {importer} -> {imported}  ({rule})")
    print(f"import circles: {len(loops)}")
    for loop in loops:
        print("  " + " <-> ".join(loop))
    print(f"package circles: {len(package_loops)}")
    for loop in package_loops:
        print("  " + " <-> ".join(loop))
    print(f"upward imports: {len(climbs)}")
    for importer, imported in climbs:
        print(f"  {importer} -> {imported}")
    return 1 if broken or loops or package_loops or climbs else 0


if __name__ == "__main__":
    sys.exit(main())
