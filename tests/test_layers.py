"""The package's layers, read from its source: no import circle, and no import from a lower floor to a
higher one (docs/ARCHITECTURE.md draws the picture).

Every module's imports are read with `ast` (module level and function-local alike, `TYPE_CHECKING`
blocks too): a function-local import is still an edge, so hiding a circle inside a function does not
pass. A module may import its own floor's ground modules and anything on a lower floor; two packages
on one floor above the ground do not import each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fwdshim"

FLOORS: dict[str, int] = {
    # 0: the ground floor: the seed's vocabulary, the IR, diagnostics, weight data, block and int8 maths
    "fwdshim": 0,
    "fwdshim.classes": 0,
    "fwdshim.limits": 0,
    "fwdshim.diagnostics": 0,
    "fwdshim.lexer": 0,
    "fwdshim.dialects": 0,
    "fwdshim.weights": 0,
    "fwdshim.ggml_blocks": 0,
    "fwdshim.int8": 0,
    # 1: the forward shim (supports, fits, kernel_refusal, refusals, legality, the contract, the report)
    "fwdshim.shim": 1,
    # 1: the model front end (GGUF -> the step's IR and its weights); reads the ground floor only
    "fwdshim.frontend": 1,
    # 2: the backends: Numba CUDA code generation and runtime, the reference executor
    "fwdshim.codegen": 2,
    "fwdshim.reference": 2,
    # 3: the passes (fwd-lower-numba hands the IR to codegen)
    "fwdshim.passes": 3,
    # 4: the tools: fwdshim, fwdshim-opt, the runner, the -t numba target, the xdsl.universe entry point
    "fwdshim.tools": 4,
}


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` is or lives in (`fwdshim.a.b.C` -> `fwdshim.a.b`), None outside fwdshim."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, known: dict[str, Path]) -> dict[str, bool]:
    """The fwdshim modules `module` imports -> whether only function-local."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    local_nodes = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
    }
    out: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in {_resolve(n, known) for n in names if n.startswith("fwdshim")}:
            if target is None or target == module:
                continue
            out[target] = out.get(target, True) and id(node) in local_nodes
    return out


def graph() -> dict[str, dict[str, bool]]:
    known = modules()
    return {m: imports(m, p, known) for m, p in known.items()}


def floor_of(module: str) -> tuple[str, int]:
    """The `FLOORS` entry `module` falls under (the longest prefix) and its floor."""
    key = max((k for k in FLOORS if module == k or module.startswith(k + ".")), key=len, default=None)
    assert key is not None, f"{module} is on no floor: add it to FLOORS (and docs/ARCHITECTURE.md)"
    return key, FLOORS[key]


def cycles(edges: dict[str, dict[str, bool]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_every_module_is_on_a_floor():
    for module in modules():
        floor_of(module)


def test_no_import_cycles():
    edges = graph()
    assert len(edges) > 40, "the walk found the package"
    assert cycles(edges) == []


def test_no_import_goes_up_or_across():
    wrong = []
    for module, targets in graph().items():
        key, floor = floor_of(module)
        for target in targets:
            tkey, tfloor = floor_of(target)
            if tfloor > floor:
                wrong.append(f"{module} (floor {floor}) imports {target} (floor {tfloor})")
            elif tfloor == floor > 0 and tkey != key:
                wrong.append(f"{module} imports {target}: two packages of floor {floor}")
    assert wrong == []


def test_the_checks_see_a_cycle_and_an_upward_import():
    edges = {"a": {"b": False}, "b": {"c": True}, "c": {"a": True}, "d": {}}
    assert cycles(edges) == [["a", "b", "c"]]
    assert floor_of("fwdshim.codegen.plan") == ("fwdshim.codegen", 2)
    assert floor_of("fwdshim.tools.cli")[1] > floor_of("fwdshim.passes.legalize")[1]
