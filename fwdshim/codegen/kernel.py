"""A kernel as the families build it: its generated source, launch configuration, parameters and spec.

Every kernel of `fwdshim.codegen` is *generated* Python source: one string per kernel spec, with
sizes, `eps` and options baked in as constants, so that `fwdshim-opt -t numba` can print exactly
what runs (`codegen.source`: the prelude every module starts with, and the statement helpers).

- `Kernel`: what a kernel family factory returns — the dispatcher (a `LazyDispatcher`,
  `codegen.kernel_cache`: compiled on its first launch or attribute, so planning and printing
  kernels write nothing to the cache), its launch configuration, its parameters in launch order,
  each a `Param` (name, dtype, number of elements, in/out), and its `spec` (`KernelSpec`: what the
  family built it from). Every array parameter is a 1-D C-contiguous array (pass `a.reshape(-1)` of
  the logical shape that the family's docstring gives); launch as `k.fn[k.grid, k.block](*arrays)`,
  on a GPU also `k.fn[k.grid, k.block, stream_or_graph_builder](*arrays)` (cuda.core
  `GraphBuilder`), or `k.launch_on(stream_or_graph_builder, *arrays)`: the same, with programmatic
  dependent launch when its `pdl` (`Tuning.pdl`) asks for it (`codegen.numba_launch`; `build` then
  opens each kernel function with `pdl_wait()`).
- `build(name, body, entry, grid, block, params, notes, pdl=, spec=) -> Kernel`: a family's body
  with the prelude before it.
- `@factory`: a family's factory, cached by its arguments, its `int` parameters checked first.
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from fwdshim.codegen.device import simulating
from fwdshim.codegen.kernel_cache import KernelSource, LazyDispatcher
from fwdshim.codegen.numba_launch import launch_pdl
from fwdshim.codegen.source import Facts, KernelBody, SharedArray, facts, prelude, with_pdl


F = TypeVar("F", bound=Callable[..., Any])


def as_index(v: object, what: str) -> int:
    """`v` as a size (`operator.index`: a Python or NumPy integer), else a TypeError "`what` must be an
    integer" (a bool too: `True` is no size)."""
    try:
        if isinstance(v, bool):
            raise TypeError
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {v!r}") from None


def factory(fn: F) -> F:
    """`fn`, a kernel family's factory, cached by its arguments (`functools.cache`), each parameter
    annotated `int` (or `int | None`) taken as an index first: a Python or NumPy integer becomes an
    `int`; a float, bool or string is a TypeError naming the factory and the parameter, raised before
    anything is built or cached (else `blocks("f16", 8, 64.0)` would bake `64.0` into a source and be
    returned for `blocks("f16", 8, 64)`, the two keys being equal)."""
    cached = functools.cache(fn)
    sig = inspect.signature(fn)
    dims = [n for n, p in sig.parameters.items() if p.annotation in ("int", "int | None", int)]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(*args, **kwargs)
        for name in dims:
            if name not in bound.arguments or bound.arguments[name] is None:
                continue
            bound.arguments[name] = as_index(bound.arguments[name], f"{fn.__name__}: `{name}`")
        return cached(*bound.args, **bound.kwargs)

    call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    call.cache_info = cached.cache_info  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a 1-D C-contiguous array of `size` elements of `dtype`.

    `dtype` is a NumPy dtype name (`float32`, `float16`, `uint16`, `int8`, `int32`, `int64`); `role` is `in`,
    `out` (written whole) or `inout`; `doc` the logical shape and meaning."""

    name: str
    dtype: str
    size: int
    role: str = "in"
    doc: str = ""

    @property
    def numba_type(self) -> str:
        return f"{_NUMBA_NAMES[self.dtype]}[::1]"


_NUMBA_NAMES = {
    "float32": "float32",
    "float16": "float16",
    "uint16": "uint16",
    "int8": "int8",
    "int32": "int32",
    "int64": "int64",
}


class KernelSpec:
    """What a kernel family built a kernel from, as data: a family's frozen spec (`gemv.GemvSpec`,
    `norms.NormSpec`, `rope.RopeSpec`, `quantize.QuantizeSpec`, `unary.BinarySpec`,
    `fused.ElementwiseSpec`, ...) derives from this and names its `family`. `codegen.merge` asks a kernel's spec what it is and
    rebuilds it as a variant from it, never from its name or source."""

    family: ClassVar[str] = ""


@dataclass(frozen=True)
class Kernel:
    """A compiled kernel with its launch configuration (see the module docstring).

    `params` are in launch order; `notes` says what the kernel computes, for plans and listings;
    `spec` what its family built it from (`KernelSpec`; None for a kernel no later step rebuilds)."""

    name: str
    source: str
    fn: Any = field(repr=False, compare=False)
    grid: tuple[int, ...]
    block: tuple[int, ...]
    params: tuple[Param, ...]
    notes: str = ""
    pdl: str = "off"
    """How `launch_on` launches it (`Tuning.pdl`: the mode its waits were placed for)."""
    spec: KernelSpec | None = field(default=None, repr=False, compare=False)
    code: KernelBody | None = field(default=None, repr=False, compare=False)
    """The source after the prelude, as data (`source.KernelBody`)."""

    @property
    def family(self) -> str:
        """The family that built the kernel (its spec's `family`; `""` for none)."""
        return self.spec.family if self.spec is not None else ""

    @property
    def body(self) -> str:
        """The kernel's own text: its source after the prelude (`code` as text). Raises ValueError
        for a source without the prelude."""
        head = prelude()
        i = self.source.find(head)
        if i < 0:
            raise ValueError(f"kernel {self.name}: no prelude in its source")
        return self.source[i + len(head) :].strip("\n")

    @property
    def facts(self) -> Facts:
        """What its code does (`source.Facts`: atomics, barriers, shared memory, ...), read from its
        syntax tree: its body's (`code`), else its whole source's."""
        return self.code.facts if self.code is not None else facts(self.source)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def signature(self) -> str:
        """The Numba signature of the parameters, e.g. `void(float32[::1], int8[::1])`."""
        return "void(" + ", ".join(p.numba_type for p in self.params) + ")"

    def launch_on(self, stream: Any, *arrays) -> None:
        """Launch on `arrays` on `stream` (a cuda.core stream or graph builder), with programmatic
        dependent launch unless its `pdl` is off (the kernel's blocks are then scheduled before the
        launch before it ends, and wait in `pdl_wait`); else as `launch`. Under the simulator: a
        plain launch."""
        if self.pdl == "off" or simulating():
            self.launch(*arrays, stream=stream)
            return
        launch_pdl(self.fn, self.signature, self.grid, self.block, stream, arrays)

    def launch(self, *arrays, stream=None) -> None:
        """Launch on `arrays` (in `params` order); `stream` may be a stream or a graph builder."""
        if len(arrays) != len(self.params):
            raise TypeError(f"kernel {self.name} takes {len(self.params)} arrays {self.param_names}, got {len(arrays)}")
        if stream is None:
            self.fn[self.grid, self.block](*arrays)
        else:
            self.fn[self.grid, self.block, stream](*arrays)

    def compile(self):
        """Compile now for the parameters' signature (GPU only), so no compile happens in a capture."""
        if simulating():
            return None
        return self.fn.compile(self.signature)

    def host_arrays(self, **given: np.ndarray) -> list[np.ndarray]:
        """The launch arguments as host arrays: `given[name]` flattened (and checked), zeros for
        outputs not given. A convenience for tests and the simulator. TypeError for a name that is no
        parameter of the kernel (a misspelt input would otherwise leave that input unset)."""
        unknown = sorted(set(given) - set(self.param_names))
        if unknown:
            raise TypeError(f"kernel {self.name} has no parameter {', '.join(f'`{u}`' for u in unknown)} (its parameters: {', '.join(self.param_names)})")
        out = []
        for p in self.params:
            a = given.get(p.name)
            if a is None:
                if p.role == "in":
                    raise TypeError(f"kernel {self.name} needs input `{p.name}` ({p.doc})")
                a = np.zeros(p.size, dtype=p.dtype)
            a = np.ascontiguousarray(a).reshape(-1)
            if a.dtype != np.dtype(p.dtype) or a.size != p.size:
                raise TypeError(f"kernel {self.name} `{p.name}` wants {p.size} {p.dtype}, got {a.size} {a.dtype}")
            out.append(a)
        return out

    def run(self, **given: np.ndarray) -> dict[str, np.ndarray]:
        """Launch on host arrays (`host_arrays`) and return every array by name (outputs filled)."""
        arrays = self.host_arrays(**given)
        if simulating():
            self.fn[self.grid, self.block](*arrays)
            return dict(zip(self.param_names, arrays))
        from numba import cuda

        dev = [cuda.to_device(a) for a in arrays]
        self.fn[self.grid, self.block](*dev)
        cuda.synchronize()
        return {p.name: d.copy_to_host() for p, d in zip(self.params, dev)}


def build(name: str, body: str | KernelBody, entry: str, grid, block, params, notes: str = "", *, pdl: str,
          spec: KernelSpec | None = None, shared: Sequence[SharedArray] = ()) -> Kernel:  # fmt: skip
    """`body` (a `KernelBody`, or a family's module text, `KernelBody.parse`) after the prelude, as a
    `Kernel` (its `fn` a `LazyDispatcher`: the source is written to the cache and imported when the
    kernel is first launched or compiled); `pdl` (`Tuning.pdl`) places the kernel's wait
    (`source.with_pdl`) and says how it is launched; `spec` is what the family built it from
    (`KernelSpec`); `shared` the top-level shared arrays the body's text declares (`SharedArray.decl`)."""
    code = with_pdl(body if isinstance(body, KernelBody) else KernelBody.parse(body, entry, shared), pdl)
    if code.entry != entry:
        raise ValueError(f"kernel {name}: its body defines `{code.entry}`, not `{entry}`")
    source = f'"""fwdshim kernel {name}: {notes}"""\n' + prelude() + "\n\n" + code.text()
    fn = LazyDispatcher(KernelSource(name, source, entry))
    return Kernel(name, source, fn, tuple(grid), tuple(block), tuple(params), notes, pdl, spec, code)
