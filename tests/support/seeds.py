"""Seeds of the random tests: fixed, so CI is deterministic; fresh ones only when asked.

- Every random test draws from a seed it names: a fixed list (`seed_list`; a seed that once failed
  stays in its list) or, for a test drawing one generator, a seed fixed by the test's own id (`rng`,
  and the module-level `rng` of a test module, which tests/conftest.py reseeds before each test, so
  a test's values do not depend on which tests ran before it in its worker).
- `FWDSHIM_FRESH_SEEDS=<n>` (any integer, e.g. `$RANDOM`) adds fresh seeds derived from `n` (the same
  in every pytest-xdist worker, and the same again for the same `n`: no run draws a seed the
  environment does not name; a failing test's report names its `FWDSHIM_SEED`);
  `FWDSHIM_SEED=<n>` replays one seed.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence

import numpy as np

_FRESH_TEXT = os.environ.get("FWDSHIM_FRESH_SEEDS", "")
FRESH = _FRESH_TEXT not in ("", "0")
REPLAY = os.environ.get("FWDSHIM_SEED")


def _fresh_base(text: str) -> int:
    """The base of the fresh seeds: FWDSHIM_FRESH_SEEDS's value (a number, or any text hashed)."""
    return int(text) % (1 << 32) if text.lstrip("-").isdigit() else zlib.crc32(text.encode())


_BASE = _fresh_base(_FRESH_TEXT) if FRESH else 0


def seed_list(fixed: Sequence[int], fresh: int = 8) -> list[int]:
    """The seeds a parametrized random test runs: `fixed`, plus `fresh` new ones under
    FWDSHIM_FRESH_SEEDS=<n>; only the replayed one under FWDSHIM_SEED."""
    if REPLAY:
        return [int(REPLAY)]
    out = list(fixed)
    if FRESH:
        out += [(_BASE + i * 0x9E3779B1) % (1 << 32) for i in range(fresh)]
    return out


def _flat(nodeid: str) -> str:
    """`tests/codegen/test_merge.py::t[p]` as `tests/test_merge.py::t[p]`: a test's seed does not change
    when its module moves into a folder of tests/ (the seeds were drawn when tests/ was flat)."""
    path, sep, rest = nodeid.partition("::")
    if not sep or not path.endswith(".py"):
        return nodeid
    return f"tests/{path.rsplit('/', 1)[-1]}::{rest}"


def case_seed(name: str | None = None) -> int:
    """The seed of the running test (`name`: its id; default the one pytest is running)."""
    if REPLAY:
        return int(REPLAY)
    name = name or os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    seed = zlib.crc32(_flat(name).encode())
    return (seed ^ _BASE) if FRESH else seed


def rng(name: str | None = None) -> np.random.Generator:
    """A generator seeded by `case_seed` (a failing test's report names its seed: tests/conftest.py)."""
    return np.random.default_rng(case_seed(name))
