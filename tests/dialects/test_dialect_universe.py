"""The `xdsl.universe` entry point: after `pip install`, stock `xdsl-opt` parses `fwd` IR and runs fwdshim passes."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from xdsl.universe import Universe

from fwdshim.dialects.fwd import Fwd
from fwdshim.passes import available_passes, get_all_passes
from fwdshim.tools.universe import FWDSHIM_UNIVERSE

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "examples" / "llama_layer.mlir"

HAS_LEGALIZE = importlib.util.find_spec("fwdshim.passes.legalize") is not None

RELU = """func.func @f(%x: tensor<576xf32>) -> tensor<576xf32> {
  %s = fwd.relu %x : (tensor<576xf32>) -> tensor<576xf32>
  func.return %s : tensor<576xf32>
}
"""


def _run(tool: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    here = Path(sys.executable).parent / tool
    exe = str(here) if here.exists() else shutil.which(tool)
    assert exe is not None, f"`{tool}` is not installed"
    return subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=120)


def test_entry_point_names_the_universe():
    eps = [ep for ep in entry_points(group="xdsl.universe") if ep.name == "fwdshim"]
    assert len(eps) == 1
    assert eps[0].value == "fwdshim.tools.universe:FWDSHIM_UNIVERSE"
    assert eps[0].load() is FWDSHIM_UNIVERSE


def test_universe_holds_the_dialect_and_every_available_pass():
    assert set(FWDSHIM_UNIVERSE.all_dialects) == {"fwd"}
    assert FWDSHIM_UNIVERSE.all_dialects["fwd"]() is Fwd
    assert set(FWDSHIM_UNIVERSE.all_passes) == set(available_passes())
    assert set(available_passes()) <= set(get_all_passes())
    for name, factory in FWDSHIM_UNIVERSE.all_passes.items():
        assert factory().name == name


def test_multiverse_sees_fwdshim():
    multiverse = Universe.get_multiverse()
    assert multiverse.all_dialects["fwd"]() is Fwd
    for name in available_passes():
        assert name in multiverse.all_passes


def test_stock_xdsl_opt_parses_fwd_ir_like_fwdshim_opt():
    stock = _run("xdsl-opt", str(LLAMA))
    ours = _run("fwdshim-opt", str(LLAMA))
    assert stock.returncode == 0, stock.stderr
    assert ours.returncode == 0, ours.stderr
    assert stock.stdout == ours.stdout
    assert 'fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576x576, q8_0>' in stock.stdout


@pytest.mark.skipif(not HAS_LEGALIZE, reason="fwdshim/passes/legalize.py (issue: legality) is not in this checkout yet")
def test_stock_xdsl_opt_runs_fwd_legalize():
    r = _run("xdsl-opt", "-p", "fwd-legalize{mode=mark}", "-f", "mlir", stdin=RELU)
    assert r.returncode == 0, r.stderr
    assert 'fwd.relu %x {fwd.refused = "' in r.stdout
    ok = _run("xdsl-opt", str(LLAMA), "-p", "fwd-legalize")
    assert ok.returncode == 0, ok.stderr
    assert "fwd.refused" not in ok.stdout and "fwd.attention" in ok.stdout
