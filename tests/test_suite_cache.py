"""tests/conftest.py gives the suite a cache of its own (FWDSHIM_TEST_CACHE)."""

from __future__ import annotations

import os
from pathlib import Path


def test_the_suite_has_a_cache_of_its_own():
    """Kernels, sidecars and records go to the run's own cache, never ~/.cache/fwdshim."""
    from fwdshim.codegen.kernel_cache import cache_dir as kernel_dir
    from fwdshim.frontend.cache import cache_dir, models_dir

    own = Path(os.environ["FWDSHIM_TEST_CACHE"])
    assert os.environ["FWDSHIM_CACHE"] == str(own)
    assert cache_dir() == own and models_dir() == own / "models" and kernel_dir() == own / "kernels"
    assert not own.is_relative_to(Path.home() / ".cache")
