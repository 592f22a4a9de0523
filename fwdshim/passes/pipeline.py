"""`forward-shim`: the whole lane — quantize activations, fuse, legalize (strict).

Source: DESIGN.md §5 ("the pipeline places activation quantization first, then fuses, then
legalizes"). Quantizing first lets the epilogue rules (`add_norm_quant`, `norm_quant`,
`attn_output_quant`) fold each `fwd.quantize` into its producer under int8-act.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from fwdshim.passes.fuse import FusePass
from fwdshim.passes.options import NumericsPass
from fwdshim.passes.quantize_activations import QuantizeActivationsPass


@dataclass(frozen=True)
class ForwardShimPass(NumericsPass):
    """Quantize activations, fuse by the forward's rule order, then legalize (strict)."""

    name = "forward-shim"

    numerics: str = "dequant"
    """The forward's numerics: `dequant`, `int8-act` (quantize in the producer's epilogue) or
    `two-pass-int8` (a separate quantize stage)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            from fwdshim.passes.legalize import LegalizePass
        except ImportError as e:  # the legality pass is another issue's module
            raise PassFailedException(f"forward-shim needs fwd-legalize (fwdshim.passes.legalize): {e}") from None
        QuantizeActivationsPass(self.numerics).apply(ctx, op)
        FusePass(self.numerics).apply(ctx, op)
        LegalizePass(numerics=self.numerics, mode="strict").apply(ctx, op)
