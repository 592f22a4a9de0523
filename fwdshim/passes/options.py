"""The option the forward's passes share: `numerics`, parsed once when the pass is made;
`TuningOptions`, the back end's `Tuning` as typed options (`fwd-lower-numba`'s and `-t numba`'s);
and `bare_flags`, which reads a boolean option written bare as true (the passes' and `-t numba`'s).

`fwd-quantize-activations`, `fwd-fuse`, `fwd-legalize` and `forward-shim` derive from `NumericsPass`:
the spelling is checked by `shim.contract.forward_shim` in `__post_init__` (a ValueError: the driver
prints it as one line, `unknown numerics ...`), and `apply` reads the parsed shim as `self.shim`.
`quantized_for` names the numerics a module's activations were quantized for (from their formats)
when they are not the pass's: `fwd-quantize-activations` and `fwd-fuse` refuse such a module, `fwd-legalize` notes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import get_type_hints

from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.exceptions import PassFailedException

from fwdshim.codegen.tuning import Tuning, field_docs
from fwdshim.diagnostics import error_at
from fwdshim.dialects.attributes import QActType, QuantFormat
from fwdshim.shim.contract import forward_shim
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
        """Raises PassFailedException when some activation of `module` was quantized for other numerics
        than this pass's (`quantized_for`): fusing or quantizing it again would mix two contracts."""
        other = quantized_for(module, self.numerics)
        if other is not None:
            numerics, fmt, op = other
            raise PassFailedException(error_at(op, (
                f"{self.name}{{numerics={self.numerics}}}: the module's activations were quantized for {numerics} "
                f"(its {fmt} blocks, the first here); run the pipeline on the IR from before that, or give it numerics={numerics}"
            )))  # fmt: skip


_PLACED_FOR = {QuantFormat.ONE_WORD.value: "int8-act", QuantFormat.TWO_WORDS.value: "two-pass-int8"}
"""The numerics that quantize an activation to each format (`fwd-quantize-activations`)."""


def quantized_for(module: Operation, numerics: str) -> tuple[str, str, Operation] | None:
    """(numerics, format, producer) of the first quantized activation (`!fwd.qact`) of `module`
    whose format other numerics than `numerics` place (`one_word`: int8-act, `two_words`:
    two-pass-int8; dequant places none); None when every one is `numerics`'. Read from the values
    themselves, not the `fwd.numerics` record (which only `fwd-legalize` writes)."""
    for o in module.walk():
        for r in o.results:
            if isinstance(r.type, QActType):
                fmt = r.type.format.data.value
                if _PLACED_FOR[fmt] != numerics:
                    return _PLACED_FOR[fmt], fmt, o
    return None


TuningOptions = dataclasses.make_dataclass(
    "TuningOptions",
    [(f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(Tuning)],
    frozen=True,
)
"""A frozen dataclass holding `codegen.tuning.Tuning`'s fields as options of the same names, types and
defaults (`merge=false`, `pdl=off`, `prefetch_bytes=0`, ...): a pass or target deriving from it reads
them back as one value with `tuning_of`. A value `Tuning` refuses is a ValueError naming it."""
TuningOptions.__module__ = __name__
TuningOptions.option_docs = staticmethod(field_docs)  # what `fwdshim-opt --help` says of each


def tuning_of(options: object) -> Tuning:
    """The `Tuning` of a `TuningOptions` instance (a pass's or a target's). Raises ValueError for a
    value `Tuning` refuses (`pdl=sometimes`)."""
    return Tuning(**{f.name: getattr(options, f.name) for f in dataclasses.fields(Tuning)})


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
