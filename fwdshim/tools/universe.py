"""The `xdsl.universe` entry point: stock `xdsl-opt` sees the `fwd` dialect and fwdshim's passes."""

from __future__ import annotations

from xdsl.universe import Universe


def _fwd():
    from fwdshim.dialects.fwd import Fwd

    return Fwd


def _targets():
    from fwdshim.tools.targets import get_all_targets

    return get_all_targets()


def _passes():
    from fwdshim.passes import available_passes

    return available_passes()


FWDSHIM_UNIVERSE = Universe(
    all_dialects={"fwd": _fwd},
    all_passes=_passes(),
    all_targets=_targets(),
)
