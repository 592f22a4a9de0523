"""Helpers the tests share (from tests/passes/test_fuse.py, which imports them from here, as others do)."""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.classes import ClassId, Support
from fwdshim.shim.forward import ForwardShim
from fwdshim.shim.protocol import Position


@dataclass(frozen=True)
class SharedLane:
    """A test lane with the forward's supports and fits but no positions: the shared order."""

    inner: ForwardShim = ForwardShim()

    def name(self) -> str:
        return "test:shared"

    def supports(self, cls: ClassId) -> Support:
        return self.inner.supports(cls)

    def fits(self, op):
        return self.inner.fits(op)

    def rules(self) -> list[tuple[Position, str]]:
        return []

    def activation(self, consumer, operand):
        return None

    def numerics(self):
        return None


@dataclass(frozen=True)
class EveryClassLane(SharedLane):
    """A test lane that runs every class natively and has no `fits`."""

    def supports(self, cls: ClassId) -> Support:
        return Support.NATIVE

    fits = None  # type: ignore[assignment]
