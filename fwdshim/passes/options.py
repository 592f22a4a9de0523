"""The option the forward's passes share: `numerics`, parsed once when the pass is made; and
`bare_flags`, which reads a boolean option written bare as true (the passes' and `-t numba`'s).

`fwd-quantize-activations`, `fwd-fuse`, `fwd-legalize` and `forward-shim` derive from `NumericsPass`:
the spelling is checked by `shim.contract.forward_shim` in `__post_init__` (a ValueError: the driver
prints it as one line, `unknown numerics ...`), and `apply` reads the parsed shim as `self.shim`.
`quantized_for` names the numerics a module's activations were quantized for when they are not the
pass's: `fwd-quantize-activations` and `fwd-fuse` refuse such a module, `fwd-legalize` notes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import get_type_hints

from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.exceptions import PassFailedException

from fwdshim.shim.contract import NUMERICS_ATTR, ContractError, forward_shim, shim_of
from fwdshim.shim.forward import ForwardShim


@dataclass(frozen=True)
class NumericsPass(ModulePass):
    """A pass with a `numerics` option (`dequant`, `int8-act`, `two-pass-int8`)."""

    numerics: str = "dequant"
    """The forward's numerics."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_shim", forward_shim(self.numerics))

    @classmethod
    def from_spec(cls, spec: ArgSpec):  # type: ignore[override]
        """As xDSL's, except that a boolean option written bare (`fwd-legalize{explain}`) is true, as
        in mlir-opt (xDSL read it as unset: the report was silently not printed)."""
        return super().from_spec(bare_flags(cls, spec))

    @property
    def shim(self) -> ForwardShim:
        """The shim of `numerics`, parsed when the pass was made."""
        return self._shim

    def check_not_quantized_otherwise(self, module: Operation) -> None:
        """Raises PassFailedException when `module`'s activations were quantized for other numerics
        than this pass's (`quantized_for`): fusing or quantizing it again would mix two contracts."""
        other = quantized_for(module, self.shim)
        if other is not None:
            raise PassFailedException(
                f"error: {self.name}{{numerics={self.numerics}}}: the module's activations were quantized for {other} "
                f"(its {NUMERICS_ATTR}), not for {self.shim.name()}; run the pipeline on the IR from before that, "
                f"or give the numerics it was quantized for"
            )


def recorded_shim(module: Operation) -> str | None:
    """The shim name `fwd.numerics` records on `module` (`contract.shim_of`; None without one, or an
    unreadable one)."""
    if NUMERICS_ATTR not in module.attributes:
        return None
    try:
        return shim_of(module).name()
    except ContractError:
        return None


def quantized_for(module: Operation, shim: ForwardShim) -> str | None:
    """The shim name `module`'s `fwd.numerics` records when it is not `shim`'s and some value of
    `module` is a quantized activation (`!fwd.qact`, placed for those numerics); else None."""
    from fwdshim.dialects.attributes import QActType

    before = recorded_shim(module)
    if before is None or before == shim.name():
        return None
    return before if any(isinstance(r.type, QActType) for o in module.walk() for r in o.results) else None


def bare_flags(cls: type, spec: ArgSpec) -> ArgSpec:
    """`spec` with each boolean option of `cls` (a pass's or a target's dataclass) written bare
    (`explain`, `plan_only`) given as true, as mlir-opt reads it. Raises ValueError for another
    option written bare (`mode`): it needs a value."""
    hints = get_type_hints(cls)
    params = dict(spec.parameters)
    for f in dataclasses.fields(cls):
        given = params.get(f.name)
        if given is None or len(given) != 0:
            continue
        if hints.get(f.name) not in (bool, bool | None):
            raise ValueError(f"option `{f.name}` of `{cls.name}` needs a value (`{f.name}=...`)")
        params[f.name] = (True,)
    return ArgSpec(spec.name, params)
