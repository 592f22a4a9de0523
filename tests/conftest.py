"""Shared pytest setup.

Kernel tests run under Numba's CUDA simulator unless `FWDSHIM_GPU=1` (the `gpu`-marked suite on a
device): the simulator must be chosen before anything imports `numba.cuda`, so it is set here.

The suite's cache: `FWDSHIM_CACHE` is a temporary directory of the run's own (shared by its xdist
workers, removed at the end), so tests never write into the user's `~/.cache/fwdshim` (kernel
modules, sidecars, `models/*.json`). A model file the user already downloaded there is linked in,
read-only, rather than fetched again. `FWDSHIM_TEST_CACHE=DIR` makes DIR the suite's cache instead
(kept: e.g. to keep downloaded models between CI runs).
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

_user_cache = Path(os.environ.get("FWDSHIM_CACHE") or Path.home() / ".cache" / "fwdshim")
if not os.environ.get("FWDSHIM_TEST_CACHE"):  # the first process of the run (xdist workers inherit it)
    _own = tempfile.mkdtemp(prefix="fwdshim-test-cache-")
    os.environ["FWDSHIM_TEST_CACHE"] = _own
    atexit.register(shutil.rmtree, _own, ignore_errors=True)
    (Path(_own) / "models").mkdir()
    from fwdshim.frontend.cache import MODELS

    for _spec in MODELS.values():  # the downloaded models only (not sidecars: those the suite writes)
        if (_user_cache / "models" / _spec.file_name).is_file():
            (Path(_own) / "models" / _spec.file_name).symlink_to(_user_cache / "models" / _spec.file_name)
os.environ["FWDSHIM_CACHE"] = os.environ["FWDSHIM_TEST_CACHE"]

if os.environ.get("FWDSHIM_GPU") != "1":
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reseed_module_rng(request):
    """A test module's module-level `rng` restarts from the test's own seed (tests/support/seeds.py), so its
    values do not depend on the order tests run in."""
    from support.seeds import case_seed

    gen = getattr(request.module, "rng", None)
    if isinstance(gen, np.random.Generator):
        gen.bit_generator.state = np.random.PCG64(case_seed(request.node.nodeid)).state
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test's report names the seed that replays it (`FWDSHIM_SEED=<n>`, tests/support/seeds.py)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.when == "call":
        from support.seeds import case_seed

        report.sections.append(("seed", f"FWDSHIM_SEED={case_seed(item.nodeid)} replays this test's rng()"))


if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    from support import fastsim

    fastsim.install()  # the simulator's threads wait instead of polling (tests/support/fastsim.py)


def pytest_configure(config):
    # `pytest -n N` (pytest-xdist): a module's tests run on one worker (`--dist loadscope`), so each
    # module-scoped fixture is built once (test_peer.py's torch, transformers and SmolLM2: ~30 s).
    # (`--dist loadgroup` would not do: xdist 3.8 cannot rename pytest 9's items into groups.)
    if getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadscope"


_SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config, items):
    """Mark `slow` each test tests/slow_tests.txt lists (by measurement: tests/support/slow_list.py).
    A listed test of a collected module that no longer exists is an error: the list would silently
    stop marking what it meant to."""
    listed = {ln.strip() for ln in _SLOW_LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    seen, modules = set(), set()
    for item in items:
        name = f"{Path(str(item.path)).name}::{item.nodeid.partition('::')[2]}"
        modules.add(Path(str(item.path)).name)
        if name in listed:
            item.add_marker(pytest.mark.slow)
            seen.add(name)
    stale = sorted(k for k in listed - seen if k.partition("::")[0] in modules)
    if stale and not config.getoption("keyword") and not any("::" in a for a in config.args):
        raise pytest.UsageError(f"{_SLOW_LIST} lists tests that do not exist (rename or remove them): {', '.join(stale[:5])}")
