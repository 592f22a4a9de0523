"""The numerics contract a legalized module carries: `fwd.numerics` (the `Contract` plus `shim = name()`),
written by `contract_attr` and read back by `shim_of`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Operation

from fwdshim.classes import Q8MatKind
from fwdshim.shim.forward import ForwardShim

NUMERICS_ATTR = "fwd.numerics"


def contract_attr(shim: ForwardShim) -> DictionaryAttr:
    """The numerics contract as a module attribute: `Contract.as_dict()` plus `shim`; None prints `"none"`."""
    entries: dict[str, Attribute] = {"shim": StringAttr(shim.name())}
    for key, value in shim.numerics().as_dict().items():
        if isinstance(value, int):
            entries[key] = IntegerAttr(value, i64)
        else:
            entries[key] = StringAttr("none" if value is None else str(value))
    return DictionaryAttr(entries)


def shim_of(module: Operation) -> ForwardShim:
    """The shim a legalized module names in `fwd.numerics` (DEQUANT where it names none)."""
    numerics = module.attributes.get(NUMERICS_ATTR)
    if isinstance(numerics, DictionaryAttr):
        name = numerics.data.get("shim")
        for kind in Q8MatKind:
            if isinstance(name, StringAttr) and name.data == ForwardShim(kind).name():
                return ForwardShim(kind)
    return ForwardShim()
