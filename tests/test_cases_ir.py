"""`fwdshim-opt` on the IR inputs kept in tests/cases/ (issue 10): each is one located error line,
exit status 1, quickly (the unterminated strings hung: the lexer's time doubled per character)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = "tests/cases"
PIPELINE = "forward-shim{numerics=int8-act}"

ERRORS = {
    # file: (line, column, message) of the first stderr line
    "ir_hang_unterminated_string.mlir": (2, 19, 'string literal not terminated: no closing `"` before the end of the line'),
    "ir_hang_unterminated_symbol.mlir": (1, 12, 'string literal not terminated: no closing `"` before the end of the line'),
}


def _tool(name: str) -> list[str]:
    """The console script installed beside this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    assert found is not None, f"`{name}` is not installed: pip install -e ."
    return [found]


def run_case(name: str, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    """`fwdshim-opt tests/cases/NAME -p forward-shim{numerics=int8-act}` from the repository root."""
    start = time.monotonic()
    r = subprocess.run(
        [*_tool("fwdshim-opt"), f"{CASES}/{name}", "-p", PIPELINE, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return r, time.monotonic() - start


@pytest.mark.parametrize("name", list(ERRORS))
def test_case_is_one_located_error(name):
    line, col, message = ERRORS[name]
    r, seconds = run_case(name)
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"{CASES}/{name}:{line}:{col}: error: {message}"
    assert len(lines) <= 3, r.stderr  # the located line, then the source line and its caret
    assert seconds < 10, f"{seconds:.1f} s"


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
