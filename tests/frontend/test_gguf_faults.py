"""Bad GGUF files (issue 10, items 1 and 2): each is one line naming the file (and the key or
tensor), exit status 1, for `fwdshim import` and `fwdshim run` alike; nothing hangs, nothing is
silently wrong, no library warning reaches the terminal.

`tests/cases/gguf_*.gguf` are the files found by testing (a 2-layer d-64 llama with one field
changed); beside each kind a sibling of our own, a byte edit or a rewrite of a tiny seeded model.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
import time
import warnings
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from fwdshim.frontend.export import byte_vocab, copy_metadata, random_llama, write_llama
from fwdshim.frontend.gguf_layout import LayoutReader, scan
from fwdshim.frontend.gguf_model import LlamaParams, open_gguf
from fwdshim.tools import cli

CASES = Path(__file__).resolve().parents[1] / "cases"
TINY = LlamaParams(n_layer=2, d=64, ff=96, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                   vocab=262, context_length=256)  # fmt: skip
MOE = LlamaParams(n_layer=1, d=64, ff=64, h=4, kv=2, hd=16, rope_dim=16, rope_base=10000.0, eps=1e-5,
                  vocab=262, n_expert=4, top_k=2)  # fmt: skip
MERGES = [("a", "b"), ("ab", "c"), ("Ġ", "t"), ("h", "e"), ("Ġt", "he")]
BIG = 1 << 40

# file -> (the error after `fwdshim: error: FILE: ` for import, and for run; None: it succeeds)
CASE_ERRORS = {
    "gguf_hang_array_length": "truncated or corrupt GGUF file of 90080 bytes (metadata `tokenizer.ggml.token_type` "
                              "claims 1099511627776 UINT8 elements, more than the 86837 bytes left in the file hold)",
    "gguf_crash_tokens_elem_array": "metadata `tokenizer.ggml.tokens` is an array of arrays, which GGUF readers do "
                                    "not support",
    "gguf_hang_block_count": "`llama.block_count` = 4294967295, but the file holds tensors of 2 blocks (blk.0 to blk.1)",
    "gguf_internal_arch_utf8": "metadata `general.architecture` is not UTF-8 (byte 0xff at 2 of its 5)",
    "gguf_internal_token_utf8": "metadata `tokenizer.ggml.tokens`[64] is not UTF-8 (byte 0xff at 0 of its 1)",
    "gguf_internal_bos_string": "`tokenizer.ggml.bos_token_id` = 'x' is not a whole number",
    "gguf_silent_block_count1": "`llama.block_count` = 1, but the file holds tensors of 2 blocks (blk.0 to blk.1)",
    "gguf_silent_tokens200": "`tokenizer.ggml.tokens` holds 200 tokens, but `llama.vocab_size` = 262",
    "gguf_silent_tensor_type_attn_norm_bf16": "tensor `blk.0.attn_norm.weight` (BF16 64: 128 bytes) has 256 bytes "
                                              "of data before the next tensor `blk.0.attn_q.weight`: its type or "
                                              "shape does not match its data",
}  # fmt: skip
RUN_ONLY = {
    "gguf_warnings_attn_norm_inf": "tensor `blk.0.attn_norm.weight` (F32 64): value 5 is inf; a model's values "
                                   "are finite, so the file is corrupt",
}  # fmt: skip


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FWDSHIM_TRACEBACK", raising=False)


def argv(command: str, path: Path, tmp_path: Path) -> list[str]:
    if command == "import":
        return ["import", str(path), "-o", str(tmp_path / "step.mlir")]
    return ["run", "--model", str(path), "--prompt", "hi", "--device", "cpu", "--max-tokens", "2"]


def one_line(capsys, args: list[str], path: Path, why: str | None) -> None:
    """`fwdshim args` exits 1 with exactly `fwdshim: error: PATH: WHY` (or 0 when `why` is None), and
    no warning is raised on the way (numpy's RuntimeWarning lines would reach the terminal)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = cli.main(args)
    err = capsys.readouterr().err
    assert [str(w.message) for w in caught] == []
    if why is None:
        assert rc == 0, err
        return
    assert (rc, err) == (1, f"fwdshim: error: {path}: {why}\n")


@pytest.mark.parametrize("command", ["import", "run"])
@pytest.mark.parametrize("case", sorted(CASE_ERRORS) + sorted(RUN_ONLY))
def test_case_file_is_one_line(tmp_path, capsys, case, command):
    path = CASES / f"{case}.gguf"
    why = CASE_ERRORS.get(case) or (RUN_ONLY[case] if command == "run" else None)
    one_line(capsys, argv(command, path, tmp_path), path, why)


# ---------------------------------------------------------------------------------------------
# hyperparameters the kernels cannot run: refused at import, naming the key (they imported, then
# `run` failed in fwd-legalize with a line per refused op naming the cached step's .mlir)

UNRUNNABLE = {
    "kv heads past heads": (dataclasses.replace(TINY, kv=8),
                            "`llama.attention.head_count_kv` = 8 > `llama.attention.head_count` = 4: "
                            "more key/value heads than query heads"),
    "uneven groups": (dataclasses.replace(TINY, d=96, h=6, kv=4),
                      "`llama.attention.head_count` = 6 is not a multiple of `llama.attention.head_count_kv` = 4: "
                      "the query heads do not group evenly over the key/value heads"),
    "partial rotary": (dataclasses.replace(TINY, rope_dim=8),
                       "`llama.rope.dimension_count` = 8 but heads are 16 wide: "
                       "partial rotary embeddings are not supported"),
}  # fmt: skip


@pytest.mark.parametrize("command", ["import", "run"])
@pytest.mark.parametrize("case", sorted(UNRUNNABLE))
def test_unrunnable_hyperparameters_are_one_line_at_import(tmp_path, capsys, case, command):
    params, why = UNRUNNABLE[case]
    path = write_llama(tmp_path / "m.gguf", params, random_llama(params, seed=11), vocab=byte_vocab(MERGES))
    one_line(capsys, argv(command, path, tmp_path), path, why)
    assert not (tmp_path / "step.mlir").exists()


# ---------------------------------------------------------------------------------------------
# siblings: byte edits and rewrites of a tiny model of our own


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    w = random_llama(TINY, seed=10)
    w["token_embd.weight"][-1] = 0.0  # the stop token never wins: the run goes its full length
    return write_llama(tmp_path_factory.mktemp("good") / "good.gguf", TINY, w,
                       vocab=byte_vocab(MERGES))  # fmt: skip


def _value_at(data: bytes, key: str) -> int:
    """The offset of metadata `key`'s value type in GGUF bytes `data`."""
    k = key.encode()
    return data.index(struct.pack("<Q", len(k)) + k) + 8 + len(k)


def _info_at(data: bytes, name: str) -> int:
    """The offset of tensor `name`'s dimension count in its tensor info."""
    return _value_at(data, name)


def _edit(src: Path, dst: Path, *edits: tuple[int, bytes]) -> Path:
    data = bytearray(src.read_bytes())
    for at, new in edits:
        data[at : at + len(new)] = new
    dst.write_bytes(bytes(data))
    return dst


def _rewrite(src: Path, dst: Path, *, kv=None, drop=(), add=None, types=None) -> Path:
    """A copy of `src` with metadata `kv` (key -> (value, type[, element type])) set, keys `drop`
    removed, tensors `add`
    (name -> float32 array) added and the tensor types `types` (name -> type) declared, their data
    left as it was."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, "llama")
    copy_metadata(r, w, skip=tuple(kv or ()) + tuple(drop))
    for k, (v, t, *sub) in (kv or {}).items():
        w.add_key_value(k, v, t, sub[0] if sub else None)
    for t in r.tensors:
        if t.name in (types or {}):  # the same bytes under another (unquantized) type
            w.add_tensor(t.name, np.asarray(t.data), raw_shape=tuple(reversed(t.shape.tolist())),
                         raw_dtype=types[t.name])  # fmt: skip
        else:
            w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    for name, a in (add or {}).items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def _siblings(good: Path, tmp: Path) -> dict[str, tuple[Path, str | None, str | None]]:
    """name -> (file, the import error, the run error)."""
    data = good.read_bytes()
    size = len(data)
    out: dict[str, tuple[Path, str | None, str | None]] = {}

    def both(name: str, path: Path, why: str) -> None:
        out[name] = (path, why, why)

    # lengths and counts past the file's size
    at = _value_at(data, "general.name") + 4
    both("string length", _edit(good, tmp / "strlen.gguf", (at, struct.pack("<Q", BIG))),
         f"truncated or corrupt GGUF file of {size} bytes (metadata `general.name`: a string of {BIG} bytes at "
         f"offset {at + 8} runs past the end of the file ({size} bytes))")
    both("tensor count", _edit(good, tmp / "count.gguf", (8, struct.pack("<Q", BIG))),
         f"truncated or corrupt GGUF file of {size} bytes (the header claims {BIG} tensors, more than the file holds)")
    n_keys = len(gguf.GGUFReader(good).fields) - 3  # less GGUF.version, tensor_count, kv_count
    for short in (0, n_keys - 1):  # its first or its last key read as a tensor: it said "has 8 dimensions"
        first = "general.architecture" if short == 0 else list(gguf.GGUFReader(good).fields)[-1]
        both(f"key count {short}", _edit(good, tmp / f"keys{short}.gguf", (16, struct.pack("<Q", short))),
             f"tensor #0 is named `{first}`, a metadata key: the header's count of metadata keys ({short}) is "
             "wrong, so the file is corrupt")
    at = _info_at(data, "blk.1.ffn_down.weight") + 4 + 8
    both("tensor dims", _edit(good, tmp / "dims.gguf", (at, struct.pack("<Q", BIG))),
         f"truncated or corrupt GGUF file of {size} bytes (tensor `blk.1.ffn_down.weight` claims {BIG}x96 values "
         f"of Q8_0: {BIG * 96 // 32 * 34} bytes, more than the file's {size})")
    # element and value types GGUF readers do not read
    at = _value_at(data, "tokenizer.ggml.merges") + 4
    both("merges of arrays", _edit(good, tmp / "nested.gguf", (at, struct.pack("<I", VT.ARRAY))),
         "metadata `tokenizer.ggml.merges` is an array of arrays, which GGUF readers do not support")
    at = _value_at(data, "general.name")
    both("unknown value type", _edit(good, tmp / "vtype.gguf", (at, struct.pack("<I", 77))),
         "metadata `general.name` has unknown value type 77")
    # hyperparameters bounded by the tensors before use
    both("block count 3", _rewrite(good, tmp / "blocks3.gguf", kv={"llama.block_count": (3, VT.UINT32)}),
         "`llama.block_count` = 3, but the file holds tensors of 2 blocks (blk.0 to blk.1)")
    both("block count 2^40", _rewrite(good, tmp / "blocksbig.gguf", kv={"llama.block_count": (BIG, VT.UINT64)}),
         f"`llama.block_count` = {BIG}, but the file holds tensors of 2 blocks (blk.0 to blk.1)")
    wide = _rewrite(good, tmp / "wide.gguf", kv={"llama.attention.key_length": (BIG, VT.UINT64),
                                                 "llama.attention.value_length": (BIG, VT.UINT64)},
                    drop=("llama.rope.dimension_count",))  # a rope as wide as the head: 2^39 frequencies
    both("head width 2^40", wide, f"`llama.attention.key_length` = {BIG} is wider than any tensor of the file "
                                  "(the widest dimension is 262)")
    # strings that are not UTF-8
    at = _info_at(data, "blk.0.attn_q.weight") - len("blk.0.attn_q.weight")
    both("tensor name", _edit(good, tmp / "tname.gguf", (at, b"\xfe")),
         "the name of tensor #2 is not UTF-8 (byte 0xfe at 0 of its 19)")
    at = _value_at(data, "tokenizer.ggml.merges") + 4 + 4 + 8 + 8
    both("merge", _edit(good, tmp / "merge.gguf", (at, b"\xc3")),
         "metadata `tokenizer.ggml.merges`[0] is not UTF-8 (byte 0xc3 at 0 of its 3)")
    key = "tokenizer.ggml.pre"
    at = _value_at(data, key) - len(key)
    i = list(gguf.GGUFReader(good).fields).index(key) - 3  # after GGUF.version, tensor_count, kv_count
    both("key", _edit(good, tmp / "key.gguf", (at, b"\x80")), f"metadata key #{i} is not UTF-8 (byte 0x80 at 0 of its 18)")
    # metadata of the wrong type
    both("add_bos string", _rewrite(good, tmp / "addbos.gguf", kv={"tokenizer.ggml.add_bos_token": ("yes", VT.STRING)}),
         "`tokenizer.ggml.add_bos_token` = 'yes' is not true or false")
    both("tokens of ints", _rewrite(good, tmp / "tokints.gguf", kv={"tokenizer.ggml.tokens": ([1, 2, 3], VT.ARRAY, VT.INT32)}),
         "`tokenizer.ggml.tokens` = an array of 3 INT32s is not an array of strings")
    both("rope base string", _rewrite(good, tmp / "base.gguf", kv={"llama.rope.freq_base": ("1e4", VT.STRING)}),
         "`llama.rope.freq_base` = '1e4' is not a number")
    # per-layer hyperparameters (llama.cpp's arrays, one value a layer): all equal, they are that value
    out["kv heads a layer"] = (_rewrite(good, tmp / "kvarr.gguf", kv={"llama.attention.head_count_kv": ([2, 2], VT.ARRAY, VT.INT32)}), None, None)
    out["ff a layer"] = (_rewrite(good, tmp / "ffarr.gguf", kv={"llama.feed_forward_length": ([96, 96], VT.ARRAY, VT.UINT32)}), None, None)
    both("kv heads differ", _rewrite(good, tmp / "kvdiff.gguf", kv={"llama.attention.head_count_kv": ([2, 4], VT.ARRAY, VT.INT32)}),
         "`llama.attention.head_count_kv` differs between layers (2, 4): fwdshim builds every layer alike")
    both("heads not one a layer", _rewrite(good, tmp / "h3.gguf", kv={"llama.attention.head_count": ([4, 4, 4], VT.ARRAY, VT.INT32)}),
         "`llama.attention.head_count` holds 3 values, one a layer, for 2 layers")
    both("ff of strings", _rewrite(good, tmp / "ffstr.gguf", kv={"llama.feed_forward_length": (["96", "96"], VT.ARRAY, VT.STRING)}),
         "`llama.feed_forward_length` = an array of 2 STRINGs is not a whole number or an array of them (one a layer)")
    # tensors the metadata does not account for
    both("unused tensor", _rewrite(good, tmp / "extra.gguf", add={"token_embd_norm.weight": np.ones(64, np.float32)}),
         "tensor `token_embd_norm.weight` is not one the llama step of a dense model reads (fwdshim would run "
         "the model without it)")
    # a vocabulary longer than the embedding's rows
    r = gguf.GGUFReader(good)
    tokens = r.fields["tokenizer.ggml.tokens"].contents() + ["zz"]
    types = r.fields["tokenizer.ggml.token_type"].contents() + [1]
    both("263 tokens", _rewrite(good, tmp / "tok263.gguf", kv={"tokenizer.ggml.tokens": (tokens, VT.ARRAY, VT.STRING),
                                                                "tokenizer.ggml.token_type": (types, VT.ARRAY, VT.INT32)}),
         "`tokenizer.ggml.tokens` holds 263 tokens, but `llama.vocab_size` = 262")
    short = {"tokenizer.ggml.tokens": (tokens[:200], VT.ARRAY, VT.STRING),
             "tokenizer.ggml.token_type": (types[:200], VT.ARRAY, VT.INT32)}  # fmt: skip
    both("200 tokens, no vocab_size", _rewrite(good, tmp / "tok200.gguf", kv=short, drop=("llama.vocab_size",)),
         "tensor `token_embd.weight` has shape 262x64, expected vocab x d = 200x64")
    # a tensor's type or shape that does not match its bytes
    both("last tensor F16", _rewrite(good, tmp / "lastf16.gguf", types={"output_norm.weight": QT.F16}),
         "tensor `output_norm.weight` (F16 64: 128 bytes) is followed by 128 bytes no tensor accounts for: its "
         "type or shape does not match its data")
    at = _info_at(data, "blk.1.ffn_norm.weight") + 4
    both("shape halved", _edit(good, tmp / "half.gguf", (at, struct.pack("<Q", 32))),
         "tensor `blk.1.ffn_norm.weight` (F32 32: 128 bytes) has 256 bytes of data before the next tensor "
         "`blk.1.ffn_gate.weight`: its type or shape does not match its data")
    at = _info_at(data, "blk.0.ffn_norm.weight") + 4 + 8
    both("type widened", _edit(good, tmp / "f64.gguf", (at, struct.pack("<I", QT.F64))),
         "tensor `blk.0.ffn_norm.weight` (F64 64: 512 bytes) overlaps the next tensor `blk.0.ffn_gate.weight`, "
         "256 bytes after its start: its type or shape does not match its data")
    at = _info_at(data, "blk.0.attn_q.weight") + 4 + 2 * 8 + 4  # n_dims, two dims, type: its offset
    both("offset past the end", _edit(good, tmp / "toff.gguf", (at, struct.pack("<Q", 10**12))),
         "tensor `blk.0.attn_q.weight` (Q8_0 64x64: 4352 bytes) starts 1000000000000 bytes into the data section, "
         "past the end of the file (84384 bytes of data): its offset is wrong")  # it blamed the tensor before it
    at = _info_at(data, "token_embd.weight") + 4 + 2 * 8 + 4  # the first tensor's offset: it blamed the second
    both("first offset past the end", _edit(good, tmp / "t0off.gguf", (at, struct.pack("<Q", 2**40))),
         "tensor `token_embd.weight` (Q8_0 262x64: 17816 bytes) starts 1099511627776 bytes into the data section, "
         "past the end of the file (84384 bytes of data): its offset is wrong")
    at = _info_at(data, "blk.0.attn_k.weight") + 4 + 2 * 8 + 4  # moved onto a later tensor, inside the file
    both("offset inside the file", _edit(good, tmp / "tmidoff.gguf", (at, struct.pack("<Q", 32768))),
         "tensor `blk.0.attn_k.weight` (Q8_0 32x64: 2176 bytes) starts 32768 bytes into the data section, where "
         "the tensors listed before it end at 22432: its offset is wrong")
    # NaN or inf in a Q8_0 scale (a later block's too), in an F32 value: the run refuses the weight when it
    # is read, naming it, the row and the block, before either path computes with it (it ran, then named
    # the weight only if the logits came out not finite: an inf router scale ran on, CPU and GPU apart)
    info = next(t for t in r.tensors if t.name == "blk.1.ffn_down.weight")
    out["NaN scale"] = (_edit(good, tmp / "nan.gguf", (info.data_offset, struct.pack("<e", np.nan))), None,
                        "tensor `blk.1.ffn_down.weight` (Q8_0 64x96): block 0 of row 0 has a scale of nan; a "
                        "quantizer writes finite scales, so the file is corrupt")  # fmt: skip
    at = info.data_offset + (96 // 32 * 5 + 2) * 34  # row 5, its third block
    out["inf scale"] = (_edit(good, tmp / "inf.gguf", (at, struct.pack("<e", -np.inf))), None,
                        "tensor `blk.1.ffn_down.weight` (Q8_0 64x96): block 2 of row 5 has a scale of -inf; a "
                        "quantizer writes finite scales, so the file is corrupt")  # fmt: skip
    info = next(t for t in r.tensors if t.name == "output_norm.weight")
    out["inf norm value"] = (_edit(good, tmp / "infnorm.gguf", (info.data_offset + 4 * 7, struct.pack("<f", np.inf))),
                             None, "tensor `output_norm.weight` (F32 64): value 7 is inf; a model's values "
                             "are finite, so the file is corrupt")  # fmt: skip
    return out


def test_siblings_are_one_line(tmp_path, capsys, good):
    for command in ("import", "run"):
        for name, (path, on_import, on_run) in _siblings(good, tmp_path).items():
            why = on_import if command == "import" else on_run
            try:
                one_line(capsys, argv(command, path, tmp_path), path, why)
            except AssertionError as e:
                raise AssertionError(f"{name} ({command}): {e}") from None


def test_good_model_runs_and_its_layout_is_the_readers(tmp_path, capsys, good):
    one_line(capsys, argv("run", good, tmp_path), good, None)
    with good.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        layout = scan(data)
    r = gguf.GGUFReader(good)
    assert layout.data_start == r.data_offset
    assert [(t.name, t.type, layout.data_start + t.offset, t.n_bytes) for t in layout.tensors] == [
        (t.name, t.tensor_type, t.data_offset, t.n_bytes) for t in r.tensors
    ]
    assert {k: (m.type, m.count) for k, m in layout.meta.items()} == {
        k: (f.types[0], len(f.contents()) if f.types[0] == VT.ARRAY else 1)
        for k, f in r.fields.items() if not k.startswith("GGUF.")
    }  # fmt: skip
    # the reader fwdshim opens holds what gguf's holds
    ours = open_gguf(good)
    assert type(ours) is LayoutReader and list(ours.fields) == list(r.fields)
    for key, f in r.fields.items():
        assert (ours.fields[key].offset, ours.fields[key].types) == (f.offset, f.types), key
        assert ours.fields[key].contents() == f.contents(), key
    assert len(ours.fields["tokenizer.ggml.tokens"].data) == 262
    def tensors(reader):
        return [(t.name, t.tensor_type, t.shape.tolist(), t.n_elements, t.n_bytes, t.data_offset, t.data.dtype,
                 t.data.shape, t.data.tobytes()) for t in reader.tensors]  # fmt: skip

    assert tensors(ours) == tensors(r)


def test_a_long_array_is_read_at_once(tmp_path):
    """gguf's reader makes two NumPy views per array element (2 million: 70 s, 1.4 GB); the fields of
    `LayoutReader` hold an array of scalars as one part and make a string's parts when read."""
    n = 1 << 21
    key, words = b"big.array", [b"a", b"\xc3\xa9", b""]
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", VT.ARRAY, VT.UINT8, n) + bytes(range(256)) * (n // 256)
    kv += struct.pack("<Q", 5) + b"words" + struct.pack("<IIQ", VT.ARRAY, VT.STRING, len(words))
    kv += b"".join(struct.pack("<Q", len(w)) + w for w in words)
    path = tmp_path / "long.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv)
    t0 = time.perf_counter()
    r = open_gguf(path)
    values = r.fields["big.array"].contents()
    assert time.perf_counter() - t0 < 10
    assert len(values) == n and values[:3] == [0, 1, 2] and values[-1] == 255
    assert r.fields["words"].contents() == ["a", "é", ""] and len(r.fields["words"].data) == 3


def test_a_cached_sidecar_does_not_vouch_for_its_source(tmp_path, capsys):
    """A source changed in place (same size and mtime) after its converted copy was cached is still
    checked: the copy was written by whatever fwdshim ran then."""
    w = random_llama(TINY, seed=11)
    src = write_llama(tmp_path / "src.gguf", TINY, w, types={"output_norm.weight": QT.F16},
                      vocab=byte_vocab(MERGES))  # fmt: skip
    one_line(capsys, argv("run", src, tmp_path), src, None)  # writes the sidecar
    st = src.stat()
    data = src.read_bytes()
    _edit(src, src, (_value_at(data, "general.architecture") + 4 + 8 + 1, b"\xff"))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    one_line(capsys, argv("run", src, tmp_path), src,
             "metadata `general.architecture` is not UTF-8 (byte 0xff at 1 of its 5)")  # fmt: skip


@pytest.mark.parametrize(
    "value, why",
    [(np.inf, "(F32 4x64x64): value 5 of row 3 of expert 1 is inf; a model's values are finite, so the file is corrupt"),
     (np.nan, "(F32 4x64x64): value 5 of row 3 of expert 1 is nan; a model's values are finite, so the file is corrupt"),
     (1e7, "holds a value of 1e+07, past what the f16 scale of a Q8_0 block holds")],
)  # fmt: skip
def test_a_weight_requantized_to_q8_0_holds_what_q8_0_holds(tmp_path, capsys, value, why):
    """A mixture's weights are requantized to Q8_0: a value past the f16 block scale is refused naming
    the tensor (llama.cpp's quantizer refuses such data), with no numpy warning; NaN or inf first as any
    non-finite weight is (`gguf_model.nonfinite_why`: the file is corrupt, whatever it is converted to)."""
    w = random_llama(MOE, seed=12)
    w["token_embd.weight"][-1] = 0.0
    w["blk.0.ffn_up_exps.weight"][1, 3, 5] = value
    path = write_llama(tmp_path / "moe.gguf", MOE, w, types={"blk.0.ffn_up_exps.weight": QT.F32},
                       vocab=byte_vocab(MERGES))  # fmt: skip
    for command in ("import", "run"):
        one_line(capsys, argv(command, path, tmp_path), path, f"tensor `blk.0.ffn_up_exps.weight` {why}")
    w["blk.0.ffn_up_exps.weight"][1, 3, 5] = 6e4  # f16's largest is 65504, a Q8_0 scale 1/127 of it
    fine = write_llama(tmp_path / "fine.gguf", MOE, w, types={"blk.0.ffn_up_exps.weight": QT.F32},
                       vocab=byte_vocab(MERGES))  # fmt: skip
    one_line(capsys, argv("import", fine, tmp_path), fine, None)


def test_a_special_token_past_the_vocabulary_is_a_warning(tmp_path, capsys, good):
    """llama.cpp runs such a file ("bad special token", its default id instead): fwdshim runs it
    without that token, saying so once on stderr."""
    path = _rewrite(good, tmp_path / "eos.gguf", kv={"tokenizer.ggml.eos_token_id": (999, VT.UINT32)})
    assert cli.main(argv("run", path, tmp_path)) == 0
    out, err = capsys.readouterr()
    assert out.startswith("hi")
    assert err.splitlines()[0] == (
        f"fwdshim: warning: {path}: `tokenizer.ggml.eos_token_id` = 999 is not a token id (the vocabulary "
        "holds 262): running without it"
    )
    assert len(err.splitlines()) == 2 and err.splitlines()[1].startswith("fwdshim: 2 tokens")


def test_per_layer_arrays_read_as_their_value(tmp_path, good):
    """llama.cpp's per-layer arrays (head counts, feed-forward width), all equal: the same
    hyperparameters as the scalar file's."""
    from fwdshim.frontend.gguf_model import read_params

    kv = {"llama.attention.head_count": ([4, 4], VT.ARRAY, VT.UINT32),
          "llama.attention.head_count_kv": ([2, 2], VT.ARRAY, VT.INT32),
          "llama.feed_forward_length": ([96, 96], VT.ARRAY, VT.INT64)}  # fmt: skip
    path = _rewrite(good, tmp_path / "arrays.gguf", kv=kv)
    ours = read_params(open_gguf(path), path)
    assert ours == read_params(open_gguf(good), good)
    assert (ours.h, ours.kv, ours.ff) == (TINY.h, TINY.kv, TINY.ff)
