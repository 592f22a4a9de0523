"""`Tuning`: every launch-level choice of the back end, one frozen value passed in.

Planning (`codegen.plan.build_plan`) and every kernel factory take a `Tuning` and key their caches on
it; nothing in `codegen/` reads a module global or the environment to decide what it builds. The
defaults are the measured winners on the H200; each field's history (the runs that chose its value,
the variants that lost) is in `bench/RESULTS.md`. `fwd-lower-numba`'s and `-t numba`'s options, the
API's `Decoder(..., tuning=...)` and the bench drivers' `--tuning KEY=VALUE` make one; the
environment variables `FWDSHIM_MERGE` and `FWDSHIM_PDL` map onto it in `tools/` only
(`tools.tuning_from_env`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PDL_MODES = ("off", "wait", "ahead", "early")
"""Programmatic dependent launch: `off` launches plainly; `wait` opens every kernel with `pdl_wait()`
(the launches before it on the stream have finished, their writes visible) and launches it with
programmatic stream serialization; `ahead` adds `pdl_launch()` after the wait (the next launch may be
scheduled once this one's blocks have all passed theirs); `early` calls `pdl_launch()` before it."""


@dataclass(frozen=True)
class Tuning:
    """The back end's launch-level choices (see the module docstring). Hashable: part of every kernel
    factory's cache key. `Tuning.parse` reads `KEY=VALUE` items; `ValueError` names a bad one."""

    # the lowering's steps (`codegen.plan`)
    merge: bool = True
    """Group the stages' launches into merged launches (`codegen.merge`); off: one launch a stage."""
    prefetch_bytes: int = 8 << 20
    """The most weight bytes a launch asks into L2 for the launch after it (`codegen.prefetch`); 0: no
    prefetch step."""
    pdl: str = "ahead"
    """Programmatic dependent launch, one of `PDL_MODES`."""

    # merged launches (`codegen.merge`)
    tail_threads: int = 4096
    """The most threads (grid x block) a stage run as a merged launch's tail may have."""
    tail_set_bytes: int = 16 << 20
    """The most bytes a parallel set may read and still take tails."""
    prologue_values: int = 1536
    """The widest activation a prologue keeps in shared memory (0: no prologues)."""
    quantized_prologues: bool = True
    """Whether a prologue may leave a quantized activation (int8-act's norms and quantizes)."""
    pre_wait_prologue: bool = True
    """Whether a prologue runs at its GEMV parts' wait, after their early weight loads."""
    one_wave_blocks: int = 8
    """The most blocks an SM a merged launch's launch bounds ask for to run in one wave (below 2: none)."""
    binary_epilogues: bool = True
    """Whether an elementwise op of a GEMV's output and an earlier buffer runs as its epilogue."""
    rope_epilogues: bool = True
    """Whether the rope of a Q or K projection runs as its GEMV's epilogue."""
    pair_epilogues: bool = True
    """Whether silu·mul after gate and up runs as their paired GEMV's epilogue."""
    quant_epilogue_values: int = 1536
    """The widest quantize of a pair epilogue's result run in the pair's part (0: none)."""
    pair_quant_block: bool = True
    """Whether that quantize counts a block's pairs at once (a barrier, one atomic a block) where the
    kernel never returns early, rather than a warp's (one atomic a warp)."""

    # GEMVs (`codegen.gemv`)
    pre_wait: bool = True
    """Whether a pipelined GEMV issues its first copies before it waits for the launches before it."""
    pre_wait_loads: int = 4
    """The most steps a short-row GEMV loads all its weights in before its wait (0: none)."""
    pre_wait_blocks: int = 4
    """The most Q8_0 blocks a lane of a whole-block-lane GEMV holds across its wait."""
    tall_dequant_rows: int = 4
    """The rows a warp of the dequantizing GEMV of a tall matrix of long rows."""

    # the attention (`codegen.attention`)
    combine_registers: int = 32
    """The most splits a head's combine holds in registers (more: through shared memory)."""
    combine_batch: int = 8
    """The splits' outputs a combine past `combine_registers` loads together a step."""

    # one-thread-per-index kernels (elementwise, rope, quantize) and norms
    small_items: int = 16
    """The most indices a thread of a one-thread-per-index kernel takes."""
    held_floats: int = 16
    """The most input values a thread of a one-thread-per-index kernel holds in registers at once."""
    norm_cols_items: int = 8
    """The values a thread of a row norm split over blocks takes (`norms.default_cols`)."""
    norm_unroll_items: int = 32
    """The most values a thread of a row norm takes with its loads unrolled (0: always looped)."""
    norm_held_floats: int = 48
    """The most values a thread of an unrolled row norm holds in registers at once."""

    def __post_init__(self) -> None:
        if self.pdl not in PDL_MODES:
            raise ValueError(f"tuning pdl={self.pdl!r}: one of {', '.join(PDL_MODES)}")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type == "bool" and not isinstance(v, bool):
                raise ValueError(f"tuning {f.name}={v!r}: true or false")
            if f.type == "int" and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"tuning {f.name}={v!r}: a whole number >= 0")

    def changed(self) -> dict[str, object]:
        """The fields that differ from the defaults (what a plan's or a bench's header names)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) != f.default}

    @classmethod
    def parse(cls, items: Sequence[str] | Mapping[str, str], base: Tuning | None = None) -> Tuning:
        """`base` (default: the defaults) with each `KEY=VALUE` item (or mapping) applied: a bool as
        true/false (or 1/0), an int as a whole number (`8<<20` allowed), `pdl` as a mode.
        ValueError names an unknown key or a bad value."""
        pairs = list(items.items()) if isinstance(items, Mapping) else [_split(x) for x in items]
        kinds = {f.name: f.type for f in dataclasses.fields(cls)}
        out: dict[str, object] = {}
        for key, text in pairs:
            if key not in kinds:
                raise ValueError(f"tuning has no `{key}`: its keys are {', '.join(kinds)}")
            out[key] = _value(key, kinds[key], text)
        return dataclasses.replace(base or cls(), **out)


def _split(item: str) -> tuple[str, str]:
    key, eq, value = item.partition("=")
    if not eq or not key.strip():
        raise ValueError(f"tuning item `{item}`: KEY=VALUE (e.g. merge=false, prefetch_bytes=0)")
    return key.strip(), value.strip()


def _value(key: str, kind: str, text: str) -> object:
    if not isinstance(text, str):
        return text
    t = text.strip().lower()
    if kind == "bool":
        if t in ("true", "1", "on"):
            return True
        if t in ("false", "0", "off"):
            return False
        raise ValueError(f"tuning {key}={text}: true or false")
    if kind == "int":
        a, sh, b = t.partition("<<")
        try:
            return int(a) << int(b) if sh else int(t)
        except ValueError:
            raise ValueError(f"tuning {key}={text}: a whole number (e.g. 4096, 8<<20)") from None
    return t


def field_docs() -> dict[str, str]:
    """Each `Tuning` field's docstring (the string under it in the class), by field name: what
    `fwdshim-opt --help` and the docs say of each option."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(Tuning))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
            docs[a.target.id] = " ".join(str(b.value.value).split())  # type: ignore[attr-defined]
    return docs


DEFAULT = Tuning()
"""The defaults: the measured winners."""
