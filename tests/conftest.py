"""Shared pytest setup.

Kernel tests run under Numba's CUDA simulator unless `FWDSHIM_GPU=1` (the `gpu`-marked suite on a
device): the simulator must be chosen before anything imports `numba.cuda`, so it is set here.
"""

import os

if os.environ.get("FWDSHIM_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
