"""`forward-shim`: the whole lane — split Decompose classes met in the input, quantize activations,
fuse, legalize (`mode=strict`, the default, or `mode=mark`; `explain` prints the legality report;
`disable=rule,…` leaves fusion rules out).

Source: DESIGN.md §5 ("the pipeline places activation quantization first, then fuses, then
legalizes"). Quantizing first lets the epilogue rules (`add_norm_quant`, `norm_quant`,
`attn_output_quant`) fold each `fwd.quantize` into its producer under int8-act. A fused op of a
DECOMPOSE class in the input is split into its parts before anything else (`legalize.split_decomposed`):
split only by legalize, its parts missed the activation quantization (a Q8_0 matmul reading f32 under
int8-act, against the contract) and the forward's own fusion. So the output is what the numerics
say, and running the pipeline on its own output changes nothing. A module whose activations were
quantized for other numerics is refused first, in one line (`NumericsPass.check_not_quantized_otherwise`),
as `fwd-quantize-activations` and `fwd-fuse` refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import PassFailedException

from fwdshim.passes.fuse import FusePass, check_rule_names
from fwdshim.passes.options import NumericsPass
from fwdshim.passes.quantize_activations import QuantizeActivationsPass


@dataclass(frozen=True)
class ForwardShimPass(NumericsPass):
    """Split Decompose classes, quantize activations, fuse by the forward's rule order, then legalize
    (`mode`: strict, or mark)."""

    name = "forward-shim"

    numerics: str = "dequant"
    """The forward's numerics: `dequant`, `int8-act` (quantize in the producer's epilogue) or
    `two-pass-int8` (a separate quantize stage)."""

    mode: str = "strict"
    """The legality step's: `strict` (every refused op an error at its location) or `mark` (a
    `fwd.refused = "<reason>"` on each, and the pipeline succeeds), as `fwd-legalize`'s."""

    explain: bool | None = None
    """Print the legality report when the pipeline has run (as `fwd-legalize{explain}`)."""

    disable: tuple[str, ...] = ()
    """Fusion rules not run, by name (as `fwd-fuse{disable=…}`): to bisect a fusion by hand."""

    def __post_init__(self) -> None:
        super().__post_init__()
        from fwdshim.passes.legalize import MODES

        if self.mode not in MODES:
            raise ValueError(f"option `mode` of `forward-shim` takes strict or mark, not `{self.mode}`")
        check_rule_names(self.name, self.disable)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            from fwdshim.passes.legalize import LegalizePass
        except ImportError as e:  # the legality pass is another issue's module
            raise PassFailedException(f"forward-shim needs fwd-legalize (fwdshim.passes.legalize): {e}") from None
        from fwdshim.passes.legalize import split_decomposed

        self.check_not_quantized_otherwise(op)  # as its fwd-quantize-activations and fwd-fuse would
        split_decomposed(self.shim, op)
        QuantizeActivationsPass(self.numerics).run(op)
        FusePass(self.numerics, disable=self.disable).run(op)
        LegalizePass(numerics=self.numerics, mode=self.mode, explain=self.explain).apply(ctx, op)
