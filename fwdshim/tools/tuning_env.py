"""The environment's say in the back end's `Tuning`: `FWDSHIM_MERGE` and `FWDSHIM_PDL`, read by
`fwdshim run` and `fwdshim profile` (and the API's `Decoder` when given no `tuning`) where they plan
kernels for the GPU — a run on the CPU reads neither. `codegen/` reads no environment:
`fwd-lower-numba` and `-t numba` take the same choices as options (`fwd-lower-numba{merge=false}`).
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping

from fwdshim.codegen.tuning import PDL_MODES, Tuning

ENVIRONMENT = ("FWDSHIM_MERGE", "FWDSHIM_PDL")
"""The variables `tuning_from_env` reads."""


def tuning_from_env(environ: Mapping[str, str] | None = None, base: Tuning | None = None) -> Tuning:
    """`base` (default: the defaults) with `FWDSHIM_MERGE` (`0`: one launch a stage; `1` or unset:
    merged) and `FWDSHIM_PDL` (one of `tuning.PDL_MODES`; `0` is off, `1` early, unset ahead) of
    `environ` (default: `os.environ`) applied. A value that is none of those warns (`UserWarning`,
    one line naming the variable) and takes the default."""
    env = os.environ if environ is None else environ
    base = base or Tuning()
    changes: dict[str, object] = {}
    merge = env.get("FWDSHIM_MERGE")
    if merge is not None:
        v = merge.strip()
        if v not in ("0", "1", ""):
            warnings.warn(f"FWDSHIM_MERGE={merge!r} is neither 0 nor 1: launches are merged", stacklevel=2)
        changes["merge"] = v != "0"
    pdl = env.get("FWDSHIM_PDL")
    if pdl is not None:
        v = {"0": "off", "": "ahead", "1": "early"}.get(pdl.strip().lower(), pdl.strip().lower())
        if v not in PDL_MODES:
            warnings.warn(
                f"FWDSHIM_PDL={pdl!r} is none of {', '.join(PDL_MODES)} (or 0, 1): programmatic dependent launch takes the default, ahead",
                stacklevel=2,
            )
            v = "ahead"
        changes["pdl"] = v
    return dataclasses.replace(base, **changes)
