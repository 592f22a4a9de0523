"""Decode steps on a GPU, with the plain-PyTorch peer in the same run: per-token wall time, graph time,
host time, kernels per layer, the HBM floor, and the ratios.

    python bench/decode_step.py [--shapes smollm2,llama8b] [--numerics dequant,int8-act]
        [--weights q8_0,q4_k_m] [--llama-bench /tmp/llamacpp/bin/llama-bench]
        [--context 1024] [--fill 512] [--steps 64] [--no-torch] [--check] [--results bench/RESULTS.md]
        [--json FILE] [--label TEXT] [--tuning KEY=VALUE ...] [--leave-out REGEX ...] [--empty REGEX ...]
        [--timeline REGEX]

Models are random, written as Q8_0 GGUF files straight from random blocks (int8 quants and f16 scales,
never float32 weights): `smollm2` is SmolLM2-135M's shape (30 layers, d 576, 9 heads over 3 kv heads
of 64, ff 1536, vocab 49152, tied embedding), `llama8b` Llama-3-8B's (32 layers, d 4096, 32 heads
over 8 of 128, ff 14336, vocab 128256, its own output matrix); the families of issue 41 at their
files' shapes: `qwen25_7b` (Qwen2.5-7B: Q/K/V biases), `qwen3_8b` (qk-norm), `qwen3_30b_a3b` (Qwen3-30B-A3B:
128 experts of 768, top 8; the experts Q8_0 whatever `--weights` says: the mixture's kernels read Q8_0),
for which the torch peer (Llama steps) is left out. For each shape and numerics the model
is decoded by `runner.Decoder` on the GPU at cache fill F (`--fill`, `Decoder.assume_filled(F)`: the caches taken as F rows, never decoded):

- `wall us`: per generated token, `runner.generate(..., logits=False)` (the device loop: step t+1
  enqueued before t's pick is read), `--steps` tokens after 8 warm-up tokens;
- `graph us`: the device loop's graph alone, replayed back to back (the position advancing);
- `host us`: wall − graph; `kernels/layer`: the graph's kernels over the layers;
- `floor us`: the bytes a step must read (the weights as the device holds them — of a mixture's
  expert stacks the top-k its router picks — and the K/V rows at fill F) over the read ceiling measured in the same run (`torch.sum` over 4 GiB);
- the peer: a bf16 `nn.Module` of the same shapes holding its KV caches, token and position as
  buffers (static cache of `--context` rows, masked attention, greedy argmax inside the step), run
  eager and through `torch.compile(mode="reduce-overhead")` (CUDA graphs), `--steps` steps each.

`--weights` picks the files' types (`MIXES`: every matrix Q8_0, Q4_0, Q4_1, Q5_K or Q6_K, or `q4_k_m`,
llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for output and for attn_v and ffn_down in its `use_more_bits`
layers); `--llama-bench PATH` also times llama.cpp's `llama-bench` on each same file in the same run
(`llama.cpp us`, and our wall time over it). `--check` first decodes 3 tokens on the GPU and the CPU executor (SmolLM2 shape) and prints their
relative difference. `--tuning KEY=VALUE` (repeatable) builds the step under that `Tuning` field
(`fwdshim.codegen.tuning`: `--tuning pre_wait_loads=0`, `--tuning merge=false`), so one device call can
time a tree with and without a choice; the table's label names it. `--leave-out REGEX` (repeatable) also times each shape
and numerics with the plan's launches whose kernel name matches REGEX left out of the captured graph
(`rms_norm`, `attention`, `quantize_one_word_1x`): what the step would take without them — an upper
bound on what fusing them away could save; `--empty REGEX` launches an empty kernel of the same grid and
block in place of each (`empty_kernel`): what their launch boundaries cost without their work. The values
such a step computes are wrong (the launches after read what the left-out ones wrote a step before), so
its row says `without /REGEX/` (`with /REGEX/ empty`) and its tokens mean nothing. `--timeline REGEX`
also runs the step with the matching launches stamped (`stamping`, `bench/stages.py`: the global timer at
each block's entry, wait and end), then one step from the fill, and prints a middle layer's launches:
when their blocks entered, were released from their wait and ended — the launches' overlap and gaps
(its row says `with /REGEX/ stamped`: the stamps' stores are in its time). Prints one JSON object per
measurement, then a table; with `--results` appends the table to that file.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.environ.get("FWDSHIM_SRC") or str(Path(__file__).resolve().parent.parent))

SHAPES = {
    "smollm2": dict(n_layer=30, d=576, ff=1536, h=9, kv=3, hd=64, rope_dim=64, rope_base=100000.0, eps=1e-5,
                    vocab=49152, tied=True),
    "llama8b": dict(n_layer=32, d=4096, ff=14336, h=32, kv=8, hd=128, rope_dim=128, rope_base=500000.0,
                    eps=1e-5, vocab=128256, tied=False),
    # the families of issue 41 (their files' shapes; the torch peer computes Llama steps only)
    "qwen25_7b": dict(n_layer=28, d=3584, ff=18944, h=28, kv=4, hd=128, rope_dim=128, rope_base=1000000.0,
                      eps=1e-6, vocab=152064, tied=False, arch="qwen2"),
    "qwen3_8b": dict(n_layer=36, d=4096, ff=12288, h=32, kv=8, hd=128, rope_dim=128, rope_base=1000000.0,
                     eps=1e-6, vocab=151936, tied=False, arch="qwen3"),
    "qwen3_30b_a3b": dict(n_layer=48, d=2048, ff=768, h=32, kv=4, hd=128, rope_dim=128, rope_base=1000000.0,
                          eps=1e-6, vocab=151936, tied=False, arch="qwen3moe", n_expert=128, top_k=8),
}  # fmt: skip


def emit(out: list, **rec) -> None:
    print(json.dumps(rec), flush=True)
    out.append(rec)


# ---------------------------------------------------------------------------------------------
# the model file


MIXES = ("q8_0", "q4_0", "q4_1", "q5_k", "q6_k", "q4_k_m")
"""The weight mixes `--weights` writes: every matrix of one type, or `q4_k_m` (`mix_types`)."""

_BLOCK = {  # type: (values a block, bytes a block, byte offsets of its f16 scales, divisor of its scale)
    "q4_0": (32, 18, (0,), 8), "q4_1": (32, 20, (0, 2), 8), "q5_0": (32, 22, (0,), 16), "q5_1": (32, 24, (0, 2), 16),
    "q2_k": (256, 84, (80, 82), 64), "q3_k": (256, 110, (108,), 128), "q4_k": (256, 144, (0, 2), 256),
    "q5_k": (256, 176, (0, 2), 512), "q6_k": (256, 210, (208,), 4096), "q8_0": (32, 34, (0,), 128),
}  # fmt: skip
"""The layout facts a random file of each type needs (GGML's block formats); the divisor keeps a
row's values near `gain / sqrt(K)` (its largest quant times its largest sub-block scale)."""


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's `use_more_bits` (llama-quant.cpp): the layers whose attn_v and ffn_down a Q4_K_M
    file keeps in Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


_FALLBACK = {"q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
"""llama.cpp's quantize's type for a K-quant's matrix whose rows are not whole super-blocks of 256."""


def mix_types(mix: str, name: str, n_layer: int, k: int = 256) -> str:
    """The GGML type of matrix `name` (rows of `k` values) in a file of `mix` (`MIXES`): `q4_k_m` as
    llama.cpp's quantize mixes it (Q4_K; Q6_K for output.weight, and for attn_v and ffn_down in
    `use_more_bits` layers); a K-quant's rows not of whole super-blocks take its fallback (`_FALLBACK`)."""
    t = mix
    if mix == "q4_k_m":
        t = "q4_k"
        if name == "output.weight":
            t = "q6_k"
        elif name.startswith("blk.") and name.endswith(("attn_v.weight", "ffn_down.weight")):
            t = "q6_k" if use_more_bits(int(name.split(".")[1]), n_layer) else "q4_k"
    return _FALLBACK[t] if t in _FALLBACK and k % 256 else t


def _q8_0_matrices(rng, gain: float):
    """A function `(name, n, k) -> (raw blocks, type)` of random Q8_0 matrices: quants uniform in
    -127..127 (slices of one pool), scales `gain/sqrt(K)/73` times 0.5..1.5 as f16."""
    from gguf import GGMLQuantizationType as QT

    pool = rng.integers(-127, 128, size=1 << 26, dtype=np.int8)
    pool = np.concatenate([pool, pool])

    def matrix(name: str, n: int, k: int):
        nb = n * k // 32
        start = int(rng.integers(0, 1 << 26))
        raw = np.empty((nb, 34), np.uint8)
        scale = (gain / np.sqrt(k) / 73.0 * (0.5 + rng.random(nb))).astype(np.float16)
        raw[:, :2] = scale.view(np.uint8).reshape(nb, 2)
        quants = pool[start : start + nb * 32] if nb * 32 <= pool.size // 2 else np.resize(pool, nb * 32)
        raw[:, 2:] = quants.view(np.uint8).reshape(nb, 32)
        return raw.reshape(n, k // 32 * 34), QT.Q8_0

    return matrix


def _mix_matrices(rng, gain: float, mix: str, n_layer: int):
    """A function `(name, n, k) -> (raw blocks, type)` of random matrices of `mix`'s types
    (`mix_types`): random bytes, each block's f16 scales `gain / sqrt(K) / divisor` times 0.5..1.5."""
    from gguf import GGMLQuantizationType as QT

    pool = rng.integers(0, 256, size=1 << 27, dtype=np.uint8)

    def matrix(name: str, n: int, k: int):
        t = mix_types(mix, name, n_layer, k)
        per, size, f16s, div = _BLOCK[t]
        nb = n * k // per
        start = int(rng.integers(0, pool.size - 1))
        raw = np.resize(np.roll(pool, -start)[: nb * size] if nb * size <= pool.size else pool, nb * size).reshape(nb, size)
        for off in f16s:
            d = (gain / np.sqrt(k) / div * (0.5 + rng.random(nb))).astype(np.float16)
            raw[:, off : off + 2] = d.view(np.uint8).reshape(nb, 2)
        return raw.reshape(n, k // per * size), QT[t.upper()]

    return matrix


def write_random(path: Path, shape: dict, context: int, mix: str = "q8_0", seed: int = 1, gain: float = 1.0) -> Path:
    """A GGUF of `shape` (of its `arch`, default `llama`) whose matrices are random blocks of `mix`'s
    types (`_q8_0_matrices`, `_mix_matrices`; a mixture's experts and router Q8_0, the type its kernels
    read), vectors `1 + N(0, 0.1)` F32 (a Qwen2 file's Q/K/V biases too), `tokenizer.ggml.model = none`
    (so llama.cpp reads it too)."""
    import gguf
    from gguf import GGMLQuantizationType as QT

    try:
        from fwdshim.frontend.gguf_model import LlamaParams, expected_tensors
    except ImportError:  # an older checkout (FWDSHIM_SRC)
        from fwdshim.importer import LlamaParams, expected_tensors

    p = LlamaParams(**{k: v for k, v in shape.items() if k != "tied"}, context_length=context)
    rng = np.random.default_rng(seed)
    matrix = _q8_0_matrices(rng, gain) if mix == "q8_0" else _mix_matrices(rng, gain, mix, p.n_layer)
    manifest = _q8_0_matrices(rng, gain) if p.moe else None
    tmp = path.with_suffix(".tmp")
    w = gguf.GGUFWriter(tmp, p.arch)
    w.add_name("fwdshim-bench-random" + ("" if mix == "q8_0" else f"-{mix}"))
    for add, v in ((w.add_block_count, p.n_layer), (w.add_context_length, context), (w.add_embedding_length, p.d),
                   (w.add_feed_forward_length, p.ff), (w.add_head_count, p.h), (w.add_head_count_kv, p.kv),
                   (w.add_rope_dimension_count, p.rope_dim), (w.add_rope_freq_base, p.rope_base),
                   (w.add_layer_norm_rms_eps, p.eps), (w.add_vocab_size, p.vocab)):  # fmt: skip
        add(v)
    if p.h * p.hd != p.d or p.arch != "llama":  # the converters of Qwen files write the head size
        w.add_key_length(p.hd)
        w.add_value_length(p.hd)
    if p.moe:
        w.add_expert_count(p.n_expert)
        w.add_expert_used_count(p.top_k)
        if p.arch == "qwen3moe":
            w.add_expert_feed_forward_length(p.ff)
    w.add_tokenizer_model("none")
    for name, use in expected_tensors(p, tied=shape["tied"]).items():
        if use.optional and not (p.arch == "qwen2" and name.endswith(("attn_q.bias", "attn_k.bias", "attn_v.bias"))):
            continue
        if len(use.shape) == 1:
            w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(use.shape)).astype(np.float32), raw_dtype=QT.F32)
            continue
        if use.role == "manifest":  # a router [E, d] or an expert stack [E, n, k]: rows of Q8_0
            *lead, k = use.shape
            raw, qt = manifest(name, int(np.prod(lead)), k)
            w.add_tensor(name, raw.reshape(*lead, -1), raw_dtype=qt)
            continue
        raw, qt = matrix(name, *use.shape)
        w.add_tensor(name, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return path


def write_random_q8_0(path: Path, shape: dict, context: int, seed: int = 1, gain: float = 1.0) -> Path:
    """`write_random` of Q8_0 matrices."""
    return write_random(path, shape, context, "q8_0", seed, gain)


def model_path(name: str, context: int, mix: str = "q8_0") -> Path:
    """The random file of shape `name` and weights `mix` (written once, under the temp directory)."""
    path = Path(tempfile.gettempdir()) / "fwdshim_bench" / f"{name}_{mix}_c{context}.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        write_random(path, SHAPES[name], context, mix)
    return path


def load(name: str, context: int, mix: str = "q8_0"):
    try:
        from fwdshim.frontend.importer import import_gguf
    except ImportError:  # an older checkout (FWDSHIM_SRC)
        from fwdshim.importer import import_gguf

    return import_gguf(model_path(name, context, mix), context=context)


def bench_llamacpp(out: list, binary: str, path: Path, name: str, mix: str, args) -> float | None:
    """µs a token of llama.cpp's `llama-bench` on the same file (CUDA, all layers on the GPU, flash
    attention, `--steps` tokens generated after a context of `--fill`, 3 repetitions); None (and an
    error record) when it fails."""
    import subprocess

    cmd = [binary, "-m", str(path), "-ngl", "99", "-fa", "1", "-p", "0", "-n", str(args.steps), "-d", str(args.fill),
           "-r", "3", "-o", "jsonl"]  # fmt: skip
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        recs = [json.loads(ln) for ln in res.stdout.splitlines() if ln.startswith("{")]
        ts = [r["avg_ts"] for r in recs if r.get("n_gen")]
        if res.returncode or not ts:
            raise RuntimeError(f"exit {res.returncode}: {(res.stderr or res.stdout)[-400:]}")
    except Exception as e:  # noqa: BLE001 - the peer failing must not lose our rows
        emit(out, what="error", shape=name, weights=mix, numerics="llama.cpp", error=f"{type(e).__name__}: {e}")
        return None
    us = 1e6 / ts[0]
    emit(out, what="llama.cpp", shape=name, weights=mix, us_per_token=round(us, 1), cmd=" ".join(cmd))
    return us


# ---------------------------------------------------------------------------------------------
# fwdshim


def read_ceiling_gbs() -> float:
    import torch

    a = torch.ones(1 << 30, device="cuda", dtype=torch.float32)  # 4 GiB
    for _ in range(2):
        a.sum()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a.sum()
    torch.cuda.synchronize()
    gbs = a.numel() * 4 * 10 / (time.perf_counter() - t0) / 1e9
    del a
    torch.cuda.empty_cache()
    return gbs


def step_bytes(rt, fill: int, experts: tuple[int, int] | None = None) -> int:
    """Bytes a step must read: every weight part once (of a mixture's expert stacks `[E, n, k]`, the
    `top_k` of `E` experts its router picks: `experts = (E, top_k)`), the K and V cache rows up to
    `fill`."""
    total = 0
    for b in rt.plan.buffers:
        if b.role == "weight":
            size = sum(p.size * np.dtype(p.dtype).itemsize for p in b.parts)
            if experts and len(b.shape) == 3 and b.shape[0] == experts[0]:
                size = size * experts[1] // experts[0]
            total += size
        elif b.role == "cache":
            width = int(np.prod(b.shape[1:]))
            total += fill * width * 4
    return total


def empty_kernel(like):
    """An empty kernel of the grid and block of kernel `like`, taking `like`'s first parameter (under
    programmatic dependent launch it waits and lets the next launch in as every plan kernel does):
    what `--empty` launches in place of a plan's launch."""
    from fwdshim.codegen.kernel import Param, build

    p0 = like.params[0]
    body = "@cuda.jit(cache=True)\ndef empty_k(a):\n    if cuda.threadIdx.x == 1 << 20:\n        a[0] = a[0]\n"
    shape = "x".join(map(str, (*like.grid, *like.block)))
    return build(f"empty_{shape}_{p0.dtype}{p0.size}", body, "empty_k", like.grid, like.block,
                 [Param("a", p0.dtype, p0.size, "inout", "untouched")], "an empty launch (bench/decode_step.py --empty)",
                 pdl=like.pdl)  # fmt: skip


@contextlib.contextmanager
def substituting(launch_of):
    """Within it, a compiled step launches (and captures) `launch_of(plan, i, kernel, args)` for its
    plan's launch `i` instead of the launch itself: a `(kernel, args)` to launch, or None to launch
    nothing (`leaving_out`, `stamping`)."""
    from fwdshim.codegen import runtime

    saved = runtime.CompiledForward._launch_all

    def launch_all(self, stream):
        for i, (launch, launch_args) in enumerate(zip(self.plan.launches, self._args, strict=True)):
            got = launch_of(self.plan, i, launch.kernel, launch_args)
            if got is None:
                continue
            k, launch_args = got
            if self.simulated:
                k.fn[k.grid, k.block](*launch_args)
            else:
                k.launch_on(stream, *launch_args)

    runtime.CompiledForward._launch_all = launch_all
    try:
        yield
    finally:
        runtime.CompiledForward._launch_all = saved


@contextlib.contextmanager
def leaving_out(regex: str, empty: bool = False):
    """Within it, a compiled step captures and launches none of its plan's launches whose kernel name
    matches `regex` ("" leaves nothing out) — with `empty`, an empty kernel of the same grid and block
    in place of each (`empty_kernel`) — and the captured graphs' kernel counts are not checked against
    the plan (`--leave-out`, `--empty`: timing only, the values are wrong)."""
    if not regex:
        yield
        return
    from fwdshim.codegen import loop as loop_mod
    from fwdshim.codegen import runtime

    rx = re.compile(regex)
    saved = runtime._check_nodes, loop_mod._kernel_nodes
    stand_ins: dict[str, object] = {}

    def launch_of(plan, i, k, launch_args):
        if i == 0 and not any(rx.search(la.kernel.name) for la in plan.launches):  # it would time the whole step
            shown = sorted({re.sub(r"_[0-9a-f]{8}\b", "_…", la.kernel.name) for la in plan.launches})
            raise ValueError(f"/{regex}/ matches none of the step's kernels ({', '.join(shown)}): a stage merged "
                             "into another launch is left out only with it (its name is merged_…)")  # fmt: skip
        if not rx.search(k.name):
            return k, launch_args
        return (stand_ins.setdefault(k.name, empty_kernel(k)), launch_args[:1]) if empty else None

    runtime._check_nodes = lambda gb, handle, plan: 0
    loop_mod._kernel_nodes = lambda gb, handle: None
    try:
        with substituting(launch_of):
            yield
    finally:
        runtime._check_nodes, loop_mod._kernel_nodes = saved


@contextlib.contextmanager
def stamping(regex: str):
    """Within it, a compiled step captures each launch whose kernel name matches `regex` stamped
    (`bench/stages.py`: thread 0 of every block stamps the global timer at its entry, at the end of its
    wait and at its end — the attention at its stages too), each launch with stamp arrays of its own;
    yields the list the capture fills, one `(plan index, kernel name, blocks, stage names, stamps,
    clocks)` a stamped launch (`stages.timeline`'s `marks`, the arrays on the device). The values the
    step computes are the same; its time includes the stamps' stores."""
    import stages
    from numba import cuda

    rx = re.compile(regex)
    made: dict[int, tuple] = {}
    marks: list = []

    def launch_of(plan, i, k, launch_args):
        if not rx.search(k.name):
            return k, launch_args
        if i not in made:
            at = (stages.WAITED, *stages.ATTENTION_STAGES[:-1], stages.Stage("end", None)) \
                if k.name.startswith("attention") else stages.STEP_STAGES  # fmt: skip
            stamped = stages.instrument(k, at)
            arrays = [cuda.to_device(np.zeros(stamped.params[-1].size, np.int64)) for _ in range(2)]
            made[i] = (stamped, arrays)
            marks.append((i, k.name, k.grid[0], ["entry", *(st.name for st in at)], *arrays))
        stamped, arrays = made[i]
        return stamped, (*launch_args, *arrays)

    with substituting(launch_of):
        yield marks


def timeline_window(marks: list, per_layer: int) -> range | None:
    """The plan indices of one layer's launches to show: from two before the stamped attention launch
    nearest the plan's middle (else the stamped launch nearest it), `per_layer + 3` of them."""
    if not marks:
        return None
    mid = max(i for i, *_ in marks) / 2
    attn = [i for i, name, *_ in marks if name.startswith("attention")] or [i for i, *_ in marks]
    start = min(attn, key=lambda i: (abs(i - mid), i))
    return range(max(0, start - 2), start + per_layer + 1)


def bench_fwdshim(out: list, name: str, m, numerics: str, args, ceiling: float, leave_out: str = "", empty: bool = False,
                  stamp: str = "", mix: str = "q8_0") -> dict:  # fmt: skip
    try:
        from fwdshim.tools.runner import Decoder, generate
    except ImportError:  # an older checkout (FWDSHIM_SRC)
        from fwdshim.runner import Decoder, generate

    t0 = time.perf_counter()
    with leaving_out(leave_out, empty), (stamping(stamp) if stamp else contextlib.nullcontext([])) as marks:
        dec = Decoder(m, numerics, "gpu", **({"tuning": args.tuning_value} if args.tuning else {}))
    fwd = dec.forward
    loop, rt = fwd.loop, fwd.runtime
    build_s = time.perf_counter() - t0
    n_layer = dec.params.n_layer
    fill = args.fill
    # the caches taken as filled to `fill` rows without decoding them: the attention reads `fill` rows
    fill_to = getattr(dec, "assume_filled", None) or functools.partial(setattr, dec, "pos")  # an older checkout
    fill_to(fill)
    generate(dec, [7], 8, logits=False)  # warm-up
    fill_to(fill)
    gen = generate(dec, [7], args.steps + 1, logits=False)
    wall = 1e6 * gen.decode_s / max(1, len(gen.tokens) - 1)
    loop.feed(fill, [7])
    reps = args.steps
    loop.graph.launch(rt.stream)
    rt.sync()
    loop.feed(fill, [7])
    t0 = time.perf_counter()
    for _ in range(reps):
        loop.graph.launch(rt.stream)
    rt.sync()
    graph = 1e6 * (time.perf_counter() - t0) / reps
    moe = SHAPES[name].get("n_expert")
    nbytes = step_bytes(rt, fill, (moe, SHAPES[name]["top_k"]) if moe else None)
    floor = nbytes / (ceiling * 1e9) * 1e6
    label = f" with /{leave_out}/ empty" if empty else f" without /{leave_out}/" if leave_out else ""
    rec = dict(
        what="fwdshim", shape=name, weights=mix, numerics=numerics + label + (f" with /{stamp}/ stamped" if stamp else ""), fill=fill, wall_us=round(wall, 1), graph_us=round(graph, 1),
        host_us=round(wall - graph, 1), host_share=round((wall - graph) / wall, 3), tokens_per_s=round(1e6 / wall, 1),
        kernels=loop.kernel_count, kernels_per_layer=round(loop.kernel_count / n_layer, 2), step_mb=round(nbytes / 1e6, 1),
        floor_us=round(floor, 1), build_s=round(build_s, 1), tokens=gen.tokens[:8],
    )  # fmt: skip
    if stamp:  # one more step from the fill, its stamps alone
        import stages

        if not marks:
            raise ValueError(f"/{stamp}/ matches none of the step's kernels")
        for *_, st, ck in marks:
            st.copy_to_device(np.zeros(st.size, np.int64))
            ck.copy_to_device(np.zeros(ck.size, np.int64))
        loop.feed(fill, [7])
        loop.graph.launch(rt.stream)
        rt.sync()
        host = [(i, k, nb, names, st.copy_to_host(), ck.copy_to_host()) for i, k, nb, names, st, ck in marks]
        rec["timeline"] = stages.timeline(host, timeline_window(host, round(loop.kernel_count / n_layer)))
    emit(out, **rec)
    del dec, fwd, loop, rt
    return rec


# ---------------------------------------------------------------------------------------------
# the peer


def torch_peer(shape: dict, context: int):
    import torch
    from torch import nn

    bf = torch.bfloat16
    dev = "cuda"

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            s = shape
            d, h, kv, hd, ff, vocab, L = s["d"], s["h"], s["kv"], s["hd"], s["ff"], s["vocab"], s["n_layer"]
            self.s = (d, h, kv, hd, ff, vocab, L)
            r = lambda *sh: (torch.randn(*sh, device=dev, dtype=bf) / sh[-1] ** 0.5)  # noqa: E731
            self.embd = nn.Parameter(0.3 * torch.randn(vocab, d, device=dev, dtype=bf), requires_grad=False)
            self.out = self.embd if s["tied"] else nn.Parameter(r(vocab, d), requires_grad=False)
            self.wqkv = nn.ParameterList([nn.Parameter(r((h + 2 * kv) * hd, d), requires_grad=False) for _ in range(L)])
            self.wo = nn.ParameterList([nn.Parameter(r(d, h * hd), requires_grad=False) for _ in range(L)])
            self.wgu = nn.ParameterList([nn.Parameter(r(2 * ff, d), requires_grad=False) for _ in range(L)])
            self.wd = nn.ParameterList([nn.Parameter(r(d, ff), requires_grad=False) for _ in range(L)])
            self.n1 = nn.ParameterList([nn.Parameter(torch.ones(d, device=dev, dtype=bf), requires_grad=False) for _ in range(L)])
            self.n2 = nn.ParameterList([nn.Parameter(torch.ones(d, device=dev, dtype=bf), requires_grad=False) for _ in range(L)])
            self.nf = nn.Parameter(torch.ones(d, device=dev, dtype=bf), requires_grad=False)
            self.register_buffer("k_cache", torch.zeros(L, context, kv, hd, device=dev, dtype=bf))
            self.register_buffer("v_cache", torch.zeros(L, context, kv, hd, device=dev, dtype=bf))
            inv = 1.0 / (s["rope_base"] ** (torch.arange(0, hd, 2, device=dev, dtype=torch.float32) / hd))
            ang = torch.arange(context, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
            self.register_buffer("cos", ang.cos().to(bf))
            self.register_buffer("sin", ang.sin().to(bf))
            self.register_buffer("tok", torch.tensor([7], device=dev))
            self.register_buffer("pos", torch.tensor([0], device=dev))
            self.register_buffer("ar", torch.arange(context, device=dev))

        @staticmethod
        def rms(x, w):
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(bf) * w

        def rope(self, x, cos, sin):
            half = x.shape[-1] // 2
            a, b = x[..., :half], x[..., half:]
            return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)

        def forward(self):
            d, h, kv, hd, ff, vocab, L = self.s
            g = h // kv
            pos = self.pos
            x = self.embd[self.tok]  # [1, d]
            cos, sin = self.cos[pos], self.sin[pos]  # [1, hd/2]
            mask = (self.ar <= pos)[None, None, :]  # [1, 1, context]
            for i in range(L):
                hh = self.rms(x, self.n1[i])
                qkv = hh @ self.wqkv[i].t()
                q = qkv[:, : h * hd].view(h, hd)
                k = qkv[:, h * hd : (h + kv) * hd].view(kv, hd)
                v = qkv[:, (h + kv) * hd :].view(1, kv, hd)
                q = self.rope(q, cos, sin)
                k = self.rope(k, cos, sin).view(1, kv, hd)
                self.k_cache[i].index_copy_(0, pos, k)
                self.v_cache[i].index_copy_(0, pos, v)
                kc, vc = self.k_cache[i], self.v_cache[i]  # [context, kv, hd]
                sc = torch.einsum("kgd,ckd->kgc", q.view(kv, g, hd), kc) * (hd ** -0.5)
                sc = sc.float().masked_fill(~mask, float("-inf")).softmax(-1).to(bf)
                att = torch.einsum("kgc,ckd->kgd", sc, vc).reshape(1, h * hd)
                x = x + att @ self.wo[i].t()
                hh = self.rms(x, self.n2[i])
                gu = hh @ self.wgu[i].t()
                x = x + (torch.nn.functional.silu(gu[:, :ff]) * gu[:, ff:]) @ self.wd[i].t()
            logits = self.rms(x, self.nf) @ self.out.t()
            self.tok.copy_(logits.argmax(-1))
            self.pos.add_(1)
            return self.tok

    return Step()


def bench_torch(out: list, name: str, args) -> dict:
    import torch

    shape = SHAPES[name]
    model = torch_peer(shape, args.context)
    res = {}
    with torch.no_grad():
        for mode in ("eager", "compile"):
            fn = model if mode == "eager" else torch.compile(model, mode="reduce-overhead")
            t0 = time.perf_counter()
            model.pos.fill_(args.fill)
            for _ in range(3 if mode == "eager" else 6):
                if mode == "compile":
                    torch.compiler.cudagraph_mark_step_begin()
                fn()
            torch.cuda.synchronize()
            warm = time.perf_counter() - t0
            model.pos.fill_(args.fill)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                if mode == "compile":
                    torch.compiler.cudagraph_mark_step_begin()
                fn()
            torch.cuda.synchronize()
            us = 1e6 * (time.perf_counter() - t0) / args.steps
            res[mode] = us
            emit(out, what=f"torch_{mode}", shape=name, fill=args.fill, wall_us=round(us, 1), warm_s=round(warm, 1))
    del model
    torch.cuda.empty_cache()
    return res


# ---------------------------------------------------------------------------------------------


def tuning_of(items: list[str]):
    """The `Tuning` of the `--tuning KEY=VALUE` items (`Tuning.parse`); ValueError (one line) for an
    unknown key or a bad value."""
    from fwdshim.codegen.tuning import Tuning

    try:
        return Tuning.parse(items)
    except ValueError as e:
        raise ValueError(f"--tuning: {e}") from None


def main() -> None:
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--shapes", default="smollm2,llama8b", help=f"model shapes, comma-separated, of {', '.join(SHAPES)} (default: both)")
    ap.add_argument("--numerics", default="dequant,int8-act", help="numerics, comma-separated, of dequant, int8-act, two-pass-int8 (default: dequant,int8-act)")
    ap.add_argument("--context", type=int, default=1024, help="the attention's capacity in rows (default 1024)")
    ap.add_argument("--fill", type=int, default=512, help="cache rows already filled when timing starts (default 512)")
    ap.add_argument("--steps", type=int, default=64, help="tokens timed per row, after 8 warm-up tokens (default 64)")
    ap.add_argument("--no-torch", action="store_true", help="leave out the PyTorch peer (eager and torch.compile)")
    ap.add_argument("--check", action="store_true", help="first compare 3 tokens' logits, GPU against the CPU executor (SmolLM2 shape)")
    ap.add_argument("--weights", default="q8_0", help=f"weight mixes, comma-separated, of {', '.join(MIXES)} (default q8_0): "
                    "every matrix of that type, or q4_k_m as llama.cpp's quantize mixes it (Q4_K; Q6_K for output and "
                    "for attn_v and ffn_down in its use_more_bits layers)")
    ap.add_argument("--llama-bench", default="", metavar="PATH",
                    help="llama.cpp's llama-bench binary (../shared/tools/llamacpp/build.sh builds it): also time it on "
                         "each same file (-ngl 99 -fa 1 -p 0 -n STEPS -d FILL)")
    ap.add_argument("--results", default="", help="append the table to this markdown file")
    ap.add_argument("--json", default="", help="write the measurements to this file, one JSON object a line")
    ap.add_argument("--label", default="", help="a label for the table's heading")
    ap.add_argument("--tuning", action="append", default=[], metavar="KEY=VALUE",
                    help="build the step under this Tuning field (repeatable; fwdshim.codegen.tuning), e.g. pre_wait_loads=0, "
                         "merge=false; the table's label says so")  # fmt: skip
    ap.add_argument("--leave-out", action="append", default=[], metavar="REGEX",
                    help="also time each step with the launches whose kernel name REGEX matches (re.search; e.g. rms_norm, "
                         "attention; a merged launch is named merged_...) left out of the graph (repeatable): what fusing "
                         "them away could save at most; the step's outputs are then meaningless, and a REGEX matching no "
                         "launch is an error row")  # fmt: skip
    ap.add_argument("--timeline", default="", metavar="REGEX",
                    help="also run each shape and numerics with the launches whose kernel name REGEX matches stamped "
                         "(bench/stages.py: thread 0 of every block stamps the GPU's global timer at its entry, the end "
                         "of its wait and its end; `.` for all), time it, then replay one step from the fill and print a "
                         "layer's launches: when their blocks entered, were released and ended")
    ap.add_argument("--empty", action="append", default=[], metavar="REGEX",
                    help="also time each step with an empty kernel of the same grid and block in place of each launch "
                         "whose kernel name REGEX matches (repeatable): what the launches' boundaries cost without their "
                         "work (outputs meaningless, as with --leave-out)")  # fmt: skip
    args = ap.parse_args()
    for regex in args.leave_out + args.empty + ([args.timeline] if args.timeline else []):
        try:
            re.compile(regex)
        except re.error as e:
            flag = "leave-out" if regex in args.leave_out else "empty" if regex in args.empty else "timeline"
            ap.error(f"--{flag} {regex!r}: not a regular expression ({e})")
    try:
        args.tuning_value = tuning_of(args.tuning)
    except ValueError as e:
        ap.error(str(e))
    if args.tuning:
        args.label = " ".join([args.label, *(f"`{s}`" for s in args.tuning)]).strip()
    for name in args.shapes.split(","):
        if name not in SHAPES:
            ap.error(f"--shapes: unknown shape {name!r} (known: {', '.join(SHAPES)})")
    for mix in args.weights.split(","):
        if mix not in MIXES:
            ap.error(f"--weights: unknown mix {mix!r} (known: {', '.join(MIXES)})")
    if args.llama_bench and not os.access(args.llama_bench, os.X_OK):
        ap.error(f"--llama-bench {args.llama_bench}: no executable there (../shared/tools/llamacpp/build.sh builds it)")
    for numerics in args.numerics.split(","):
        if numerics not in ("dequant", "int8-act", "two-pass-int8"):
            ap.error(f"--numerics: unknown numerics {numerics!r} (dequant, int8-act, two-pass-int8)")
    if args.fill < 0 or args.steps < 1 or args.fill + max(8, args.steps + 1) > args.context:
        ap.error(f"--fill {args.fill}, --steps {args.steps}, --context {args.context}: needs fill >= 0, steps >= 1, and the rows decoded from the fill (8 warm-up tokens, then steps + 1) within the context")
    from numba import config, cuda

    if config.ENABLE_CUDASIM:  # its cuda.is_available() is true
        ap.exit(1, f"{ap.prog}: NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU\n")
    if not cuda.is_available():
        ap.exit(1, f"{ap.prog}: no CUDA GPU here (the benchmarks time kernels on a device; the tests run without one)\n")
    out: list = []
    ceiling = read_ceiling_gbs()
    emit(out, what="read_ceiling", gbs=round(ceiling, 1))
    rows = []
    for name, mix in ((n, x) for n in args.shapes.split(",") for x in args.weights.split(",")):
        m = load(name, args.context, mix)
        if args.check and name == "smollm2":
            try:
                from fwdshim.tools.runner import Decoder
            except ImportError:  # an older checkout (FWDSHIM_SRC)
                from fwdshim.runner import Decoder
            for numerics in args.numerics.split(","):
                gpu, cpu = Decoder(m, numerics, "gpu", tuning=args.tuning_value), Decoder(m, numerics, "cpu")
                errs = []
                for tok in (5, 123, 4567):
                    g, c = gpu.step(tok), cpu.step(tok)
                    errs.append(float(np.linalg.norm(g - c) / np.linalg.norm(c)))
                emit(out, what="check", shape=name, numerics=numerics, rel_err=errs,
                     argmax_equal=bool(np.argmax(g) == np.argmax(c)))  # fmt: skip
                del gpu, cpu
        recs = []
        for numerics in args.numerics.split(","):
            rows_of = [("", False, ""), *((r, False, "") for r in args.leave_out), *((r, True, "") for r in args.empty)]
            for regex, empty, stamp in rows_of + ([("", False, args.timeline)] if args.timeline else []):
                try:
                    recs.append(bench_fwdshim(out, name, m, numerics, args, ceiling, regex, empty, stamp, mix))
                except Exception as e:  # noqa: BLE001 - one failing row must not lose the others
                    emit(out, what="error", shape=name, weights=mix, numerics=numerics, error=f"{type(e).__name__}: {e}")
        del m
        peer = {}
        if args.llama_bench:
            peer["llama.cpp"] = bench_llamacpp(out, args.llama_bench, model_path(name, args.context, mix), name, mix, args)
        if not args.no_torch and mix == args.weights.split(",")[0] and SHAPES[name].get("arch", "llama") == "llama":
            try:
                peer.update(bench_torch(out, name, args))
            except Exception as e:  # noqa: BLE001
                emit(out, what="error", shape=name, numerics="torch", error=f"{type(e).__name__}: {e}")
        rows.extend((rec, peer) for rec in recs)
    head = ("| shape | weights | numerics | wall us/token | tokens/s | graph us | host us (share) | kernels/layer | floor us | "
            "of floor | llama.cpp us | wall ÷ llama.cpp | torch.compile us | torch eager us | wall ÷ compile |")
    lines = [head, "|---" * (head.count("|") - 1) + "|"]
    for rec, peer in rows:
        c, e, lc = peer.get("compile"), peer.get("eager"), peer.get("llama.cpp")
        ratio = f"{rec['wall_us'] / c:.2f}" if c else "-"
        lratio = f"{rec['wall_us'] / lc:.2f}" if lc else "-"
        lines.append(
            f"| {rec['shape']} | {rec.get('weights', 'q8_0')} | {rec['numerics']} | {rec['wall_us']} | {rec['tokens_per_s']} | "
            f"{rec['graph_us']} | {rec['host_us']} ({100 * rec['host_share']:.1f}%) | {rec['kernels_per_layer']} | "
            f"{rec['floor_us']} | {rec['floor_us'] / rec['wall_us']:.0%} | {round(lc, 1) if lc else '-'} | {lratio} | "
            f"{round(c, 1) if c else '-'} | {round(e, 1) if e else '-'} | {ratio} |"
        )
    for rec, _ in rows:
        if rec.get("timeline"):
            import stages

            lines += ["", *stages.timeline_lines(
                f"**{rec['shape']}, {rec['numerics']}**, fill {rec['fill']}: one step's launches around a middle layer "
                "(µs after the first entry shown; `--timeline`, bench/stages.py)", rec["timeline"])]  # fmt: skip
    table = "\n".join(lines)
    print(table)
    if args.results:
        import torch

        gpu = torch.cuda.get_device_name()
        day = datetime.date.today().isoformat()
        text = (
            f"\n### {day} — {gpu} — `bench/decode_step.py`{' — ' + args.label if args.label else ''}\n\n"
            f"Random models written from random blocks of each mix's types (`--weights`); context {args.context}, cache fill {args.fill}, "
            f"{args.steps} tokens timed per row (greedy, `generate(logits=False)`: the device loop). Read ceiling "
            f"{ceiling:.0f} GB/s (`torch.sum` over 4 GiB, same run); floor = bytes a step reads (weights as held "
            f"on the device, K/V rows at the fill) over it. Peer: a bf16 `nn.Module` of the same shape, caches, "
            f"token and position as buffers, greedy argmax in the step, same run.\n\n{table}\n"
        )
        with open(args.results, "a") as f:
            f.write(text)
    if args.json:
        with open(args.json, "a") as f:
            for rec in out:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
