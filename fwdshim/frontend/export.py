"""GGUF export with gguf's own `GGUFWriter`: the weights fwdshim runs, in GGUF `llama` layout.

- `write_converted(reader, conversions, path)`: a copy of a GGUF file (every metadata key, every
  tensor in order) with the named tensors converted — requantized to Q8_0 (gguf's dequantizer, then
  gguf's Q8_0 quantizer) or widened to F32. This is the sidecar that `fwdshim run` reads and that the
  peer check hands to transformers' own GGUF loader.
- `write_llama(path, params, weights, ...)`: a new `llama` GGUF from float arrays in the halves layout
  of Hugging Face checkpoints (Q/K rows are permuted into GGUF's interleaved layout here, as
  llama.cpp's `convert_hf_to_gguf.py` does), quantized by `types` (default: projections and mixture
  weights Q8_0, vectors F32), with a byte-level BPE tokenizer when one is given.
- `random_llama(params, seed)`: random weights of a model's shapes; `byte_vocab(merges)`: a small
  byte-level vocabulary (the 256 byte tokens, some merges, `<|endoftext|>`) — test and demo data.

Files are written to a temporary name of their own beside `path` (`.<name>.<pid>-<random>.tmp`,
`files.written`) and moved into place, so an interrupted or failed write leaves no file (a writer
killed outright leaves its temporary file, which the next write of `path` removes), and two processes
writing the same file (two `fwdshim run`s converting one model) each move a whole file into place.
A failed write raises `files.WriteFailed` (an OSError) saying why: a full disk, with the bytes needed,
or a read-only directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from fwdshim.dialects.attributes import ggml_of
from fwdshim.frontend.gguf_model import (
    CONVERTED_KEY, EXPERT_WIDTH_ARCHITECTURES, MANIFEST, MATMUL, ROPE_FREQS, SOURCE_KEY, LlamaParams, expected_tensors, tensor_shape,
)  # fmt: skip
from fwdshim.files import WriteFailed, written
from fwdshim.weights import Q8_0_BLOCK_BYTES, WeightData, nonfinite_why

_SKIP_KEYS = ("GGUF.", "general.architecture", "general.alignment")
"""Keys the writer writes itself (the alignment through `add_custom_alignment`, so that the data is
padded as the key says)."""


def copy_metadata(reader: gguf.GGUFReader, writer: gguf.GGUFWriter, *, skip: Sequence[str] = ()) -> None:
    """Every metadata key of `reader` into `writer`, with its GGUF value type (nested arrays excepted)."""
    for key, field in reader.fields.items():
        if key.startswith(_SKIP_KEYS) or key in skip or not field.types:
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == VT.ARRAY else None
        if sub == VT.ARRAY:
            continue
        value = field.contents()
        if vtype == VT.ARRAY and len(value) == 0:
            continue
        writer.add_key_value(key, value, vtype, sub)


class NotStorable(ValueError):
    """A tensor whose values the type it is converted to cannot hold; `str(e)` names it (one line)."""


def convert_tensor(t: gguf.ReaderTensor, qtype: QT) -> np.ndarray:
    """A reader tensor's values stored as `qtype`: gguf's dequantizer, then gguf's quantizer (F32: the
    dequantized values). The result is what `GGUFWriter.add_tensor(..., raw_dtype=qtype)` takes.

    Raises: NotStorable for a quantized `qtype` when a value is NaN or inf, or so large that its
    block's f16 scale overflows (llama.cpp's quantizer refuses such data too); NumPy's warnings on
    the way are not shown: the values are judged here, by name."""
    shape = tensor_shape(t)
    with np.errstate(all="ignore"):  # a NaN/inf scale of a quantized source: judged below
        values = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape)
    if qtype == QT.F32:
        return values
    bad = values[~np.isfinite(values)]
    if bad.size:
        raise NotStorable(f"tensor `{t.name}` holds {bad[0]}, which {qtype.name} cannot hold")
    with np.errstate(all="ignore"):  # an f16 scale that overflows: judged below
        out = gguf.quants.quantize(values, qtype)
    if qtype == QT.Q8_0 and not np.isfinite(out.reshape(-1, Q8_0_BLOCK_BYTES)[:, :2].copy().view(np.float16)).all():
        raise NotStorable(
            f"tensor `{t.name}` holds a value of {float(np.abs(values).max()):.6g}, past what the f16 "
            f"scale of a {qtype.name} block holds"
        )
    return out


def _finish(writer: gguf.GGUFWriter, tmp: Path, path: Path, progress: bool) -> None:
    """Write the file `writer` holds into `tmp` and move it over `path`.

    Raises: `files.WriteFailed` (an OSError) saying why, naming `path`'s directory and, for a full
    disk, the bytes the file needs."""
    needed = sum(ti.nbytes for shard in writer.tensors for ti in shard.values())  # and the header, once written
    try:
        try:
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            needed += sum(f.tell() for f in writer.fout or ())
            writer.write_tensors_to_file(progress=progress)
        finally:
            writer.close()
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)  # first: the space it held is free again when the error says how much is
        raise WriteFailed(e, path, needed) from None


def write_converted(
    reader: gguf.GGUFReader,
    conversions: Mapping[str, QT],
    path: str | Path,
    *,
    progress: bool = False,
    source: str | None = None,
) -> Path:
    """Copy the file `reader` holds to `path`, converting each tensor named in `conversions` to its
    type (see the module docstring). `general.file_type` becomes MOSTLY_Q8_0 when any tensor is
    requantized to Q8_0 (else it is kept); `source`, when given, is recorded as `fwdshim.source`
    (the stamp of the file converted). Returns `path`.

    Raises: NotStorable for a tensor holding an inf or NaN value or block scale (`nonfinite_why`, the
    message a run gives) or one `convert_tensor` cannot store; OSError when `path` cannot be written
    (`files.WriteFailed` once writing began: its text says why, a full disk with the bytes needed)."""
    path = Path(path)
    arch = reader.fields["general.architecture"].contents()
    q8 = QT.Q8_0 in conversions.values()
    path.parent.mkdir(parents=True, exist_ok=True)
    with written(path) as tmp:
        writer = gguf.GGUFWriter(tmp, arch)
        if reader.alignment != gguf.GGUF_DEFAULT_ALIGNMENT:  # written at the alignment it declares
            writer.add_custom_alignment(reader.alignment)
        skip = (CONVERTED_KEY, SOURCE_KEY) + (("general.file_type",) if q8 else ())
        copy_metadata(reader, writer, skip=skip)
        if q8:
            writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
        if conversions:
            writer.add_array(CONVERTED_KEY, list(conversions))
        if source is not None:
            writer.add_string(SOURCE_KEY, source)
        for t in reader.tensors:
            shape = tensor_shape(t)  # every tensor is read here: a non-finite one is not copied on
            why = nonfinite_why(WeightData(t.name, ggml_of(t.tensor_type), shape, np.asarray(t.data).reshape(*shape[:-1], -1)))
            if why is not None:
                raise NotStorable(why)
            qtype = conversions.get(t.name)
            if qtype is None:
                writer.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
            else:
                writer.add_tensor(t.name, convert_tensor(t, qtype), raw_dtype=qtype)
        _finish(writer, tmp, path, progress)
    return path


# ---------------------------------------------------------------------------------------------
# new files


def permute_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """Q/K rows from the halves layout to GGUF's interleaved one (llama.cpp's `permute`)."""
    hd = w.shape[0] // n_head
    return np.ascontiguousarray(w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def default_type(role: str) -> QT:
    """Projections and mixture weights Q8_0, norm and bias vectors F32."""
    return QT.Q8_0 if role in (MATMUL, MANIFEST) else QT.F32


def write_llama(
    path: str | Path,
    params: LlamaParams,
    weights: Mapping[str, np.ndarray],
    *,
    types: Mapping[str, QT] | None = None,
    vocab: tuple[list[str], list[str], list[int]] | None = None,
    name: str = "fwdshim-test-llama",
    permute: bool = True,
    pre: str = "default",
    alignment: int | None = None,
    spm: tuple[list[str], list[float], list[int]] | None = None,
) -> Path:
    """A GGUF file of `params` (architecture `params.arch`, one of `ARCHITECTURES`) holding `weights` (float
    arrays by GGUF tensor name, logical shape `[N, K]`, Q/K rows in the halves layout, permuted here
    for a `llama` file unless `permute=False`; optional tensors, the biases, written when given).

    `types`: a GGML type per tensor (default `default_type` of its role). `vocab`: `(tokens, merges,
    token_types)` of a byte-level BPE vocabulary (`byte_vocab`), written as `tokenizer.ggml.*`.
    `spm`: `(tokens, scores, token_types)` of a SentencePiece vocabulary (`spm_vocab`), written as a
    `llama` tokenizer instead. `pre`: the tokenizer's `tokenizer.ggml.pre`; `alignment`: `general.alignment` (the data padded to
    it; None: gguf's default 32, no key). `params.rope_factors` are written as `rope_freqs.weight` (F32, or F16 when `types` says so).
    Raises KeyError for a tensor the model needs that `weights` lacks."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with written(path) as tmp:
        w = gguf.GGUFWriter(tmp, params.arch)
        if alignment is not None:
            w.add_custom_alignment(alignment)
        w.add_name(name)
        w.add_block_count(params.n_layer)
        w.add_context_length(params.context_length or 2048)
        w.add_embedding_length(params.d)
        w.add_feed_forward_length(params.ff)
        w.add_head_count(params.h)
        w.add_head_count_kv(params.kv)
        if params.hd * params.h != params.d or params.qk_norm:  # Qwen3's converter writes the head size
            w.add_key_length(params.hd)
            w.add_value_length(params.hd)
        w.add_rope_dimension_count(params.rope_dim)
        w.add_rope_freq_base(params.rope_base)
        if params.window:
            w.add_sliding_window(params.window)
        if params.attn_softcap:
            w.add_attn_logit_softcapping(params.attn_softcap)
        if params.final_softcap:
            w.add_final_logit_softcapping(params.final_softcap)
        if params.rope_base_swa is not None:
            w.add_rope_freq_base_swa(params.rope_base_swa)
        w.add_layer_norm_rms_eps(params.eps)
        w.add_vocab_size(params.vocab)
        if params.moe:
            w.add_expert_count(params.n_expert)
            w.add_expert_used_count(params.top_k)
            if params.arch in EXPERT_WIDTH_ARCHITECTURES:
                w.add_expert_feed_forward_length(params.ff)
        if spm is not None:  # a SentencePiece vocabulary, as Mistral's, Phi-3's and Gemma's files hold one
            tokens, scores, token_types = spm
            w.add_tokenizer_model("llama")
            w.add_tokenizer_pre("default")
            w.add_token_list(tokens)
            w.add_token_scores(scores)
            w.add_token_types(token_types)
            w.add_bos_token_id(tokens.index("<s>"))
            w.add_eos_token_id(tokens.index("</s>"))
            w.add_unk_token_id(tokens.index("<unk>"))
        elif vocab is not None:
            tokens, merges, token_types = vocab
            w.add_tokenizer_model("gpt2")
            w.add_tokenizer_pre(pre)
            w.add_token_list(tokens)
            w.add_token_types(token_types)
            w.add_token_merges(merges)
            eot = tokens.index("<|endoftext|>") if "<|endoftext|>" in tokens else 0
            w.add_bos_token_id(eot)
            w.add_eos_token_id(eot)
            w.add_add_bos_token(False)
        if params.rope_factors is not None:
            f16 = (types or {}).get(ROPE_FREQS) == QT.F16
            f = np.asarray(params.rope_factors, dtype=np.float16 if f16 else np.float32)
            w.add_tensor(ROPE_FREQS, f, raw_dtype=QT.F16 if f16 else QT.F32)
        uses = expected_tensors(params, tied="output.weight" not in weights)
        for tname, use in uses.items():
            if use.optional and tname not in weights:
                continue
            a = np.asarray(weights[tname], dtype=np.float32).reshape(use.shape)
            if permute and params.arch == "llama" and tname.startswith("blk.") and tname.split(".")[2] in ("attn_q", "attn_k"):
                a = permute_rows(a, params.h if tname.split(".")[2] == "attn_q" else params.kv)
            qtype = (types or {}).get(tname, default_type(use.role))
            data = (
                a
                if qtype == QT.F32
                else a.astype(np.float16)
                if qtype == QT.F16
                else gguf.quants.quantize(a, qtype)
            )
            w.add_tensor(tname, data, raw_dtype=qtype)
        _finish(w, tmp, path, False)
    return path


def random_llama(
    params: LlamaParams, seed: int = 0, *, tied: bool = True, gain: float = 2.4
) -> dict[str, np.ndarray]:
    """Random float32 weights for every tensor of `params`: norm vectors `1 + N(0, 0.1)`, projections
    `N(0, gain²/K)` (K their row width: large enough that attention and rope matter), the embedding
    `N(0, 0.3²)`; `tied`: no `output.weight`."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for tname, use in expected_tensors(params, tied=tied).items():
        if use.optional:
            continue
        if len(use.shape) == 1:
            out[tname] = (1.0 + 0.1 * rng.standard_normal(use.shape)).astype(np.float32)
        elif tname == "token_embd.weight":
            out[tname] = (0.3 * rng.standard_normal(use.shape)).astype(np.float32)
        else:
            out[tname] = (gain / np.sqrt(use.shape[-1]) * rng.standard_normal(use.shape)).astype(np.float32)
    return out


def byte_vocab(merges: Sequence[tuple[str, str]] = ()) -> tuple[list[str], list[str], list[int]]:
    """A byte-level BPE vocabulary: the 256 byte tokens (GPT-2's byte-to-unicode spelling), one token
    per merge, then `<|endoftext|>` (a control token). Returns `(tokens, merges, token_types)`."""
    spell = _bytes_to_unicode()
    tokens = [spell[b] for b in range(256)]
    merge_lines = []
    for a, b in merges:
        merge_lines.append(f"{a} {b}")
        tokens.append(a + b)
    tokens.append("<|endoftext|>")
    types = [int(gguf.TokenType.NORMAL)] * (len(tokens) - 1) + [int(gguf.TokenType.CONTROL)]
    return tokens, merge_lines, types


def spm_vocab(pieces: Sequence[str]) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece vocabulary as llama.cpp's converter writes one: `<unk>`, `<s>`, `</s>`, the 256
    byte tokens `<0xXX>`, then `pieces` (spaces spelled `▁`), each scoring below the one before (the
    first merged first). Returns `(tokens, scores, token_types)`."""
    T = gguf.TokenType
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    types = [int(T.UNKNOWN), int(T.CONTROL), int(T.CONTROL), *[int(T.BYTE)] * 256, *[int(T.NORMAL)] * len(pieces)]
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, scores, types


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (the byte-level BPE alphabet)."""
    keep = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out
