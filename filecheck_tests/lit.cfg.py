"""lit configuration of fwdshim's FileCheck tests: every `*.mlir` under filecheck_tests/, all sub-folders.

Run from the repository root: `lit -v filecheck_tests` (or one area: `lit -v filecheck_tests/dialect`).
`fwdshim-opt`, `xdsl-opt` and `filecheck` are found on PATH, else beside the Python running lit (the venv
where fwdshim is installed); each is substituted by its full path.
"""

import os
import shutil
import sys

import lit.formats

config.name = "fwdshim"  # noqa: F821 - `config` is given by lit
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Output", "lit.cfg.py", "README.md", "inputs"]
# Keep the caller's PATH (the venv's bin) and the environment the tools read.
config.environment["PATH"] = os.environ.get("PATH", "")
for var, value in os.environ.items():
    if var in ("HOME", "VIRTUAL_ENV", "PYTHONPATH", "TMPDIR") or var.startswith(("FWDSHIM_", "NUMBA_", "CUDA_")):
        config.environment[var] = value
# As the pytest suite: `fwd-lower-numba` builds its kernels under Numba's CUDA simulator unless
# `FWDSHIM_GPU=1` (so the suite needs no GPU and no CUDA toolkit).
if os.environ.get("FWDSHIM_GPU") != "1":
    config.environment.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# On PATH, else beside the Python running lit (a venv's `bin/lit` run without activating the venv).
_search = os.pathsep.join([os.environ.get("PATH", ""), os.path.dirname(sys.executable)])
for tool in ("fwdshim-opt", "xdsl-opt", "filecheck"):
    path = shutil.which(tool, path=_search)
    if path is None:
        lit_config.fatal(f"`{tool}` is not on PATH: activate the venv where fwdshim is installed")  # noqa: F821
    # A whole word only: never inside a path such as `filecheck_tests/...` or `.../bin/fwdshim-opt`.
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w/.-])", path))
