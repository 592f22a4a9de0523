"""The shim protocol: what one backend lane answers the shared fusion optimizer.

Source: the seed's `Shim` trait (`name`, `supports`, `fits`, `rules`, `activation`, `numerics`),
`Position` and `Contract`. Another lane implements `Shim` to plug into the same passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from xdsl.ir import Operation

from fwdshim.classes import ClassId, Support
from fwdshim.dialects.attributes import QuantFormat


@dataclass(frozen=True)
class Position:
    """Where a shim places a named rule of the shared table: BEFORE(name) or AFTER(name)."""

    where: str  # "before" | "after"
    anchor: str

    @staticmethod
    def BEFORE(name: str) -> "Position":  # noqa: N802 - the seed's name
        return Position("before", name)

    @staticmethod
    def AFTER(name: str) -> "Position":  # noqa: N802
        return Position("after", name)


@dataclass(frozen=True)
class Scheme:
    """How activations are quantized: int8 blocks of 32 in one of the two formats."""

    format: QuantFormat
    block: int = 32
    bits: int = 8

    @staticmethod
    def of(format: QuantFormat) -> "Scheme":
        return Scheme(format)

    def __str__(self) -> str:
        return f"int{self.bits} blocks of {self.block}, {self.format.value}"


@dataclass(frozen=True)
class Contract:
    """The numerics a shim promises (the seed's `Contract`).

    `cache`/`state`: the precision the KV cache and recurrent state are kept in; `attention`: the
    attention's own approximation, None for exact softmax; `fused`: "exact" means a fused kernel is
    bit-identical to its unfused stages; `accumulator_bits`: the width of every accumulator."""

    point: str
    activations: Scheme | None
    cache: str = "f32"
    state: str = "f32"
    attention: str | None = None
    fused: str = "exact"
    accumulator_bits: int = 32

    def as_dict(self) -> dict[str, object]:
        return {
            "point": self.point,
            "activations": None if self.activations is None else str(self.activations),
            "cache": self.cache,
            "state": self.state,
            "attention": self.attention,
            "fused": self.fused,
            "accumulator_bits": self.accumulator_bits,
        }


class Shim(Protocol):
    """A lane's answer to the shared optimizer."""

    def name(self) -> str:
        """The lane's name, e.g. `cuda-forward:Int8Act`."""
        ...

    def supports(self, cls: ClassId) -> Support:
        """NATIVE (one kernel), DECOMPOSE (split into parts) or REFUSE(reason)."""
        ...

    def fits(self, op: Operation) -> str | None:
        """None when the lane computes the stage `op`, else the reason it does not."""
        ...

    def rules(self) -> list[tuple[Position, str]]:
        """Named rules of the shared table moved to this lane's positions."""
        ...

    def activation(self, consumer: Operation, operand: int) -> QuantFormat | None:
        """The format operand `operand` of `consumer` is read quantized in, or None."""
        ...

    def numerics(self) -> Contract | None:
        """The numerics contract the lane promises."""
        ...
