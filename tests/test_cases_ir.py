"""`fwdshim-opt` on the IR inputs kept in tests/cases/ (issue 10): each is one located error line,
exit status 1, quickly (the unterminated strings hung: the lexer's time doubled per character; a
number past its attribute's storage and deep nesting were "internal error"s), or IR that prints and
parses back."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = "tests/cases"
PIPELINE = "forward-shim{numerics=int8-act}"

ERRORS = {
    # file: (line, column, message) of the first stderr line
    "ir_hang_unterminated_string.mlir": (2, 19, 'string literal not terminated: no closing `"` before the end of the line'),
    "ir_hang_unterminated_symbol.mlir": (1, 12, 'string literal not terminated: no closing `"` before the end of the line'),
    "ir_internal_covers_overflow.mlir": (2, 45, "9223372036854775808 is out of range of a signed 64-bit integer"),
    "ir_internal_eps_overflow.mlir": (2, 56, "1.0e39 is out of range of f32"),
    # a float the parser reads as inf (1.0e999, or the hex bits 0x7F800000 in the generic form) was
    # kept silently and computed with (an eps of inf normalizes every row to zeros)
    "ir_silent_eps_inf.mlir": (2, 3, "fwd.rms_norm eps is inf: not a finite f32 value"),
    "ir_silent_softcap_inf_generic.mlir": (2, 3, "fwd.softcap cap is inf: not a finite f32 value"),
    "ir_internal_recursion_nest150.mlir": (1, 769, "nesting too deep: more than 48 levels of operations, attributes and types"),
    "ir_internal_recursion_array200.mlir": (2, 74, "nesting too deep: more than 48 levels of operations, attributes and types"),
}

UNREGISTERED = " (the `fwd` dialect is registered: --allow-unregistered-dialect admits {}s of unregistered dialects only)"
ERRORS_UNREGISTERED_ALLOWED = {
    # file: (line, column, message) with --allow-unregistered-dialect (mlir-opt's rule: an unknown op,
    # type or attribute of a registered dialect is still an error; the flag admits other dialects)
    "ir_unknown_fwd_op.mlir": (3, 8, "Operation fwd.swish is not registered" + UNREGISTERED.format("op")),
    "ir_unknown_fwd_type.mlir": (2, 43, "'fwd.weight' is not registered" + UNREGISTERED.format("type")),
}


def _tool(name: str) -> list[str]:
    """The console script installed beside this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found is not None, f"`{name}` is not installed: pip install -e ."
    return [found]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_case(name: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`fwdshim-opt tests/cases/NAME -p forward-shim{numerics=int8-act}` from the repository root,
    and the CPU seconds it took (not wall time: the machine may be busy; a hang is the timeout)."""
    start = _children_cpu()
    r = subprocess.run(
        [*_tool("fwdshim-opt"), f"{CASES}/{name}", "-p", PIPELINE, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return r, _children_cpu() - start


@pytest.mark.parametrize("name", list(ERRORS))
def test_case_is_one_located_error(name):
    line, col, message = ERRORS[name]
    r, seconds = run_case(name)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"{CASES}/{name}:{line}:{col}: error: {message}"
    assert len(lines) <= 3, r.stderr  # the located line, then the source line and its caret
    assert seconds < 3, f"{seconds:.1f} CPU s"  # ~0.5 s, most of it Python's start and imports


@pytest.mark.parametrize("name", list(ERRORS_UNREGISTERED_ALLOWED))
def test_allow_unregistered_dialect_still_rejects_unknown_fwd_names(name):
    line, col, message = ERRORS_UNREGISTERED_ALLOWED[name]
    r, _ = run_case(name, "--allow-unregistered-dialect")
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    assert r.stderr.splitlines()[0] == f"{CASES}/{name}:{line}:{col}: error: {message}"


def test_allow_unregistered_dialect_admits_other_dialects():
    """The flag's purpose stands: ops, types and attributes of a dialect nobody registered parse,
    print and pass through."""
    text = '%x = "mydialect.op"() {a = #mydialect.attr<1>} : () -> !mydialect.type<2>\n'
    r = subprocess.run([*_tool("fwdshim-opt"), "--allow-unregistered-dialect"], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert '  %x = "mydialect.op"() {a = #mydialect.attr<1>} : () -> !mydialect.type<2>' in r.stdout.splitlines()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('%w = fwd.weight "blk.0', 'stdin:1:17: error: string literal not terminated: no closing `"` before the end of the input'),
        ('%w = fwd.weight "blk.0\\', "stdin:1:23: error: invalid escape `\\` in a string literal (escapes: \\n \\t \\\\ \\\" or two hex digits)"),
        ('"fwd.silu\n', 'stdin:1:1: error: string literal not terminated: no closing `"` before the end of the line'),
    ],
)
def test_unterminated_string_at_the_end_of_the_input(text, expected):
    r = subprocess.run([*_tool("fwdshim-opt")], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[0] == expected


ROUND_TRIPS = {
    # file: (pipeline, a line of its output that must print again, unchanged, after a second parse)
    "weight_name.mlir": (PIPELINE, '    %w = fwd.weight "blk.0.\\C3\\A9" : tensor<32xf32>'),
    "roundtrip_refusal_reason.mlir": (
        "fwd-legalize{mode=mark}",
        '    %y = fwd.rms_norm %x bias(%b : tensor<64xf32>) {fwd.refused = "a bias on an RMSNorm \\E2\\80\\94 its kernel scales and never shifts"} : tensor<64xf32> -> tensor<64xf32>',
    ),
}


@pytest.mark.parametrize("generic", [[], ["--print-op-generic"]], ids=["custom", "generic"])
@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_printed_ir_parses_back(name, generic):
    """A non-ASCII weight name, buffer name or refusal reason prints as escapes (MLIR's form); the
    output parses back and prints the same (xDSL read the escapes as bytes: "should be of base
    attribute string")."""
    pipeline, line = ROUND_TRIPS[name]
    tool = _tool("fwdshim-opt")
    first = subprocess.run([*tool, f"{CASES}/{name}", "-p", pipeline, *generic], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    if not generic:
        assert line in first.stdout.splitlines()
    again = subprocess.run([*tool, "-p", pipeline, *generic], input=first.stdout, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%w = fwd.weight \"w\" : tensor<64xf32>\n" + "%c = \"test.op\"() {v = " + "7" * 5000 + "} : () -> ()", "stdin:2:23: error: integer literal too long: 5000 digits (at most 4300)"),
        ('"builtin.module"() ({}) {v = 1 : i99999999999999999999} : () -> ()', "stdin:1:34: error: integer bitwidth is limited to 16777215 bits"),
        ('"builtin.module"() ({}) {v = 1 : i' + "9" * 5000 + "} : () -> ()", "stdin:1:34: error: integer bitwidth is limited to 16777215 bits"),
        ('"builtin.module"() ({^bb0:}) {v = 70000.0 : f16} : () -> ()', "stdin:1:35: error: 70000.0 is out of range of f16"),
    ],
    ids=["digits", "width", "width digits", "f16"],
)
def test_numbers_too_large_to_convert_or_store(text, expected):
    """A decimal integer Python will not convert, an integer type wider than MLIR allows, a float
    past its type: errors at the number (were a ValueError line, an OverflowError "internal error"
    or memory exhausted computing 2**width)."""
    r = subprocess.run([*_tool("fwdshim-opt"), "--allow-unregistered-dialect"], input=text, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[0] == expected
