"""Weights by GGUF tensor name: the stores that `fwd.weight "name"` is resolved through.

API (stable; the reference executor, the Numba runtime and the kernel tests use it):

- `WeightData(name, ggml, shape, raw)`: one tensor as gguf stores it. `ggml` is the `GgmlType`
  (`"q8_0"`, `"f32"`, ...); `shape` the logical shape in elements, outermost first (`[N, K]` rows of
  K values, `[E, N, K]` for expert stacks; GGUF's `ne` order reversed); `raw` the numpy array gguf
  holds: `float32`/`float16` of `shape` for F32/F16, `uint8` blocks `[..., N, K/32*34]` for Q8_0 (and
  the byte shape of every other quantized type).
  Cached views (computed once per `WeightData`, so a store that caches its `WeightData` caches these):
  `wd.f32` (dequantized, `float32` of `shape`), `wd.f64` (the same values in `float64`: the executor's
  GEMV operand; Q8_0/F16/BF16 values are exact in both), `wd.expert(e)` (`float64` `[N, K]` slice of an
  expert stack, dequantized alone), `wd.q8_0` (`repack_q8_0(raw)`), `wd.rows(idx)` (`float32` rows of
  the outermost axis, dequantized alone: an embedding lookup).
- `WeightStore` protocol: `get(name) -> WeightData`; raises `MissingWeight` (a `KeyError`) naming the
  tensor when the store has none of that name. Every store refuses a tensor holding an inf or NaN
  value or block scale on its first read (`nonfinite_why` says where): `DictWeights` with
  `NonFiniteWeight` (a `ValueError`), the file stores with `frontend.gguf_model.ModelError`.
- `DictWeights(mapping)`: from numpy arrays (`float32` -> F32, `float16` -> F16), `WeightData`, or
  `(raw, qtype)` pairs such as `(gguf.quants.quantize(a, Q8_0), Q8_0)`; `quantize_weight(a, "q8_0")`
  builds the same `WeightData` in one call.
- `GGUFWeights(reader_or_path)` (in `frontend.gguf_model`): the tensors of a `gguf.GGUFReader` by name.
- `dequantize(wd) -> float32` through `gguf.quants.dequantize`; `repack_q8_0(raw) -> (qs, d)`: the
  kernels' aligned layout, int8 quants `[..., N, K]` and float32 scales `[..., N, K/32]` (the f16
  scale of each 34-byte block widened exactly).

Memory: `wd.f64` of a whole model is 8 bytes per parameter (about 1.1 GB for a 135M model); it is what
makes the CPU decode loop a float64 BLAS GEMV per projection instead of a dequantization per token.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol, runtime_checkable

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from fwdshim.dialects.attributes import GgmlType, ggml_of, gguf_of

QK8_0 = 32
"""Values per Q8_0 block."""
Q8_0_BLOCK_BYTES = 34
"""Bytes per Q8_0 block: one f16 scale and 32 int8 quants."""


class MissingWeight(KeyError):
    """A weight name the store does not hold."""

    def __str__(self) -> str:
        return self.args[0] if self.args else "missing weight"


def missing(name: str, held, where: str) -> MissingWeight:
    """MissingWeight for `name`, not among the names `held` by `where` ("the store", a file's path): the
    closest held name when one is close (`weight `blk.9.attn_q.weight` is not in the store (did you mean
    `blk.0.attn_q.weight`?)`), else how many it holds."""
    import difflib

    held = list(held)
    close = difflib.get_close_matches(name, held, n=1, cutoff=0.8)
    hint = f"did you mean `{close[0]}`?" if close else f"it holds {len(held)} weight{'s' if len(held) != 1 else ''}"
    return MissingWeight(f"weight `{name}` is not in {where} ({hint})")


class NonFiniteWeight(ValueError):
    """A weight given through the API (`DictWeights`) holding an inf or NaN value or block scale
    (`nonfinite_why`): the file stores refuse theirs as `frontend.gguf_model.ModelError`."""


@dataclass(frozen=True, eq=False)
class WeightData:
    """One weight tensor as gguf stores it (see the module docstring for the fields and cached views)."""

    name: str
    ggml: GgmlType
    shape: tuple[int, ...]
    raw: np.ndarray = field(repr=False)

    @property
    def qtype(self) -> QT:
        return gguf_of(self.ggml)

    @cached_property
    def f32(self) -> np.ndarray:
        """Dequantized values, `float32` of `shape` (read-only)."""
        out = dequantize(self)
        out.flags.writeable = False
        return out

    @cached_property
    def f64(self) -> np.ndarray:
        """Dequantized values, `float64` of `shape` (read-only); exact widening of `f32`."""
        out = np.ascontiguousarray(self.f32, dtype=np.float64)
        out.flags.writeable = False
        return out

    @cached_property
    def q8_0(self) -> tuple[np.ndarray, np.ndarray]:
        """`repack_q8_0(raw)`: int8 quants `[..., N, K]`, float32 scales `[..., N, K/32]`."""
        if self.ggml != GgmlType.Q8_0:
            raise ValueError(f"weight `{self.name}` is {self.ggml.value}, not q8_0")
        return repack_q8_0(self.raw)

    @cached_property
    def _experts(self) -> dict[int, np.ndarray]:
        return {}

    def expert(self, e: int) -> np.ndarray:
        """Expert `e` of a rank-3 stack, dequantized alone: `float64` `[N, K]` (cached)."""
        if len(self.shape) != 3:
            raise ValueError(f"weight `{self.name}` of shape {list(self.shape)} is not an expert stack")
        cache = self._experts
        if e not in cache:
            part = np.asarray(dequantize_raw(self.raw[e], self.qtype), dtype=np.float64)
            part.flags.writeable = False
            cache[e] = part
        return cache[e]

    def rows(self, idx) -> np.ndarray:
        """Rows `idx` (int or index array) of the outermost axis, dequantized alone, `float32`."""
        return np.asarray(dequantize_raw(self.raw[idx], self.qtype), dtype=np.float32)


@runtime_checkable
class WeightStore(Protocol):
    """Weights by GGUF tensor name."""

    def get(self, name: str) -> WeightData:
        """The tensor `name`; raises `MissingWeight` when there is none."""
        ...


# ---------------------------------------------------------------------------------------------
# conversions


def dequantize_raw(raw: np.ndarray, qtype: QT) -> np.ndarray:
    """`gguf.quants.dequantize` of raw data, as `float32` (F32 data is returned as is, not copied).
    Non-finite scales give non-finite values without numpy's warnings (which name no tensor): the
    runner reports them by the weight's name."""
    if qtype == QT.F32:
        return np.asarray(raw, dtype=np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32)


def dequantize(wd: WeightData) -> np.ndarray:
    """The weight's values, `float32` of `wd.shape`, through gguf's own dequantizers."""
    return dequantize_raw(wd.raw, wd.qtype).reshape(wd.shape)


def repack_q8_0(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GGML Q8_0 blocks `uint8 [..., N, K/32*34]` -> (`qs int8 [..., N, K]`, `d float32 [..., N, K/32]`).

    Each 34-byte block is a little-endian f16 scale then 32 int8 quants; value = d * q."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if raw.shape[-1] % Q8_0_BLOCK_BYTES:
        raise ValueError(f"q8_0 rows of {raw.shape[-1]} bytes are not whole 34-byte blocks")
    nb = raw.shape[-1] // Q8_0_BLOCK_BYTES
    blocks = raw.reshape(*raw.shape[:-1], nb, Q8_0_BLOCK_BYTES)
    d = blocks[..., :2].copy().view("<f2")[..., 0].astype(np.float32)
    qs = np.ascontiguousarray(blocks[..., 2:]).view(np.int8).reshape(*raw.shape[:-1], nb * QK8_0)
    return qs, d


SCALE_FIELDS: dict[QT, tuple[int, ...]] = {
    QT.Q4_0: (0,), QT.Q4_1: (0, 2), QT.Q5_0: (0,), QT.Q5_1: (0, 2), QT.Q8_0: (0,),
    QT.Q2_K: (80, 82), QT.Q3_K: (108,), QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208,),
}  # fmt: skip
"""Byte offsets of each GGML block's f16 scales, by type (`ggml-common.h`: `d` and, for the `_1` types
and Q2_K/Q4_K/Q5_K, the min scale `m`/`dmin`; a K-quant's 6- or 8-bit sub-scales are integers, always
finite). A block's values are these scales times integers: they are finite exactly when these are."""


def first_nonfinite(raw: np.ndarray, qtype: QT) -> tuple[int, float, int] | None:
    """The first value of gguf data `raw` (as `WeightData.raw`) that is not finite, as `(index, value,
    field)`, or None: for F32/F16/F64 the flat index of a value (field 0); for BF16 (raw `uint16` or its
    bytes) likewise; for a block type of `SCALE_FIELDS` the flat index of a block whose f16 scale is inf
    or NaN, that scale, and which of the block's scales it is (0: `d`; 1: the min, `m` or `dmin`).
    Other types (integers, the IQ types) are not checked (None).

    Cost: one pass over the scales (a Q8_0 tensor's 2 bytes of every 34) or the values, no copy of a
    float tensor. The file stores (`frontend.gguf_model`) refuse such a tensor when it is first read:
    the kernels scale a block's integer dot by its scale and the executor dequantizes each value, so an
    inf scale (inf * 0 = NaN for a zero quant) made the CPU and the GPU disagree (a MoE router then
    picked different experts)."""
    if qtype in (QT.F32, QT.F16, QT.F64):
        values = np.asarray(raw).reshape(-1)
        bad = ~np.isfinite(values)
        if not bad.any():
            return None
        i = int(np.argmax(bad))
        return i, float(values[i]), 0
    if qtype == QT.BF16:
        words = np.ascontiguousarray(raw).view(np.uint16).reshape(-1)
        bad = (words & 0x7F80) == 0x7F80
        if not bad.any():
            return None
        i = int(np.argmax(bad))
        return i, float(np.array(int(words[i]) << 16, dtype=np.uint32).view(np.float32)), 0
    fields = SCALE_FIELDS.get(qtype)
    if fields is None:
        return None
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    blocks = np.asarray(raw).reshape(-1).view(np.uint8).reshape(-1, size)
    bad = np.zeros(len(blocks), dtype=bool)
    for at in fields:  # a f16 is inf or NaN exactly when its 5 exponent bits are all ones
        bad |= (blocks[:, at + 1] & 0x7C) == 0x7C
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    for f, at in enumerate(fields):  # the first bad block's first bad scale
        v = float(blocks[i, at : at + 2].copy().view("<f2")[0])
        if not np.isfinite(v):
            return i, v, f


def nonfinite_why(wd: WeightData, corrupt: str = "the file") -> str | None:
    """None when `wd`'s values are finite (`first_nonfinite`), else why not: the tensor (its GGUF type
    and logical shape), the first bad value's or block's row as `wd.raw` holds the rows (and expert),
    the value or scale, and that `corrupt` (what holds the tensor: "the file", "the weight") is corrupt
    — a quantizer writes finite scales and a model finite values."""
    bad = first_nonfinite(wd.raw, wd.qtype)
    if bad is None:
        return None
    i, v, fld = bad
    what = f"tensor `{wd.name}` ({wd.qtype.name} {'x'.join(map(str, wd.shape))})"
    k = wd.shape[-1] if wd.shape else 1
    if wd.qtype in (QT.F32, QT.F16, QT.F64, QT.BF16):
        per_row, item = k, "value"
        why = "a model's values are finite"
    else:
        per_row, item = k // gguf.GGML_QUANT_SIZES[wd.qtype][0], "block"
        why = "a quantizer writes finite scales and mins" if len(SCALE_FIELDS[wd.qtype]) > 1 else "a quantizer writes finite scales"
    row, j = divmod(i, per_row)
    at = f"{item} {j}" if len(wd.shape) > 1 else f"{item} {i}"
    if len(wd.shape) > 1:
        at += f" of row {row % wd.shape[-2]}"
    if len(wd.shape) > 2:  # an expert stack `[E, N, K]`
        at += f" of expert {row // wd.shape[-2]}"
    at += f" is {v}" if item == "value" else f" has a {'min' if fld else 'scale'} of {v}"
    return f"{what}: {at}; {why}, so {corrupt} is corrupt"


def logical_shape(raw: np.ndarray, qtype: QT) -> tuple[int, ...]:
    """The element shape of gguf data: the array's shape, or for block types its byte shape converted."""
    if qtype in _PLAIN:
        return tuple(raw.shape)
    return tuple(gguf.quants.quant_shape_from_byte_shape(raw.shape, qtype))


_PLAIN = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8,
          QT.I16: np.int16, QT.I32: np.int32, QT.I64: np.int64}  # fmt: skip


def quantize_weight(values: np.ndarray, ggml: GgmlType | str = GgmlType.Q8_0, name: str = "") -> WeightData:
    """`values` (float, `[..., K]`, K a multiple of the block) stored as `ggml` by gguf's own quantizer.

    Raises: ValueError when K is not a whole number of the type's blocks (gguf's `QuantError`)."""
    ggml = GgmlType(ggml)
    qtype = gguf_of(ggml)
    values = np.asarray(values, dtype=np.float32)
    if qtype in _PLAIN:
        raw = values.astype(_PLAIN[qtype])
    else:
        block = gguf.GGML_QUANT_SIZES[qtype][0]
        if values.ndim == 0 or values.shape[-1] % block:
            what = f"rows of {values.shape[-1]} values" if values.ndim else "a scalar"
            at = f"weight `{name}`: " if name else ""
            raise ValueError(f"{at}{ggml.value} stores rows of whole blocks of {block} values, not {what}")
        raw = gguf.quants.quantize(values, qtype)
    return WeightData(name, ggml, tuple(values.shape), raw)


def weight_data(name: str, value) -> WeightData:
    """A `WeightData` from an array (`float32`/`float16`), a `(raw, qtype)` pair or a `WeightData`."""
    if isinstance(value, WeightData):
        return value if value.name == name else WeightData(name, value.ggml, value.shape, value.raw)
    if isinstance(value, tuple):
        raw, qtype = value
        qtype = gguf_of(GgmlType(qtype)) if isinstance(qtype, str) else QT(qtype)
        raw = np.asarray(raw)
        return WeightData(name, ggml_of(qtype), logical_shape(raw, qtype), raw)
    arr = np.asarray(value)
    by_dtype = {np.dtype(np.float32): QT.F32, np.dtype(np.float16): QT.F16}
    if arr.dtype not in by_dtype:
        raise TypeError(
            f"weight `{name}`: a bare array must be float32 or float16, not {arr.dtype} "
            "(pass (raw, qtype) for quantized data)"
        )
    return WeightData(name, ggml_of(by_dtype[arr.dtype]), tuple(arr.shape), arr)


# ---------------------------------------------------------------------------------------------
# stores


class DictWeights:
    """Weights from a mapping of name -> array / `(raw, qtype)` / `WeightData` (see `weight_data`)."""

    def __init__(self, mapping: Mapping[str, object] | None = None, **named: object):
        items = {**(mapping or {}), **named}
        self._data = {name: weight_data(name, v) for name, v in items.items()}
        self._finite: set[str] = set()

    def get(self, name: str) -> WeightData:
        """The weight `name`; MissingWeight when there is none, NonFiniteWeight when its values or
        block scales are not all finite (checked on its first read, as the file stores do)."""
        wd = self._data.get(name)
        if wd is None:
            raise missing(name, self._data, "the store")
        if name not in self._finite:
            why = nonfinite_why(wd, "the weight")
            if why is not None:
                raise NonFiniteWeight(why)
            self._finite.add(name)
        return wd

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def names(self) -> list[str]:
        return list(self._data)
