"""The README's quick start is what a new user pastes and what CI runs (`.ci/run` reads it)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quick_start() -> list[str]:
    """The lines of the quick start's shell blocks, in order (what `.ci/run` reads them from)."""
    text = (ROOT / "README.md").read_text()
    section = re.search(r"## Quick start\n(.*?)\n## ", text, re.S)
    assert section is not None
    blocks = re.findall(r"```sh\n(.*?)\n```", section.group(1), re.S)
    assert blocks
    return [ln for b in blocks for ln in b.splitlines()]


def test_the_block_holds_every_step():
    lines = quick_start()
    commands = [ln for ln in lines if not ln.startswith("#")]
    first, run, optional, tests = commands
    # the venv and the install first, then the main job, each a line to paste
    assert first == "python3 -m venv .venv && . .venv/bin/activate && pip install -e ."
    assert run.startswith("fwdshim run --model smollm2 ")
    # the optional line says so, and its failure cannot stop what follows (`|| echo`)
    assert lines[lines.index(optional) - 1].startswith("# optional")
    assert optional.startswith("pip install -q torch==") and re.search(r"2>/dev/null \|\| echo \"[^\"]*\"$", optional)
    assert "&&" not in optional
    assert tests == 'pip install -e ".[test]" && pytest -q -n auto && lit -v filecheck_tests'
    tour = re.search(r"## A tour for compiler engineers\n(.*?)\n## ", (ROOT / "README.md").read_text(), re.S).group(1)
    opt = re.search(r"```sh\n(.*?)\n```", tour, re.S).group(1).splitlines()
    assert len(opt) == 2 and all(c.startswith("fwdshim-opt ") for c in opt)  # the compiler engineers' first two


def test_ci_runs_the_readme_lines():
    """`.ci/run`'s own extraction, run on the README: the optional torch line and the test command."""
    script = (ROOT / ".ci" / "run").read_text()
    start = script.index("block=$(")
    extract = script[start : script.index("\nfi\n", start) + 4]
    out = subprocess.run(
        ["bash", "-c", f'set -euo pipefail\n{extract}\nprintf "%s\\n" "$optional" "$tests"'],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    commands = [ln for ln in quick_start() if not ln.startswith("#")]
    assert out.stdout.splitlines() == commands[2:4]
    assert 'eval "$tests" || status=$?' in script


def test_every_fwdshim_opt_command_of_the_readme_runs_as_pasted():
    """Each `fwdshim-opt ...` span of the README is a whole command (no `…` to fill in) that exits 0
    and prints what the text around it says (README once gave `-p '…,fwd-lower-numba'`)."""
    import os
    import shlex
    import shutil

    text = (ROOT / "README.md").read_text()
    spans = [s for s in re.findall(r"`(fwdshim-opt [^`]*)`", text) if s != "fwdshim-opt --help"]
    spans += re.findall(r"^(fwdshim-opt .*)$", text, re.M)
    assert len(spans) >= 2 and not [s for s in spans if "…" in s]
    exe = shutil.which("fwdshim-opt")
    assert exe is not None
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    outs = {}
    for span in spans:
        out = subprocess.run([exe, *shlex.split(span)[1:]], cwd=ROOT, capture_output=True, text=True, env=env)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (span, out.stderr)
        outs[span] = out.stdout
    lowered = [s for s in spans if "fwd-lower-numba" in s and "-t numba" in s]
    assert len(lowered) == 1
    assert outs[lowered[0]].startswith("// launch plan @decode_step: 15 stages, ")
    assert "\n# ---- kernel " in outs[lowered[0]]


def test_the_readme_pipeline_of_your_own_runs_as_written(tmp_path):
    """docs/passes.md's Python block under "Your own xDSL pipeline" runs as pasted from the repository's
    root: it prints the fused IR and the launch plan; on a refused op it exits with the located line."""
    import os
    import sys

    text = (ROOT / "docs" / "passes.md").read_text()
    section = text[text.index("## Your own xDSL pipeline") : text.index("## FileCheck tests of your own")]
    code = re.search(r"```python\n(.*?)\n```", section, re.S).group(1)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "fwd.fused" in out.stdout and "\n// launch plan @decode_step: 15 stages, " in out.stdout
    bad = tmp_path / "gelu.mlir"
    bad.write_text(
        "func.func @s(%x: tensor<512xf32>) -> tensor<512xf32> {\n"
        "  %g = fwd.gelu %x : (tensor<512xf32>) -> tensor<512xf32>\n"
        "  func.return %g : tensor<512xf32>\n}\n"
    )
    out = subprocess.run([sys.executable, "-c", code.replace('"examples/llama_layer.mlir"', repr(str(bad)))],
                         cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == 1 and out.stderr.startswith(f"{bad}:2:3: error: "), out.stderr
