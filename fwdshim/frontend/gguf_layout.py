"""The layout of a GGUF file, checked against the file's size before `gguf.GGUFReader` trusts it.

`GGUFReader` believes every count and length it reads: an array claiming 2^40 elements or a string
longer than the file makes it loop or allocate without end, a key or string that is not UTF-8 raises
`UnicodeDecodeError` from deep inside it, a tensor whose declared type and shape do not match its
bytes reads the neighbouring tensor's data. `scan(data)` walks the header, the metadata and the
tensor infos with `struct` (no per-element arrays), checking each as llama.cpp's `gguf_init` does:

- every count (metadata keys, tensors, array elements) and every length (strings, dimensions) fits
  in the bytes left in the file; every string (key, value, array element, tensor name) is UTF-8;
- value types are GGUF's (arrays of arrays are refused: GGUF readers do not support them);
  `general.alignment` is a UINT32 power of two; no key and no tensor name appears twice;
- a tensor has at most 4 dimensions, a known GGML type whose blocks divide its rows, and an offset
  that is a multiple of the alignment; the tensors' data, in offset order, lie one after the other
  from the start of the data section, each exactly as long as its type and shape say (padded to the
  alignment), and the last ends before the file does (with less than one alignment after it).

`check_metadata(layout)` checks the value type of every key fwdshim reads (`KEY_KINDS`).

Errors: `LayoutError` (`Truncated` for what runs past the end of the file), its message one line
without the file name (the importer prefixes it).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import gguf
import numpy as np

from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, ReaderField, ReaderTensor
from gguf.quants import quant_shape_to_byte_shape
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

MAX_DIMS = 4
"""GGML_MAX_DIMS: the most dimensions a tensor has."""
VERSIONS = (2, 3)
"""The GGUF versions `gguf.GGUFReader` reads."""

_SCALAR = {
    VT.UINT8: "B", VT.INT8: "b", VT.UINT16: "H", VT.INT16: "h", VT.UINT32: "I", VT.INT32: "i",
    VT.FLOAT32: "f", VT.BOOL: "?", VT.UINT64: "Q", VT.INT64: "q", VT.FLOAT64: "d",
}  # fmt: skip
_INTEGER = frozenset({VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.UINT64, VT.INT64})

INT, REAL, BOOL, STR, STRS, INTS, LAYERED = "int", "real", "bool", "str", "strs", "ints", "layered"
"""The value kinds of `KEY_KINDS`: a whole number, a number, true/false, a string, arrays of strings
and of whole numbers, and a whole number or an array of them, one a layer (llama.cpp's per-layer
head counts and feed-forward widths)."""

ARCHITECTURES = ("llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma", "gemma2", "gemma3")
"""The `general.architecture` values fwdshim imports (`gguf_model.read_params`): the prefixes of the keys
checked here."""

KEY_KINDS: dict[str, str] = {
    "general.architecture": STR,
    "general.alignment": INT,
    **{
        f"{arch}.{k}": kind
        for arch in ARCHITECTURES
        for k, kind in {
            **dict.fromkeys((
                "block_count", "context_length", "embedding_length", "vocab_size", "attention.key_length",
                "attention.value_length", "rope.dimension_count", "expert_count", "expert_used_count",
                "expert_feed_forward_length", "attention.sliding_window",
            ), INT),
            **dict.fromkeys(("feed_forward_length", "attention.head_count", "attention.head_count_kv"), LAYERED),
            "rope.freq_base": REAL,
            "rope.freq_base_swa": REAL,
            "attn_logit_softcapping": REAL,
            "final_logit_softcapping": REAL,
            "attention.layer_norm_rms_epsilon": REAL,
            "rope.scaling.type": STR,
            "rope.scaling.factor": REAL,
            "rope.scale_linear": REAL,
            "attention.causal": BOOL,
        }.items()
    },  # fmt: skip
    "tokenizer.ggml.model": STR,
    "tokenizer.ggml.pre": STR,
    "tokenizer.ggml.tokens": STRS,
    "tokenizer.ggml.merges": STRS,
    "tokenizer.ggml.token_type": INTS,
    "tokenizer.ggml.bos_token_id": INT,
    "tokenizer.ggml.eos_token_id": INT,
    "tokenizer.ggml.add_bos_token": BOOL,
    "tokenizer.chat_template": STR,
    "fwdshim.converted": STRS,
    "fwdshim.source": STR,
}  # fmt: skip
"""The value kind of every metadata key fwdshim reads."""

_KIND_WORDS = {
    INT: "a whole number", REAL: "a number", BOOL: "true or false", STR: "a string",
    STRS: "an array of strings", INTS: "an array of whole numbers",
    LAYERED: "a whole number or an array of them (one a layer)",
}  # fmt: skip


class LayoutError(ValueError):
    """A GGUF file whose layout cannot be trusted; `str(e)` is one line (without the file name)."""


class Truncated(LayoutError):
    """A count, length or extent that runs past the end of the file: a cut or corrupt file."""


@dataclass(frozen=True)
class Meta:
    """One metadata value: its type, the element type and length of an array, the value of a scalar
    or string (None for an array)."""

    type: VT
    item_type: VT | None = None
    count: int = 1
    value: object = None
    at: int = 0
    """Where the key starts (its length)."""
    value_at: int = 0
    """Where the value starts (after its type)."""
    strings: np.ndarray | None = field(default=None, repr=False)
    """An array of strings: where each element starts (its length), then where the last ends."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's info: GGUF's `ne` dimensions (innermost first), GGML type, offset into the data
    section, the byte size its type and shape give, and where the info starts in the file."""

    name: str
    ne: tuple[int, ...]
    type: QT
    offset: int
    n_bytes: int
    at: int = 0

    def describe(self) -> str:
        return f"{self.type.name} {'x'.join(map(str, reversed(self.ne)))}: {self.n_bytes} bytes"


@dataclass
class Layout:
    """What `scan` read: the version, the metadata by key, the tensor infos in file order, the
    alignment and where the data section starts."""

    version: int
    meta: dict[str, Meta] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    alignment: int = GGUF_DEFAULT_ALIGNMENT
    data_start: int = 0
    kv_end: int = 0
    """Where the metadata ends (the tensor infos start)."""
    infos_end: int = 0
    """Where the tensor infos end."""


def _words(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class _Cursor:
    """Reads GGUF's little- (or big-) endian fields from `data`, each checked against its end."""

    def __init__(self, data, order: str):
        self.data, self.size, self.order, self.pos = data, len(data), order, 0

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise Truncated(
                f"{what} needs {n} bytes at offset {self.pos}, past the end of the file ({self.size} bytes)"
            )

    def unpack(self, fmt: str, what: str):
        n = struct.calcsize(fmt)
        self.need(n, what)
        (v,) = struct.unpack_from(self.order + fmt, self.data, self.pos)
        self.pos += n
        return v

    def string(self, what: str) -> str:
        n = self.unpack("Q", what)
        if n > self.left():
            raise Truncated(
                f"{what}: a string of {n} bytes at offset {self.pos} runs past the end of the file "
                f"({self.size} bytes)"
            )
        raw = bytes(self.data[self.pos : self.pos + n])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise LayoutError(
                f"{what} is not UTF-8 (byte 0x{raw[e.start]:02x} at {e.start} of its {n})"
            ) from None
        self.pos += n
        return text


def _type(raw: int, what: str) -> VT:
    try:
        return VT(raw)
    except ValueError:
        raise LayoutError(f"{what} has unknown value type {raw}") from None


def _value(cur: _Cursor, key: str) -> Meta:
    what = f"metadata `{key}`"
    vt = _type(cur.unpack("I", what), what)
    at = cur.pos
    if vt in _SCALAR:
        return Meta(vt, value=cur.unpack(_SCALAR[vt], what), value_at=at)
    if vt == VT.STRING:
        return Meta(vt, value=cur.string(what), value_at=at)
    item = _type(cur.unpack("I", what), f"{what}'s array")
    n = cur.unpack("Q", what)
    if item == VT.ARRAY:
        raise LayoutError(f"{what} is an array of arrays, which GGUF readers do not support")
    least = 8 if item == VT.STRING else struct.calcsize(_SCALAR[item])
    if n * least > cur.left():
        raise Truncated(
            f"{what} claims {_words(n, item.name + ' element')}, more than the {cur.left()} bytes "
            "left in the file hold"
        )
    if item != VT.STRING:
        cur.pos += n * least
        return Meta(vt, item, n, value_at=at)
    starts = []
    for i in range(n):
        starts.append(cur.pos)
        cur.string(f"{what}[{i}]")
    starts.append(cur.pos)
    return Meta(vt, item, n, value_at=at, strings=np.array(starts, dtype=np.int64))


def _tensor_info(cur: _Cursor, i: int, alignment: int, n_keys: int = 0) -> TensorInfo:
    at = cur.pos
    name = cur.string(f"the name of tensor #{i}")
    if name.startswith(("general.", "tokenizer.")) or name in KEY_KINDS:  # a key read as a tensor: the key count is short
        raise LayoutError(
            f"tensor #{i} is named `{name}`, a metadata key: the header's count of metadata keys "
            f"({n_keys}) is wrong, so the file is corrupt"
        )
    what = f"tensor `{name}`"
    n_dims = cur.unpack("I", what)
    if n_dims > MAX_DIMS:
        raise LayoutError(f"{what} has {n_dims} dimensions (GGUF tensors have at most {MAX_DIMS})")
    ne = tuple(cur.unpack("Q", what) for _ in range(n_dims))
    raw = cur.unpack("I", what)
    offset = cur.unpack("Q", what)
    try:
        qtype = QT(raw)
        block, type_size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise LayoutError(f"{what} has unknown GGML type {raw}") from None
    if ne and ne[0] % block:
        raise LayoutError(
            f"{what} of type {qtype.name} has rows of {ne[0]} values, not whole blocks of {block}"
        )
    n = 1
    for d in ne:
        n *= d
    n_bytes = n // block * type_size
    if n_bytes > cur.size:
        raise Truncated(
            f"{what} claims {'x'.join(map(str, reversed(ne)))} values of {qtype.name}: {n_bytes} bytes, "
            f"more than the file's {cur.size}"
        )
    if offset % alignment:
        raise LayoutError(f"{what} has offset {offset}, not a multiple of the alignment {alignment}")
    return TensorInfo(name, ne, qtype, offset, n_bytes, at)


def scan(data) -> Layout:
    """The layout of the GGUF file whose bytes are `data` (bytes, mmap, memoryview), each count,
    length, string and tensor extent checked (see the module docstring). Raises: LayoutError."""
    if len(data) < 24 or bytes(data[:4]) != b"GGUF":
        raise Truncated(f"a GGUF header needs 24 bytes starting b'GGUF'; the file has {len(data)}")
    (version,) = struct.unpack_from("<I", data, 4)
    order = "<"
    if version & 0xFFFF == 0:  # written on a machine of the other byte order
        order, version = ">", struct.unpack_from(">I", data, 4)[0]
    if version not in VERSIONS:
        known = " and ".join(map(str, VERSIONS))
        raise LayoutError(f"GGUF version {version} (fwdshim reads versions {known})")
    cur = _Cursor(data, order)
    cur.pos = 8
    n_tensors, n_keys = cur.unpack("Q", "the header"), cur.unpack("Q", "the header")
    # the smallest key is 13 bytes (length, type, one byte), the smallest tensor info 24
    if n_keys * 13 > cur.left():
        raise Truncated(f"the header claims {_words(n_keys, 'metadata key')}, more than the file holds")
    if n_tensors * 24 > cur.left():
        raise Truncated(f"the header claims {_words(n_tensors, 'tensor')}, more than the file holds")
    layout = Layout(version)
    for i in range(n_keys):
        at = cur.pos
        key = cur.string(f"metadata key #{i}")
        if key in layout.meta:
            raise LayoutError(f"metadata `{key}` appears twice")
        layout.meta[key] = dataclasses.replace(_value(cur, key), at=at)
    layout.kv_end = cur.pos
    align = layout.meta.get("general.alignment")
    if align is not None:
        if align.type != VT.UINT32 or align.value == 0 or align.value & (align.value - 1):
            raise LayoutError(f"`general.alignment` = {align.value!r} is not a UINT32 power of two")
        layout.alignment = align.value
    names: set[str] = set()
    for i in range(n_tensors):
        t = _tensor_info(cur, i, layout.alignment, n_keys)
        if t.name in names:
            raise LayoutError(f"tensor `{t.name}` appears twice")
        names.add(t.name)
        layout.tensors.append(t)
    layout.infos_end = cur.pos
    layout.data_start = -(-cur.pos // layout.alignment) * layout.alignment
    _check_extents(layout, len(data))
    return layout


def _misplaced(layout: Layout, size: int) -> tuple[TensorInfo, int] | None:
    """The one tensor whose offset alone breaks the data's layout in the file's tensor order — every
    other tensor where the ones listed before it end — with where it belongs; None when no tensor or
    several do. A last tensor counts only with an offset past the end of the file (elsewhere the size
    of the tensor before it may be what is wrong)."""
    a, at, bad = layout.alignment, 0, []
    for t in layout.tensors:
        if t.offset != at:
            bad.append((t, at))
        at += -(-t.n_bytes // a) * a
    if len(bad) != 1:
        return None
    t, want = bad[0]
    if t is layout.tensors[-1] and layout.data_start + t.offset < size:
        return None
    return t, want


def _check_extents(layout: Layout, size: int) -> None:
    """The tensors' data, in offset order, one after the other, each of the size its type and shape
    give (padded to the alignment), the last ending inside the file. A tensor whose offset alone is
    wrong (`_misplaced`) is named, wherever in the offset order it falls."""
    a, at, before = layout.alignment, 0, None
    for t in sorted(layout.tensors, key=lambda t: t.offset):
        if t.offset != at:
            if (m := _misplaced(layout, size)) is not None:
                u, want = m
                where = (
                    f", past the end of the file ({max(0, size - layout.data_start)} bytes of data)"
                    if layout.data_start + u.offset >= size
                    else f", where the tensors listed before it end at {want}"
                )
                raise LayoutError(
                    f"tensor `{u.name}` ({u.describe()}) starts {u.offset} bytes into the data section{where}: "
                    "its offset is wrong"
                )
            if before is None:
                raise LayoutError(
                    f"tensor `{t.name}` starts {t.offset} bytes into the data section; "
                    "the first tensor starts at 0"
                )
            gap = t.offset - before.offset
            stray = [u for u in layout.tensors if layout.data_start + u.offset >= size]
            if stray and gap > before.n_bytes:  # a hole here, and a tensor out past the file: its offset
                u = max(stray, key=lambda u: u.offset)
                raise LayoutError(
                    f"tensor `{u.name}` ({u.describe()}) starts {u.offset} bytes into the data section, past "
                    f"the end of the file ({max(0, size - layout.data_start)} bytes of data): its offset is wrong"
                )
            if gap < before.n_bytes:
                raise LayoutError(
                    f"tensor `{before.name}` ({before.describe()}) overlaps the next tensor `{t.name}`, "
                    f"{gap} bytes after its start: its type or shape does not match its data"
                )
            raise LayoutError(
                f"tensor `{before.name}` ({before.describe()}) has {gap} bytes of data before the next "
                f"tensor `{t.name}`: its type or shape does not match its data"
            )
        at = t.offset + -(-t.n_bytes // a) * a
        before = t
    if before is None:
        return
    end = layout.data_start + before.offset + before.n_bytes
    if end > size:
        raise Truncated(
            f"tensor `{before.name}` ({before.describe()}) runs past the end of the file"
        )
    if size - end >= a:
        raise LayoutError(
            f"tensor `{before.name}` ({before.describe()}) is followed by {size - end} bytes no tensor "
            "accounts for: its type or shape does not match its data"
        )


def check_metadata(layout: Layout) -> None:
    """Every key fwdshim reads (`KEY_KINDS`) holds a value of its kind. Raises: LayoutError naming
    the key."""
    for key, kind in KEY_KINDS.items():
        m = layout.meta.get(key)
        if m is None or _is_kind(m, kind):
            continue
        shown = f"an array of {_words(m.count, m.item_type.name)}" if m.type == VT.ARRAY else repr(m.value)
        raise LayoutError(f"`{key}` = {shown} is not {_KIND_WORDS[kind]}")


def _is_kind(m: Meta, kind: str) -> bool:
    if kind == INT or (kind == LAYERED and m.type != VT.ARRAY):
        return m.type in _INTEGER
    if kind == REAL:
        return m.type in _INTEGER or m.type in (VT.FLOAT32, VT.FLOAT64)
    if kind == BOOL:
        return m.type == VT.BOOL
    if kind == STR:
        return m.type == VT.STRING
    if m.type != VT.ARRAY:
        return False
    # an empty array's element type is whatever its writer chose
    return m.count == 0 or (m.item_type == VT.STRING if kind == STRS else m.item_type in _INTEGER)


# ---------------------------------------------------------------------------------------------
# gguf's reader over a checked layout


class LayoutReader(gguf.GGUFReader):
    """`gguf.GGUFReader` whose metadata fields and tensors are built from a checked `Layout` instead
    of gguf's walk, which makes two NumPy views per array element (2 million elements: 70 s and
    1.4 GB) and eight per tensor (100,000 empty tensors in 2.4 MB: 17 s).

    The fields hold what gguf's do (`types`, `contents()`), built at once: an array of scalars is
    one part holding all its values (`data` indexes it once); an array of strings is a lazy
    sequence of parts (`_StringParts`), `data` a `range` over its strings' byte parts."""

    def __init__(self, path, layout: Layout):
        self._layout = layout
        super().__init__(path)

    def _build_fields(self, offs: int, count: int) -> int:
        for key, m in self._layout.meta.items():
            self._push_field(self._field(key, m), skip_sum=True)
        return self._layout.kv_end

    def _field(self, key: str, m: Meta) -> ReaderField:
        klen, kdata = self._get_str(m.at)
        parts: list = [klen, kdata, self._get(m.value_at - 4, np.uint32)]
        if m.type == VT.STRING:
            return ReaderField(m.at, key, [*parts, *self._get_str(m.value_at)], [4], [m.type])
        if m.type != VT.ARRAY:
            value = self._get(m.value_at, self.gguf_scalar_to_np[m.type])
            return ReaderField(m.at, key, [*parts, value], [3], [m.type])
        parts += [self._get(m.value_at, np.uint32), self._get(m.value_at + 4, np.uint64)]
        types = [m.type] + ([m.item_type] if m.count else [])  # gguf's: no element type when empty
        if m.item_type != VT.STRING:
            values = self._get(m.value_at + 12, self.gguf_scalar_to_np[m.item_type], m.count)
            return ReaderField(m.at, key, [*parts, values], [5], types)
        strings = _StringParts(parts, self, m.strings)
        return ReaderField(m.at, key, strings, range(6, 6 + 2 * m.count, 2), types)


    def _build_tensor_info(self, offs: int, count: int) -> tuple[int, list[ReaderField]]:
        return self._layout.infos_end, []

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        self._bytes = self.data.view(np.ndarray)
        self.tensors = [self._tensor(t, start_offs) for t in self._layout.tensors]

    def _tensor(self, t: TensorInfo, start: int) -> ReaderTensor:
        """gguf's `ReaderTensor` of `t` (its `field` names the tensor and holds no parts)."""
        n_elements = 1
        for d in t.ne:
            n_elements *= d
        n, dims, item = n_elements, tuple(reversed(t.ne)), _ITEM_TYPES.get(t.type)
        if item is None:  # a block type: its bytes, rows of whole blocks
            item, n, dims = np.uint8, t.n_bytes, quant_shape_to_byte_shape(dims, t.type)
        at = start + t.offset
        if self.byte_order == "I":  # gguf's _get, less its memmap slice per call
            data = self._bytes[at : at + t.n_bytes].view(item).reshape(dims)
        else:
            data = self._get(at, item, n).reshape(dims)
        field = ReaderField(t.at, t.name, [], [], [])
        return ReaderTensor(t.name, t.type, np.array(t.ne, dtype=np.uint64), n_elements=n_elements,
                            n_bytes=t.n_bytes, data_offset=at, data=data, field=field)  # fmt: skip


_ITEM_TYPES = {
    QT.F16: np.float16, QT.F32: np.float32, QT.F64: np.float64, QT.I8: np.int8, QT.I16: np.int16,
    QT.I32: np.int32, QT.I64: np.int64,
}  # fmt: skip
"""The GGML types gguf's reader gives as arrays of values (every other as the bytes of its blocks)."""


class _StringParts(Sequence):
    """The parts of an array of strings as gguf lays them out (`head`, then each string's length and
    bytes), each made when indexed."""

    def __init__(self, head: list, reader: LayoutReader, starts: np.ndarray):
        self.head, self.reader, self.starts = head, reader, starts
        self.view = memoryview(reader.data)

    def __len__(self) -> int:
        return len(self.head) + 2 * (len(self.starts) - 1)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if i < len(self.head):
            return self.head[i]
        k, is_bytes = divmod(i - len(self.head), 2)
        at = int(self.starts[k])
        if not is_bytes:
            return self.reader._get(at, np.uint64)
        return self.view[at + 8 : int(self.starts[k + 1])]
