"""A GGUF model file of one of `ARCHITECTURES` (`llama`, `qwen2`, `qwen3`, `qwen3moe`, `phi3`, `gemma`, `gemma2`, `gemma3`): reading and
checking it, its hyperparameters and tensors, its weights (a `llama` file's Q/K rows un-permuted, a
fused tensor's parts as row slices); the `fwd` IR of one decode step described below is written by `step_ir`.

`importer.import_gguf(path, requantize="none", context=4096)` (the whole import) reads a GGUF file of architecture `llama` (dense,
or a sparse mixture when `llama.expert_count > 0`) with the `gguf` package and returns an
`ImportedModel`: the module holding `func.func @decode_step`, the hyperparameters (`LlamaParams`) and
a `WeightStore` (`ModelWeights`) resolving every `fwd.weight "name"` of the step.

The step (one token at one position; DESIGN.md §3, §6):

    @decode_step(%x: [d], %angles: [2, half], %l0_k_cache: [l-1, kv*hd], %l0_v_cache: [l-1, kv*hd], ...)
        -> (%logits: [vocab], %l0_k_rot: [kv*hd], %l0_v: [kv*hd], ...)

`x` is the token's embedding row and `angles` the position's rope angles (row 0 cos, row 1 sin); both,
the token-embedding lookup and the append of each layer's `k`, `v` rows to its caches are the runner's
(the forward refuses row gathers and row writes). `l` is the context capacity (`context`). A weighted
RMS norm is `fwd.rms_norm` then `fwd.elementwise mul` by the weight (the `norm_weight` rule fuses them).
The logits read `output.weight`, or `token_embd.weight` when the file ties them.

Weights keep their GGUF tensor names and, under `requantize="none"`, their types: the GEMVs read
F32, F16, BF16, Q8_0 and the block types of `fwdshim.ggml_blocks` (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K)
as the file stores them, and the legality pass refuses a matmul over any other type, naming it.
Under `requantize="q8_0"` every projection of a type other than F32, F16, BF16 and Q8_0 is
requantized to Q8_0 (gguf's dequantizer, then gguf's Q8_0 quantizer). Under either mode the four
weights of a mixture (its manifest: router, gate, up, down) become Q8_0 (the mixture's kernels read
Q8_0 only) and norm and bias vectors become F32. The converted tensors go into a sidecar GGUF (`export.write_converted`), a
complete `llama` file in GGUF layout that the step is then imported from.

GGUF `llama` files store the Q and K projection rows of each head permuted for interleaved-pair rope;
`fwd.rope` turns pairs `(i, i + half)`. `ModelWeights` un-permutes those rows (an exact row
permutation of the stored blocks) when it hands them out, so the file stays in GGUF layout.

Errors: a missing, truncated or non-GGUF file, another architecture, a missing tensor, a tensor of an
unexpected shape or an unusable hyperparameter raise `ModelError` with one line naming the file. The
file's layout is checked before gguf's reader trusts it (`gguf_layout`: counts and lengths against
the file's size, UTF-8 strings, the value type of every key read, each tensor's bytes against its
type and shape).
"""

from __future__ import annotations

import functools
import mmap
import numbers
import os
import re
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as QT

from fwdshim.dialects.attributes import ggml_of
from fwdshim.dialects.fwd import row_slice
from fwdshim.frontend.gguf_layout import (
    ARCHITECTURES, Layout, LayoutError, LayoutReader, Truncated, check_metadata, scan,
)  # fmt: skip
from fwdshim.ggml_blocks import GEMV_TYPES
from fwdshim.weights import WeightData, missing, nonfinite_why

KERNEL_TYPES = GEMV_TYPES
"""The weight types the forward's GEMV kernels dequantize (`fwdshim.ggml_blocks`)."""
Q8_0_KEEPS = frozenset({QT.F32, QT.F16, QT.BF16, QT.Q8_0})
"""The projection types `requantize="q8_0"` keeps; every other is requantized to Q8_0."""
REQUANTIZE_MODES = ("q8_0", "none")


class ModelError(Exception):
    """A model file fwdshim cannot import; `str(e)` is one line naming the file and the problem."""


def path_argument(name: str, value, accepts: str) -> Path:
    """`value` as a Path, or ModelError naming the parameter `name` and what it `accepts` (pathlib's
    own TypeError named neither: `import_gguf(123)` said "expected str, bytes or os.PathLike"). An
    empty path is refused by name too: `Path("")` is the current directory (`import_gguf("")` said
    ".: is a directory", and `sidecar=""` failed inside pathlib)."""
    if isinstance(value, (str, PathLike)):
        try:
            text = os.fspath(value)
        except TypeError:  # an os.PathLike whose __fspath__ gives no path
            text = None
        if text == "":
            raise ModelError(f"{name}='': an empty path; {accepts}")
        if isinstance(text, str):
            return Path(text)
    raise ModelError(f"{name}={argument_text(value)}: {accepts}")


def is_integer(value) -> bool:
    """Whether `value` is an integral number as the Python API takes one: any `numbers.Integral`
    (an int, a NumPy integer), never a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def argument_text(value) -> str:
    """A wrong argument as an error names it: a plain value's short repr and its type (`123 (int)`,
    a NumPy scalar's too: `np.True_ (bool)`), another object's type alone (`<ImportedModel>`: its repr
    is long, with addresses)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, np.generic)):
        return f"{_short(value)} ({type(value).__name__})"
    return f"<{type(value).__name__}>"


def integer_error(name: str, value, takes: str) -> str | None:
    """None when `value` is an integer (`is_integer`), else the error naming parameter `name`, the
    value with its type and what it `takes` (`max_tokens='4' (str): a whole number ...`): a wrong
    type is told as one, not as a value out of range (`max_tokens='4'` said "ask for at least one
    token")."""
    return None if is_integer(value) else f"{name}={argument_text(value)}: {takes}"


def choice_error(name: str, value, choices) -> str:
    """The error for parameter `name` given `value`, which is none of `choices`:
    `numerics='int9': expected one of 'dequant', ...` (a value not a str with its type)."""
    shown = repr(value) if isinstance(value, str) else argument_text(value)
    return f"{name}={shown}: expected one of {', '.join(map(repr, choices))}"


# ---------------------------------------------------------------------------------------------
# the file and its hyperparameters


def check_file(path: str | Path) -> Path:
    """`path`, a file that starts like a GGUF. Raises: ModelError (missing, unreadable, not GGUF)."""
    path = Path(path)
    if path.is_dir():
        raise ModelError(f"{path}: is a directory, not a GGUF file")
    if not path.is_file():
        if path.exists():  # a device, FIFO or socket: reading it would not end or not be a model
            raise ModelError(f"{path}: not a regular file (give a GGUF file)")
        raise ModelError(f"{path}: no such file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(f"{path}: cannot read the file ({e.strerror})") from None
    if not magic:
        raise ModelError(f"{path}: an empty file, not a GGUF model")
    if magic != b"GGUF" and b"GGUF".startswith(magic):
        raise ModelError(f"{path}: truncated or corrupt GGUF file of {len(magic)} bytes (less than its header)")
    if magic != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (it starts with {magic!r}, not b'GGUF')")
    return path


def check_layout(path: Path) -> Layout:
    """The layout of GGUF file `path`, checked (`gguf_layout.scan`: every count, length, string and
    tensor extent against the file's size; `check_metadata`: the value types of the keys fwdshim
    reads) before anything trusts it. Raises: ModelError naming the file and the key or tensor."""
    size = path.stat().st_size
    try:
        with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            layout = scan(data)
        check_metadata(layout)
        return layout
    except Truncated as e:
        raise ModelError(f"{path}: truncated or corrupt GGUF file of {size} bytes ({e})") from None
    except LayoutError as e:
        raise ModelError(f"{path}: {e}") from None
    except OSError as e:
        raise ModelError(f"{path}: cannot read the file ({e.strerror})") from None


def open_gguf(path: str | Path) -> gguf.GGUFReader:
    """A `GGUFReader` over `path`, its layout checked first (`check_layout`).

    Raises: ModelError for a missing or unreadable file, one that is not GGUF, a truncated or corrupt
    one, or metadata of the wrong type."""
    path = check_file(path)
    layout = check_layout(path)
    try:
        reader = LayoutReader(path, layout)
    except Exception as e:  # the layout held: a gguf limit fwdshim does not know of
        raise ModelError(f"{path}: gguf cannot read the file ({_one_line(e)})") from None
    for t in reader.tensors:  # the layout said so; gguf must agree
        assert t.data.nbytes == t.n_bytes, t.name
    return reader


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def field_value(reader: gguf.GGUFReader, key: str, default=None):
    """The value of metadata `key` (a scalar, a string or a list), or `default`."""
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


@dataclass(frozen=True)
class LlamaParams:
    """The hyperparameters of a GGUF `llama` model (the `llama.*` metadata keys).

    `d` embedding width, `ff` feed-forward width, `h`/`kv` query/key-value heads, `hd` head width,
    `rope_dim` rotated dimensions per head (`hd` unless a partial rotary), `rope_base` its frequency
    base, `eps` the RMS norm epsilon, `n_expert`/`top_k` the mixture (0/0: dense), `rope_factors`
    the divisor of each rope frequency (None: none)."""

    n_layer: int
    d: int
    ff: int
    h: int
    kv: int
    hd: int
    rope_dim: int
    rope_base: float
    eps: float
    vocab: int
    n_expert: int = 0
    top_k: int = 0
    context_length: int = 0
    rope_factors: tuple[float, ...] | None = None
    """Each rope frequency's divisor (`half` of them): the `rope_freqs.weight` tensor (Llama 3.1/3.2)
    times a linear `rope.scaling.factor`; None: plain rope."""
    arch: str = "llama"
    """The file's `general.architecture` (`ARCHITECTURES`): the prefix of its keys. `llama` files store
    each head's Q/K rows permuted for interleaved rope (un-permuted when read); the others do not."""
    window: int = 0
    """The attention's sliding window (`attention.sliding_window`: a position attends the last `window`
    positions, itself included); 0: none."""
    windowed: tuple[bool, ...] | None = None
    """Which layers the window applies to (`sliding_window_pattern`); None: every layer."""
    attn_softcap: float = 0.0
    """`attn_logit_softcapping` (Gemma 2: scores capped `c·tanh(s/c)`); 0: none."""
    final_softcap: float = 0.0
    """`final_logit_softcapping` (Gemma 2: the logits capped); 0: none."""
    attn_scale: float | None = None
    """The scores' scale where not 1/√hd (Gemma 3 27B: 1/√(d/h), as llama.cpp); None: 1/√hd."""
    rope_base_swa: float | None = None
    """The rope base of the windowed layers (Gemma 3: `rope.freq_base_swa`, default 10000); None: `rope_base`."""

    @property
    def half(self) -> int:
        return self.rope_dim // 2

    @property
    def gemma(self) -> bool:
        """The embedding scaled by √d and a GELU-gated feed-forward (`GEMMA_ARCHITECTURES`)."""
        return self.arch in GEMMA_ARCHITECTURES

    @property
    def post_norms(self) -> bool:
        """Each block's output RMS-normed before its residual add (Gemma 2 and 3)."""
        return self.arch in ("gemma2", "gemma3")

    def is_windowed(self, layer: int) -> bool:
        """Whether layer `layer`'s attention is windowed (`window`, `windowed`)."""
        return bool(self.window) and (self.windowed is None or self.windowed[layer])

    @property
    def fused(self) -> bool:
        """q, k, v in one `attn_qkv` tensor and gate, up in one `ffn_up` (Phi-3): read as row slices."""
        return self.arch in FUSED_ARCHITECTURES

    @property
    def qk_norm(self) -> bool:
        """Each head's q and k rows are RMS-normed (weighted by `attn_q_norm`/`attn_k_norm`) before the rope."""
        return self.arch in QK_NORM_ARCHITECTURES

    @property
    def moe(self) -> bool:
        return self.n_expert > 0


def read_params(reader: gguf.GGUFReader, path: str | Path) -> LlamaParams:
    """The `llama` hyperparameters of a file. The head counts and the feed-forward width may be
    arrays, one value a layer, as llama.cpp reads them: all equal, they are that value.

    Raises: ModelError naming the key, for another architecture, a missing key, or a value the step
    cannot be built from (not a number, no layers, no heads, a rope wider than the head, ...) or its
    kernels cannot run (query heads that do not group evenly over the key/value heads, a partial
    rotary: `fwd-legalize` would refuse the imported step, at `fwdshim run`; per-layer values that
    differ, or not one a layer)."""
    arch = field_value(reader, "general.architecture")
    if arch is None:
        raise ModelError(f"{path}: no `general.architecture` in the GGUF metadata")
    if arch not in ARCHITECTURES:
        raise ModelError(f"{path}: unsupported architecture `{arch}` (fwdshim imports {_archs()})")

    # every width the step is built of is a dimension of some tensor: bounded before anything sized by it
    widest = max((int(n) for t in reader.tensors for n in t.shape.tolist()), default=0)

    def count(key: str, default: int | None = None, least: int = 1, width: bool = True) -> int:
        v = field_value(reader, f"{arch}.{key}", default)
        if v is None:
            raise ModelError(f"{path}: no `{arch}.{key}` in the GGUF metadata")
        if isinstance(v, (list, tuple, np.ndarray)):  # one a layer (`gguf_layout.LAYERED`): every layer alike
            v = per_layer(key, [int(x) for x in v])
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ModelError(f"{path}: `{arch}.{key}` = {v!r} is not a whole number")
        if v < least:
            raise ModelError(f"{path}: `{arch}.{key}` = {v}: fwdshim needs at least {least}")
        if width and v > widest:
            raise ModelError(
                f"{path}: `{arch}.{key}` = {v} is wider than any tensor of the file "
                f"(the widest dimension is {widest})"
            )
        return int(v)

    def per_layer(key: str, values: list[int]) -> int:
        n = count("block_count", width=False)
        if len(values) != n:
            raise ModelError(f"{path}: `{arch}.{key}` holds {len(values)} values, one a layer, for {n} layers")
        if len(set(values)) > 1:
            shown = ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")
            raise ModelError(
                f"{path}: `{arch}.{key}` differs between layers ({shown}): fwdshim builds every layer alike"
            )
        return values[0]

    def real(key: str, default: float, positive: bool) -> float:
        v = field_value(reader, f"{arch}.{key}", default)
        if isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not np.isfinite(v):
            raise ModelError(f"{path}: `{arch}.{key}` = {v!r} is not a finite number")
        if v < 0 or (positive and v == 0):
            must = "positive" if positive else "non-negative"
            raise ModelError(f"{path}: `{arch}.{key}` = {v}: must be {must}")
        return float(v)

    d, h = count("embedding_length"), count("attention.head_count")
    kv = count("attention.head_count_kv", h)
    if kv > h:  # the attention groups query heads over the key/value heads (the seed's K17)
        raise ModelError(
            f"{path}: `{arch}.attention.head_count_kv` = {kv} > `{arch}.attention.head_count` = {h}: "
            "more key/value heads than query heads"
        )
    if h % kv:
        raise ModelError(
            f"{path}: `{arch}.attention.head_count` = {h} is not a multiple of `{arch}.attention.head_count_kv` "
            f"= {kv}: the query heads do not group evenly over the key/value heads"
        )
    if field_value(reader, f"{arch}.attention.key_length") is None and d % h:
        raise ModelError(
            f"{path}: `{arch}.embedding_length` = {d} is not a whole number of `{arch}.attention.head_count` = {h} "
            f"heads, and no `{arch}.attention.key_length` gives the head size"
        )
    hd = count("attention.key_length", d // h)
    vd = count("attention.value_length", hd)
    if vd != hd:
        raise ModelError(
            f"{path}: values of {vd} per head, keys of {hd}: fwdshim imports heads as wide for both"
        )
    rope_dim = count("rope.dimension_count", hd)
    if rope_dim != hd:  # the rope kernel turns every dimension of a head (the seed's K07)
        why = "partial rotary embeddings are not supported" if rope_dim < hd else "a rope turns no more dimensions than a head has"
        raise ModelError(f"{path}: `{arch}.rope.dimension_count` = {rope_dim} but heads are {hd} wide: {why}")
    if rope_dim % 2:
        raise ModelError(
            f"{path}: `{arch}.rope.dimension_count` = {rope_dim}: rope turns an even number of a head's "
            f"{hd} dimensions"
        )
    refuse_metadata(reader, path)
    factors = rope_factors(reader, path, rope_dim // 2)
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    vocab = count("vocab_size", len(tokens.data) if tokens is not None else None)
    if tokens is not None and len(tokens.data) != vocab:  # ids past the list would print as nothing
        raise ModelError(
            f"{path}: `tokenizer.ggml.tokens` holds {len(tokens.data)} tokens, but `{arch}.vocab_size` = {vocab}"
        )
    n_expert = count("expert_count", 0, least=0)
    top_k = count("expert_used_count", 0, least=0, width=False)
    if n_expert and not 1 <= top_k <= n_expert:
        raise ModelError(f"{path}: `{arch}.expert_used_count` = {top_k} for {n_expert} experts")
    if arch in EXPERT_WIDTH_ARCHITECTURES and not n_expert:
        raise ModelError(f"{path}: `{arch}.expert_count` = 0: every layer of a `{arch}` model is a mixture of experts")
    # a Qwen3-MoE file's `feed_forward_length` is the dense width its layers do not have; its experts
    # are `expert_feed_forward_length` wide (llama.cpp's `n_ff_exp`)
    ff = count("expert_feed_forward_length") if arch in EXPERT_WIDTH_ARCHITECTURES else count("feed_forward_length")
    n_layer = count("block_count", width=False)
    window = count("attention.sliding_window", 0, least=0, width=False) if arch in WINDOW_ARCHITECTURES else 0
    windowed = None
    if window and arch in SWA_PATTERN:  # llama.cpp's `load_swa_pattern`: an array a layer, or a period
        pattern = field_value(reader, f"{arch}.attention.sliding_window_pattern", SWA_PATTERN[arch])
        key = f"`{arch}.attention.sliding_window_pattern`"
        if isinstance(pattern, (list, tuple, np.ndarray)):
            if len(pattern) != n_layer:
                raise ModelError(f"{path}: {key} holds {len(pattern)} values, one a layer, for {n_layer} layers")
            bad = next((x for x in pattern if not isinstance(x, (bool, np.bool_))), None)
            if bad is not None:  # llama.cpp reads an array of booleans: a layer windowed or not
                raise ModelError(f"{path}: {key} holds {_short(bad)}, not true or false (whether each layer is windowed)")
            windowed = tuple(bool(x) for x in pattern)
        elif isinstance(pattern, bool) or not isinstance(pattern, (int, np.integer)):
            raise ModelError(f"{path}: {key} = {pattern!r} is not a whole number of layers")
        elif pattern < 0:
            raise ModelError(f"{path}: {key} = {pattern} is negative (a period of layers, the last of each not windowed)")
        else:
            windowed = tuple(pattern == 0 or i % pattern < pattern - 1 for i in range(n_layer))
    return LlamaParams(
        n_layer=n_layer,
        d=d,
        ff=ff,
        h=h,
        kv=kv,
        hd=hd,
        rope_dim=rope_dim,
        rope_base=real("rope.freq_base", 10000.0, positive=True),
        eps=real("attention.layer_norm_rms_epsilon", 1e-5, positive=False),
        vocab=vocab,
        n_expert=n_expert,
        top_k=top_k,
        context_length=count("context_length", 0, least=0, width=False),
        rope_factors=factors,
        arch=arch,
        window=window,
        windowed=windowed,
        attn_softcap=real("attn_logit_softcapping", 0.0, positive=False) if arch == "gemma2" else 0.0,
        final_softcap=real("final_logit_softcapping", 0.0, positive=False) if arch in ("gemma2", "gemma3") else 0.0,
        attn_scale=1.0 / float(np.sqrt(d / h)) if arch == "gemma3" and n_layer == 62 else None,
        rope_base_swa=real("rope.freq_base_swa", 10000.0, positive=True) if arch == "gemma3" and window else None,
    )


# The `llama.*` keys the import reads, or that change nothing the step computes. Every other
# `llama.*` key is refused by name (`refuse_metadata`): a key fwdshim ignored could change what the
# model computes (llama.cpp reads it) while fwdshim silently computed something else.
# `ARCHITECTURES` (from `gguf_layout`, which checks their keys' value types): Llama (and Mistral,
# SmolLM: `llama` files); Qwen2 (Qwen2.5: biases on the Q/K/V projections, which the step adds after
# its matmuls); Qwen3 and Qwen3-MoE (qk-norm: each head's q and k rows RMS-normed, weighted, before
# the rope; the mixture's experts `expert_feed_forward_length` wide).
FUSED_ARCHITECTURES = frozenset({"phi3"})
"""The architectures whose files hold q, k and v as one `attn_qkv` tensor and gate and up as one
`ffn_up` (gate rows first): the step reads each part as a slice of the tensor's rows (`row_slice`)."""
WINDOW_ARCHITECTURES = frozenset({"phi3", "gemma2", "gemma3"})
"""The architectures whose `attention.sliding_window` the step reads (a window of W positions)."""
GEMMA_ARCHITECTURES = frozenset({"gemma", "gemma2", "gemma3"})
"""Gemma's: the embedding row scaled by √d, a GELU-gated feed-forward; Gemma 2 and 3 also norm each
block's output (`post_attention_norm`, `post_ffw_norm`) and window the attention of some layers (a
`sliding_window_pattern`, llama.cpp's default every second layer of Gemma 2, five of six of Gemma 3);
Gemma 2 soft-caps the scores and logits. Imported as such: the legality pass refuses what the kernels
do not compute (`fwd.scale`, `fwd.gelu`, `fwd.softcap`, a window), with the seed's reasons."""
SWA_PATTERN = {"gemma2": 2, "gemma3": 6}
"""llama.cpp's default `sliding_window_pattern`: layer `i` is windowed when `i % n < n - 1`."""
EXPERT_WIDTH_ARCHITECTURES = frozenset({"qwen3moe"})
"""The architectures whose layers are all mixtures, of experts `expert_feed_forward_length` wide."""
QK_NORM_ARCHITECTURES = frozenset({"qwen3", "qwen3moe", "gemma3"})
"""The architectures whose layers norm each head's q and k rows (`attn_q_norm`, `attn_k_norm`)."""


def _archs() -> str:
    names = [f"`{a}`" for a in ARCHITECTURES]
    return ", ".join(names[:-1]) + " and " + names[-1]


_READ_KEYS = frozenset(
    k
    for k in (
        "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
        "expert_count", "expert_used_count", "attention.head_count", "attention.head_count_kv",
        "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
        "rope.dimension_count", "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
        "rope.scale_linear", "rope.scaling.original_context_length", "rope.scaling.finetuned",
        "attention.causal", "expert_feed_forward_length",
    )
)  # fmt: skip

_REFUSED_KEYS = {
    "attn_logit_softcapping": "attention soft-capping (`c·tanh(s/c)` of the scores)",
    "final_logit_softcapping": "final-logit soft-capping",
    "router_logit_softcapping": "router-logit soft-capping",
    "attention.sliding_window": "sliding-window attention",
    "attention.sliding_window_pattern": "sliding-window attention",
    "attention.scale": "an attention scale other than 1/sqrt(hd)",
    "attention.clamp_kqv": "clamped q/k/v",
    "attention.max_alibi_bias": "ALiBi position biases",
    "attention.layer_norm_epsilon": "layer norms",
    "logit_scale": "scaled logits",
    "embedding_scale": "a scaled embedding",
    "residual_scale": "scaled residuals",
    "use_parallel_residual": "parallel residuals",
    "tensor_data_layout": "a tensor layout other than GGUF's",
    "expert_shared_count": "shared experts",
    "expert_weights_scale": "scaled expert weights",
    "expert_gating_func": "an expert gating function other than softmax",
    "rope.scaling.attn_factor": "a rope attention factor",
    "rope.dimension_sections": "sectioned (multimodal) rope",
}
"""`llama.*` keys that change the computation in a way the step does not compute: what each asks for."""

_ARCH_KEYS = {
    "phi3": frozenset({"attention.sliding_window"}),
    "gemma2": frozenset({"attention.sliding_window", "attention.sliding_window_pattern", "attn_logit_softcapping",
                         "final_logit_softcapping"}),
    "gemma3": frozenset({"attention.sliding_window", "attention.sliding_window_pattern", "final_logit_softcapping",
                         "rope.freq_base_swa"}),
}  # fmt: skip
"""The keys `read_params` reads for one architecture only (in another, refused by name)."""
LONGROPE_TENSORS = ("rope_factors_long.weight", "rope_factors_short.weight")
"""Tensors of longrope scaling (Phi-3 128k): the rope's factors switch past the original context."""
QK_NORM_TENSORS = ("attn_q_norm.weight", "attn_k_norm.weight")
"""Per-layer tensors of a model with qk-norm (a norm of each head's q and k rows before rope)."""
_REFUSED_TENSORS = {
    "attn_q_norm.weight": "qk-norm (each head's q row normed before rope)",
    "attn_k_norm.weight": "qk-norm (each head's k row normed before rope)",
    "ffn_gate.bias": "a feed-forward gate bias",
    "ffn_up.bias": "a feed-forward up bias",
    "ffn_down.bias": "a feed-forward down bias",
    "attn_qkv.weight": "a fused qkv projection",
    "attn_post_norm.weight": "a post-attention norm",
    "ffn_post_norm.weight": "a post-feed-forward norm",
    "ffn_gate_shexp.weight": "shared experts",
    "exp_probs_b.bias": "an expert-selection bias",
    "ffn_gate_inp.bias": "a router bias",
}
"""Tensors of a model whose computation the step does not hold (the suffix after `blk.N.`)."""


def refuse_metadata(reader: gguf.GGUFReader, path: str | Path) -> None:
    """Every `llama.*` key and tensor that would change the computation is honoured or refused by name.

    Honoured: the hyperparameters `read_params` reads, `rope.scaling.type` none or linear with its
    `rope.scaling.factor` (`rope_factors`), `attention.causal` true, attention/output biases (the
    step adds them). Raises: ModelError naming the first other key (what it asks for, when known) or
    tensor (qk-norm, feed-forward biases, ...)."""
    arch = field_value(reader, "general.architecture", "llama")
    longrope = next((t.name for t in reader.tensors if t.name in LONGROPE_TENSORS), None)
    if longrope is not None:  # before its keys (`rope.scaling.attn_factor`, ...): the scaling is named
        raise ModelError(
            f"{path}: tensor `{longrope}` asks for longrope scaling (rope factors that change past the "
            "original context), which fwdshim does not compute"
        )
    for key in reader.fields:
        short = key.removeprefix(f"{arch}.")
        if not key.startswith(f"{arch}.") or short in _READ_KEYS or short in _ARCH_KEYS.get(arch, ()):
            continue
        what = _REFUSED_KEYS.get(key.removeprefix(f"{arch}."))
        value = _short(field_value(reader, key))
        if what is not None:
            raise ModelError(f"{path}: `{key}` = {value} asks for {what}, which fwdshim does not compute")
        raise ModelError(
            f"{path}: metadata key `{key}` = {value} is not one fwdshim reads (it may change the "
            "computation, so the model is refused rather than run without it)"
        )
    if field_value(reader, f"{arch}.attention.causal", True) is not True:
        raise ModelError(f"{path}: `{arch}.attention.causal` = false: fwdshim computes causal attention only")
    scaling = field_value(reader, f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise ModelError(
            f"{path}: `{arch}.rope.scaling.type` = {scaling!r} is not computed (fwdshim turns plain or "
            "linearly scaled rope angles, and the `rope_freqs.weight` factors)"
        )
    for t in reader.tensors:
        m = re.fullmatch(r"blk\.\d+\.(.+)", t.name)
        if m and arch in QK_NORM_ARCHITECTURES and m.group(1) in QK_NORM_TENSORS:
            continue  # the step norms each head's q and k rows
        if m and arch in FUSED_ARCHITECTURES and m.group(1) == "attn_qkv.weight":
            continue  # the step reads q, k and v as slices of its rows
        what = _REFUSED_TENSORS.get(m.group(1)) if m else None
        if what is not None:
            raise ModelError(f"{path}: tensor `{t.name}` asks for {what}, which fwdshim does not compute")


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


ROPE_FREQS = "rope_freqs.weight"
"""The tensor of Llama 3.1/3.2 rope scaling: one divisor per rope frequency."""


def rope_factors(reader: gguf.GGUFReader, path: str | Path, half: int) -> tuple[float, ...] | None:
    """The divisor of each of the `half` rope frequencies: `rope_freqs.weight` (llama.cpp's
    `freq_factors`: `θ_i = pos · base^(-2i/rope_dim) / f_i`) times a linear scaling factor
    (`rope.scaling.factor`, or the older `rope.scale_linear`: `θ_i / factor`, as llama.cpp's
    `freq_scale` whatever the scaling type; 0 means none). None when neither.

    Raises: ModelError for a factor tensor of the wrong size or with a value that is not a finite
    positive number, or a linear factor that is not."""
    factors = np.ones(half, dtype=np.float64)
    scaled = False
    t = next((t for t in reader.tensors if t.name == ROPE_FREQS), None)
    if t is not None:
        n = int(np.prod(t.shape))
        if n != half:
            raise ModelError(f"{path}: tensor `{ROPE_FREQS}` has {n} values for {half} rope frequencies")
        try:
            values = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float64).reshape(-1)
        except Exception:
            raise ModelError(f"{path}: tensor `{ROPE_FREQS}` is {QT(t.tensor_type).name}, not a float vector") from None
        if not (np.all(np.isfinite(values)) and np.all(values > 0)):
            raise ModelError(f"{path}: tensor `{ROPE_FREQS}` holds a factor that is not finite and positive")
        factors *= values
        scaled = True
    arch = field_value(reader, "general.architecture", "llama")
    key = next((k for k in (f"{arch}.rope.scaling.factor", f"{arch}.rope.scale_linear") if k in reader.fields), None)
    if key is not None:  # llama.cpp divides the frequencies by it whatever the scaling type (`freq_scale`)
        f = field_value(reader, key)
        if isinstance(f, bool) or not isinstance(f, (int, float, np.number)) or not np.isfinite(f) or f < 0:
            raise ModelError(f"{path}: rope scaling `{key}` = {f!r}: needs a finite positive factor")
        if f not in (0, 1):
            factors *= float(f)
            scaled = True
    return tuple(float(v) for v in factors) if scaled else None


# ---------------------------------------------------------------------------------------------
# the tensors a llama step reads

NORM, MATMUL, MANIFEST, BIAS = "norm", "matmul", "manifest", "bias"
"""How the step reads a tensor: a norm vector, a projection, a mixture-manifest weight, a bias vector."""


@dataclass(frozen=True)
class TensorUse:
    """A tensor the step reads: its logical shape (`[N, K]`, outermost first), its role and what the
    shape means (for the error message)."""

    shape: tuple[int, ...]
    role: str
    meaning: str
    optional: bool = False


def expected_tensors(p: LlamaParams, tied: bool) -> dict[str, TensorUse]:
    """Every tensor the step of `p` reads, by GGUF name, in the order the step reads them."""
    d, qd, kvd = p.d, p.h * p.hd, p.kv * p.hd
    out: dict[str, TensorUse] = {"token_embd.weight": TensorUse((p.vocab, d), MATMUL, "vocab x d")}
    for i in range(p.n_layer):
        b = f"blk.{i}."
        out[b + "attn_norm.weight"] = TensorUse((d,), NORM, "d")
        if p.fused:
            out[b + "attn_qkv.weight"] = TensorUse((qd + 2 * kvd, d), MATMUL, "(h + 2*kv)*hd x d")
        else:
            out[b + "attn_q.weight"] = TensorUse((qd, d), MATMUL, "h*hd x d")
            out[b + "attn_k.weight"] = TensorUse((kvd, d), MATMUL, "kv*hd x d")
            out[b + "attn_v.weight"] = TensorUse((kvd, d), MATMUL, "kv*hd x d")
        if p.qk_norm:
            out[b + "attn_q_norm.weight"] = TensorUse((p.hd,), NORM, "hd")
            out[b + "attn_k_norm.weight"] = TensorUse((p.hd,), NORM, "hd")
        for name, n, what in (("attn_q", qd, "h*hd"), ("attn_k", kvd, "kv*hd"), ("attn_v", kvd, "kv*hd")):
            # Qwen2's are part of its computation (llama.cpp requires them); a llama file may hold them
            out[b + name + ".bias"] = TensorUse((n,), BIAS, what, optional=p.arch != "qwen2")
        out[b + "attn_output.weight"] = TensorUse((d, qd), MATMUL, "d x h*hd")
        out[b + "attn_output.bias"] = TensorUse((d,), BIAS, "d", optional=True)
        if p.post_norms:
            out[b + "post_attention_norm.weight"] = TensorUse((d,), NORM, "d")
        out[b + "ffn_norm.weight"] = TensorUse((d,), NORM, "d")
        if p.moe:
            e, ff = p.n_expert, p.ff
            out[b + "ffn_gate_inp.weight"] = TensorUse((e, d), MANIFEST, "n_expert x d")
            out[b + "ffn_gate_exps.weight"] = TensorUse((e, ff, d), MANIFEST, "n_expert x ff x d")
            out[b + "ffn_up_exps.weight"] = TensorUse((e, ff, d), MANIFEST, "n_expert x ff x d")
            out[b + "ffn_down_exps.weight"] = TensorUse((e, d, ff), MANIFEST, "n_expert x d x ff")
        elif p.fused:
            out[b + "ffn_up.weight"] = TensorUse((2 * p.ff, d), MATMUL, "2*ff x d (gate rows, then up rows)")
            out[b + "ffn_down.weight"] = TensorUse((d, p.ff), MATMUL, "d x ff")
        else:
            out[b + "ffn_gate.weight"] = TensorUse((p.ff, d), MATMUL, "ff x d")
            out[b + "ffn_up.weight"] = TensorUse((p.ff, d), MATMUL, "ff x d")
            out[b + "ffn_down.weight"] = TensorUse((d, p.ff), MATMUL, "d x ff")
        if p.post_norms:
            out[b + "post_ffw_norm.weight"] = TensorUse((d,), NORM, "d")
    out["output_norm.weight"] = TensorUse((d,), NORM, "d")
    if not tied:
        out["output.weight"] = TensorUse((p.vocab, d), MATMUL, "vocab x d")
    return out


_BLOCK = re.compile(r"blk\.(\d+)\.")


def tensor_shape(t: gguf.ReaderTensor) -> tuple[int, ...]:
    """A reader tensor's logical shape, outermost first (GGUF's `ne` order reversed)."""
    return tuple(int(n) for n in reversed(t.shape.tolist()))


def check_tensors(reader: gguf.GGUFReader, p: LlamaParams, path: str | Path) -> dict[str, TensorUse]:
    """The tensors the step reads, each present with its expected shape, and no other.

    Raises: ModelError naming the first missing tensor, the first of an unexpected shape or the
    first the step would not read (a `blk.N` past `llama.block_count`: llama.cpp refuses a file of
    tensors its metadata does not account for, and running without them computes another model)."""
    have = {t.name: t for t in reader.tensors}
    blocks = 1 + max((int(m.group(1)) for n in have if (m := _BLOCK.match(n))), default=-1)
    if blocks != p.n_layer:  # before building a tensor list of `block_count` layers
        held = f"tensors of {blocks} blocks (blk.0 to blk.{blocks - 1})" if blocks else "no `blk.N` tensors"
        raise ModelError(f"{path}: `{p.arch}.block_count` = {p.n_layer}, but the file holds {held}")
    uses = expected_tensors(p, tied="output.weight" not in have)
    for name, use in uses.items():
        t = have.get(name)
        if t is None:
            if use.optional:
                continue
            raise ModelError(f"{path}: missing tensor `{name}` ({use.meaning} = {_dims(use.shape)})")
        shape = tensor_shape(t)
        if len(use.shape) == 1 and len(shape) == 2 and shape[0] == 1:
            shape = shape[1:]
        if shape != use.shape:
            raise ModelError(
                f"{path}: tensor `{name}` has shape {_dims(shape)}, expected {use.meaning} = {_dims(use.shape)}"
            )
    unused = next((n for n in have if n not in uses and n != ROPE_FREQS), None)  # rope_factors reads it
    if unused is not None:
        kind = f"a mixture of {p.n_expert} experts" if p.moe else "a dense model"
        raise ModelError(
            f"{path}: tensor `{unused}` is not one the llama step of {kind} reads "
            "(fwdshim would run the model without it)"
        )
    return {n: u for n, u in uses.items() if n in have}


def _dims(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))


def conversions(
    reader: gguf.GGUFReader, uses: dict[str, TensorUse], requantize: str, path: str | Path
) -> dict[str, QT]:
    """The tensors to convert, and to what: norm and bias vectors to F32; every mixture-manifest
    weight not already Q8_0 to Q8_0 (the mixture's kernels read Q8_0 only); under `q8_0` also the
    projections of a type other than F32, F16, BF16 and Q8_0.

    Raises: ModelError when a tensor to requantize has rows that are not whole Q8_0 blocks, or one
    holds no weights (an integer or F64 tensor)."""
    types = {t.name: t.tensor_type for t in reader.tensors}
    out: dict[str, QT] = {}
    for name, use in uses.items():
        qtype = types[name]
        if use.role in (NORM, BIAS):
            if qtype != QT.F32:
                out[name] = _convertible(name, qtype, path, QT.F32)
            continue
        if requantize == "none" and use.role != MANIFEST:  # the mixture's kernels read Q8_0 only
            if not _dequantizable(qtype):
                raise ModelError(
                    f"{path}: tensor `{name}` is {QT(qtype).name}, which fwdshim cannot read as weights "
                    "(gguf dequantizes F32, F16, BF16 and the quantized types)"
                )
            continue
        wanted = use.role == MANIFEST or qtype not in Q8_0_KEEPS
        if wanted and qtype != QT.Q8_0:
            if use.shape[-1] % 32:
                raise ModelError(
                    f"{path}: tensor `{name}` has rows of {use.shape[-1]} values, not whole Q8_0 blocks of 32"
                )
            out[name] = _convertible(name, qtype, path, QT.Q8_0)
    return out


def _dequantizable(qtype: QT) -> bool:
    return QT(qtype) in (QT.F32, QT.F16) or QT(qtype) in gguf.quants._type_traits


def _convertible(name: str, qtype: QT, path: str | Path, to: QT) -> QT:
    """`to`, when gguf can dequantize a tensor of `qtype` (F32, F16 and its quantized types, BF16
    included). Raises: ModelError naming the tensor (an integer or F64 tensor holds no weights)."""
    if _dequantizable(qtype):
        return to
    raise ModelError(
        f"{path}: tensor `{name}` is {QT(qtype).name}, which fwdshim cannot convert to {to.name} "
        "(gguf dequantizes F32, F16, BF16 and the quantized types)"
    )


# ---------------------------------------------------------------------------------------------
# the weights the step reads, Q/K rows un-permuted

_QK = re.compile(r"blk\.\d+\.attn_(q|k)\.(weight|bias)")


def unpermute_rows(a: np.ndarray, n_head: int) -> np.ndarray:
    """GGUF `llama` rows of Q or K (`[n_head*hd, ...]`, each head's rows interleaved `(0, half, 1,
    half+1, ...)`) back to the halves order `(0..half-1, half..hd-1)` that `fwd.rope` turns.

    The inverse of llama.cpp's `permute` in `convert_hf_to_gguf.py`; works on any row payload (the
    bytes of a quantized row move whole)."""
    hd = a.shape[0] // n_head
    return np.ascontiguousarray(a.reshape(n_head, hd // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape))


def check_finite(path, wd: WeightData) -> WeightData:
    """`wd` when its values are finite (`weights.first_nonfinite`: each block's scales, or each float
    value); else ModelError naming the file `path`, the tensor, the first bad block or value, and its
    row (`nonfinite_why`). A quantizer writes finite scales and a model finite values: such a tensor is
    corrupt, and refused before either path computes with it (the kernels scale each block's integer
    dot, the executor each dequantized value: with an inf scale the two disagreed)."""
    why = nonfinite_why(wd)
    if why is not None:
        raise ModelError(f"{path}: {why}")
    return wd


def sliced_name(tensor: str, start: int, stop: int) -> str:
    """The weight name of rows `start` to `stop - 1` of `tensor` (`row_slice` reads it back)."""
    return f"{tensor}[{start}:{stop}]"


class ModelWeights:
    """The `WeightStore` of an imported model: the GGUF file's tensors by name, with the Q/K rows of
    every layer un-permuted (`unpermute_rows`); each `WeightData` is built once and kept. A name
    `tensor[start:stop]` (`row_slice`) is those rows of `tensor`, a view of its blocks (rows are
    whole blocks: nothing is converted). `get` raises ModelError for a tensor holding an inf or NaN
    scale or value (`check_finite`), or a slice of rows the tensor does not have."""

    def __init__(self, reader: gguf.GGUFReader, params: LlamaParams, source: str | PathLike | None = None):
        self.reader = reader
        self.params = params
        self.source = source if source is not None else reader.data.filename
        """The file named in errors: the model's own, where `reader` holds its converted copy."""
        self._tensors = {t.name: t for t in reader.tensors}
        self._cache: dict[str, WeightData] = {}

    def get(self, name: str) -> WeightData:
        wd = self._cache.get(name)
        if wd is not None:
            return wd
        part = row_slice(name)
        if part is not None and part[0] in self._tensors:
            whole = self.get(part[0])
            start, stop = part[1:]
            if not start < stop <= whole.shape[0]:
                why = "names no rows (start < stop)" if start >= stop else f"reaches past the tensor's {whole.shape[0]} rows"
                raise ModelError(f"{self.source}: weight `{name}` {why}")
            wd = WeightData(name, whole.ggml, (stop - start, *whole.shape[1:]), whole.raw[start:stop])
            self._cache[name] = wd
            return wd
        t = self._tensors.get(name)
        if t is None:
            raise missing(name, self._tensors, str(self.reader.data.filename))
        shape = tensor_shape(t)
        if len(shape) == 2 and shape[0] == 1 and t.name.endswith((".bias", "norm.weight")):
            shape = shape[1:]
        raw = t.data
        check_finite(self.source, WeightData(name, ggml_of(t.tensor_type), shape, np.asarray(raw).reshape(*shape[:-1], -1)))
        m = _QK.fullmatch(name) if self.params.arch == "llama" else None  # the others keep HF's rows
        if m:  # checked first: an error names the file's rows, not these
            heads = self.params.h if m.group(1) == "q" else self.params.kv
            raw = unpermute_rows(np.asarray(raw).reshape(shape[0], -1), heads).reshape(raw.shape)
        wd = WeightData(name, ggml_of(t.tensor_type), shape, np.asarray(raw).reshape(*shape[:-1], -1))
        self._cache[name] = wd
        return wd

    def __contains__(self, name: object) -> bool:
        part = row_slice(name) if isinstance(name, str) else None
        return name in self._tensors or (part is not None and part[0] in self._tensors)

    def names(self) -> list[str]:
        return list(self._tensors)


class GGUFWeights:
    """The tensors of a GGUF file by name: `GGUFWeights(gguf.GGUFReader(path))` or `GGUFWeights(path)`
    (opened by `open_gguf`: its layout checked first; raises `ModelError`).

    Shapes are logical (`[N, K]`: GGUF's `ne` order reversed); data stays memory-mapped until used.
    `get` raises ModelError for a tensor holding an inf or NaN scale or value (`check_finite`)."""

    def __init__(self, reader: gguf.GGUFReader | str | PathLike):
        if not isinstance(reader, gguf.GGUFReader):
            reader = open_gguf(reader)
        self.reader = reader
        self._tensors = {t.name: t for t in reader.tensors}

    @functools.cache  # noqa: B019 - one store per model, kept for the model's life
    def get(self, name: str) -> WeightData:
        t = self._tensors.get(name)
        if t is None:
            raise missing(name, self._tensors, str(self.reader.data.filename))
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))
        return check_finite(self.reader.data.filename, WeightData(name, ggml_of(t.tensor_type), shape, t.data))

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def names(self) -> list[str]:
        return list(self._tensors)


# ---------------------------------------------------------------------------------------------
# sidecar metadata

CONVERTED_KEY = "fwdshim.converted"
"""Metadata key of a sidecar GGUF: the names of the tensors fwdshim converted."""
SOURCE_KEY = "fwdshim.source"
"""Metadata key of a cached sidecar GGUF: the `cache.source_stamp` of the file it was converted from."""
