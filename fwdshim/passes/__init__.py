"""fwdshim's passes, imported lazily (`get_all_passes`), as xDSL's own `get_all_passes`."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every fwdshim pass by its pipeline name."""

    def legalize():
        from fwdshim.passes.legalize import LegalizePass

        return LegalizePass

    def fuse():
        from fwdshim.passes.fuse import FusePass

        return FusePass

    def quantize():
        from fwdshim.passes.quantize_activations import QuantizeActivationsPass

        return QuantizeActivationsPass

    def pipeline():
        from fwdshim.passes.pipeline import ForwardShimPass

        return ForwardShimPass

    def lower():
        from fwdshim.passes.lower_numba import LowerNumbaPass

        return LowerNumbaPass

    return {
        "fwd-legalize": legalize,
        "fwd-fuse": fuse,
        "fwd-quantize-activations": quantize,
        "forward-shim": pipeline,
        "fwd-lower-numba": lower,
    }


def available_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """The passes whose modules exist in this checkout (others are listed once they land)."""
    import importlib.util

    modules = {
        "fwd-legalize": "fwdshim.passes.legalize",
        "fwd-fuse": "fwdshim.passes.fuse",
        "fwd-quantize-activations": "fwdshim.passes.quantize_activations",
        "forward-shim": "fwdshim.passes.pipeline",
        "fwd-lower-numba": "fwdshim.passes.lower_numba",
    }
    return {
        name: factory
        for name, factory in get_all_passes().items()
        if importlib.util.find_spec(modules[name]) is not None
    }
