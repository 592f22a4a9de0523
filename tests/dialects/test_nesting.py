"""Deep nesting (issue 10): past `MAX_NESTING` levels of operations, attributes and types the parser
says so at the token, one line, exit 1 (150 nested modules were "internal error: RecursionError");
at the limit every construct parses, verifies, runs the pipeline and prints, in this process (whose
stack pytest has already deepened) as well as in a fresh one."""

from __future__ import annotations

import re

import pytest

from fwdshim.diagnostics import MAX_NESTING
from fwdshim.tools.driver import main

T = "tensor<64xf32>"


def _fused(n: int) -> str:
    """`n` fused ops each holding the next, the innermost holding a silu."""
    body = f"^bb0(%a{n}: {T}):\n%s{n} = fwd.silu %a{n} : {T} -> {T}\nfwd.yield %s{n} : {T}\n"
    for i in reversed(range(1, n)):
        body = f"^bb0(%a{i}: {T}):\n%s{i} = fwd.fused elementwise_chains covers [0] ins(%a{i}) : ({T}) -> {T} {{\n{body}}}\nfwd.yield %s{i} : {T}\n"
    return f"func.func @f(%x: {T}) -> {T} {{\n%r = fwd.fused elementwise_chains covers [0] ins(%x) : ({T}) -> {T} {{\n{body}}}\nfunc.return %r : {T}\n}}\n"


NESTS = {
    # kind: IR of `n` levels of it (and up to 5 levels around and inside them: an op, its attribute,
    # a type and its element type)
    "modules": lambda n: "builtin.module {" * n + "}" * n,
    "generic regions": lambda n: '"x.op"() ({' * n + "}) : () -> ()" * n,
    "arrays": lambda n: '"x.op"() {a = ' + "[" * n + "]" * n + "} : () -> ()",
    "dictionaries": lambda n: '"x.op"() {a = ' + "{a = " * n + "1" + "}" * n + "} : () -> ()",
    "types": lambda n: '"x.op"() {a = ' + "tuple<" * n + "i32" + ">" * n + "} : () -> ()",
    "function types": lambda n: '"x.op"() {a = ' + "(" * n + ")" + " -> ())" * (n - 1) + " -> ()} : () -> ()",
    "locations": lambda n: '"x.op"() : () -> () loc(' + "callsite(" * n + '"a"' + ' at "b")' * n + ")",
    "tensor literals": lambda n: '"x.op"() {a = dense<' + "[" * n + "1" + "]" * n + "> : tensor<" + "1x" * n + "i32>} : () -> ()",
    "fused ops": _fused,
}


def _run(tmp_path, capsys, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "nest.mlir"
    path.write_text(text)
    rc = main([str(path), "--allow-unregistered-dialect", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("kind", list(NESTS))
def test_nesting_at_the_limit_runs_every_stage(tmp_path, capsys, kind):
    text = NESTS[kind](MAX_NESTING - 5)
    rc, out, err = _run(tmp_path, capsys, text, "-p", "forward-shim{numerics=int8-act}")
    assert rc == 0, err
    rc, generic, err = _run(tmp_path, capsys, text, "--print-op-generic")
    assert rc == 0, err
    rc, again, err = _run(tmp_path, capsys, generic, "--print-op-generic")
    assert (rc, again) == (0, generic), err


@pytest.mark.parametrize("kind", list(NESTS))
def test_nesting_past_the_limit_is_one_located_error(tmp_path, capsys, kind):
    rc, out, err = _run(tmp_path, capsys, NESTS[kind](3 * MAX_NESTING))
    assert rc == 1
    assert out == ""
    first = err.splitlines()[0]
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path))}/nest\.mlir:\d+:\d+: error: nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types",
        first,
    ), err
    assert "internal error" not in err and "Recursion" not in err


def test_a_deep_expression_in_flat_text_is_one_line(tmp_path, capsys):
    """An affine expression of 3000 terms is flat text but a tree 3000 deep: the parser's count
    does not see it, printing it recursed past Python's limit ("internal error: RecursionError")."""
    text = '"x.op"() {m = affine_map<(d0) -> (' + "d0 + " * 3000 + "d0)>} : () -> ()"
    rc, out, err = _run(tmp_path, capsys, text)
    assert (rc, out) == (1, "")
    assert err == f"fwdshim-opt: error: {tmp_path}/nest.mlir: the IR nests too deep to process (FWDSHIM_TRACEBACK=1 shows where)\n"
