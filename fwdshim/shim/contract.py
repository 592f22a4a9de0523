"""The numerics, one way through: a spelling (`dequant`, `int8-act`, `two-pass-int8`: `classes.NUMERICS`)
is parsed once, by `forward_shim`, into the shim of that `Q8MatKind`; `fwd-legalize` writes the shim's
contract into the module as `fwd.numerics` (`contract_attr`: the `Contract` plus `shim = name()`); the
report, the lowering and `-t numba` read it back with `shim_of`. IR that carries no contract (never
legalized) is judged by the numerics its `fwd.quantize` formats imply (`implied_shim`) or by the
option a pipeline ran with.
"""

from __future__ import annotations

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Operation
from xdsl.utils.exceptions import DiagnosticException

from fwdshim.classes import Q8MatKind
from fwdshim.diagnostics import error_at
from fwdshim.dialects.fwd import QuantizeOp
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


def forward_shim(numerics: str) -> ForwardShim:
    """The shim of a numerics spelling: the one place a spelling is parsed (ValueError, one line
    naming the spellings, for another)."""
    return ForwardShim(Q8MatKind.parse(numerics))


def implied_shim(root: Operation) -> ForwardShim:
    """The numerics IR without a contract implies: `two_words` quantize stages TwoPassInt8, `one_word`
    ones Int8Act, none Dequant."""
    formats = {op.format.data.value for op in root.walk() if isinstance(op, QuantizeOp)}
    if "two_words" in formats:
        return ForwardShim(Q8MatKind.TWO_PASS_INT8)
    return ForwardShim(Q8MatKind.INT8_ACT if formats else Q8MatKind.DEQUANT)


class ContractError(DiagnosticException):
    """A module's `fwd.numerics` names no shim: `file:line:col: error: ...` at the module."""


def shim_of(module: Operation | None, default: ForwardShim | None = None) -> ForwardShim:
    """The shim a legalized module names in `fwd.numerics`; for a module without the contract,
    `default` (DEQUANT when None).

    Raises: ContractError when `fwd.numerics` is there but is not a dictionary whose `shim` is one
    of the shims' names (a typo was read as DEQUANT: the report said Dequant while the plan judged
    by the quantize stages, and the stages were refused for reasons the IR did not ask for)."""
    numerics = None if module is None else module.attributes.get(NUMERICS_ATTR)
    if numerics is None:
        return ForwardShim() if default is None else default
    name = numerics.data.get("shim") if isinstance(numerics, DictionaryAttr) else None
    for kind in Q8MatKind:
        if isinstance(name, StringAttr) and name.data == ForwardShim(kind).name():
            return ForwardShim(kind)
    names = ", ".join(f'"{ForwardShim(k).name()}"' for k in Q8MatKind)
    given = f"names the shim {name}" if name is not None else f"is {numerics}"
    assert module is not None
    raise ContractError(
        error_at(module, f"{NUMERICS_ATTR} {given}, not a contract naming one of {names} (as fwd-legalize writes it)")
    )
