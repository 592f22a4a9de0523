"""The option the forward's passes share: `numerics`, parsed once when the pass is made.

`fwd-quantize-activations`, `fwd-fuse`, `fwd-legalize` and `forward-shim` derive from `NumericsPass`:
the spelling is checked by `shim.contract.forward_shim` in `__post_init__` (a ValueError: the driver
prints it as one line, `unknown numerics ...`), and `apply` reads the parsed shim as `self.shim`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.passes import ModulePass

from fwdshim.shim.contract import forward_shim
from fwdshim.shim.forward import ForwardShim


@dataclass(frozen=True)
class NumericsPass(ModulePass):
    """A pass with a `numerics` option (`dequant`, `int8-act`, `two-pass-int8`)."""

    numerics: str = "dequant"
    """The forward's numerics."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_shim", forward_shim(self.numerics))

    @property
    def shim(self) -> ForwardShim:
        """The shim of `numerics`, parsed when the pass was made."""
        return self._shim
