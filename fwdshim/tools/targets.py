"""fwdshim's `-t` targets (`numba`: the launch plan and generated kernel source)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

from xdsl.utils.target import Target


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    def numba():
        from fwdshim.tools.numba_target import NumbaTarget

        return NumbaTarget

    if importlib.util.find_spec("fwdshim.tools.numba_target") is None:
        return {}
    return {"numba": numba}
