"""Seeds of the random tests: fixed, so CI is deterministic; fresh ones only when asked.

- Every random test draws from a seed it names: a fixed list (`seed_list`; a seed that once failed
  stays in its list) or, for a test drawing one generator, a seed fixed by the test's own id (`rng`,
  and the module-level `rng` of a test module, which tests/conftest.py reseeds before each test, so
  a test's values do not depend on which tests ran before it in its worker).
- `FWDSHIM_FRESH_SEEDS=1` adds fresh seeds (the same in every pytest-xdist worker of one run; a
  failing test's report names its `FWDSHIM_SEED`); `FWDSHIM_SEED=<n>` replays one seed.
"""

from __future__ import annotations

import os
import secrets
import zlib
from collections.abc import Sequence

import numpy as np

FRESH = os.environ.get("FWDSHIM_FRESH_SEEDS") == "1"
REPLAY = os.environ.get("FWDSHIM_SEED")


def _fresh_base() -> int:
    """One fresh number per test run, shared by its xdist workers (they collect the same tests)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    return zlib.crc32(run.encode()) if run else secrets.randbits(32)


_BASE = _fresh_base() if FRESH else 0


def seed_list(fixed: Sequence[int], fresh: int = 8) -> list[int]:
    """The seeds a parametrized random test runs: `fixed`, plus `fresh` new ones under
    FWDSHIM_FRESH_SEEDS=1; only the replayed one under FWDSHIM_SEED."""
    if REPLAY:
        return [int(REPLAY)]
    out = list(fixed)
    if FRESH:
        out += [(_BASE + i * 0x9E3779B1) % (1 << 32) for i in range(fresh)]
    return out


def case_seed(name: str | None = None) -> int:
    """The seed of the running test (`name`: its id; default the one pytest is running)."""
    if REPLAY:
        return int(REPLAY)
    name = name or os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    seed = zlib.crc32(name.encode())
    return (seed ^ _BASE) if FRESH else seed


def rng(name: str | None = None) -> np.random.Generator:
    """A generator seeded by `case_seed` (a failing test's report names its seed: tests/conftest.py)."""
    return np.random.default_rng(case_seed(name))
