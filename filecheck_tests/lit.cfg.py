"""lit configuration of fwdshim's FileCheck tests: every `*.mlir` under filecheck_tests/, all sub-folders.

Run from the repository root: `lit -v filecheck_tests` (or one area: `lit -v filecheck_tests/dialect`).
`fwdshim-opt`, `xdsl-opt` and `filecheck` are found on PATH (the venv where fwdshim is installed).
"""

import os
import shutil

import lit.formats

config.name = "fwdshim"  # noqa: F821 - `config` is given by lit
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Output", "lit.cfg.py", "README.md", "inputs"]
# Keep the caller's PATH (the venv's bin) and the environment the tools read.
config.environment["PATH"] = os.environ.get("PATH", "")
for var in ("HOME", "VIRTUAL_ENV", "PYTHONPATH", "NUMBA_ENABLE_CUDASIM", "NUMBA_CACHE_DIR", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

for tool in ("fwdshim-opt", "xdsl-opt", "filecheck"):
    path = shutil.which(tool)
    if path is None:
        lit_config.fatal(f"`{tool}` is not on PATH: activate the venv where fwdshim is installed")  # noqa: F821
    # A whole word only: never inside a path such as `filecheck_tests/...` or `.../bin/fwdshim-opt`.
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w/.-])", path))
