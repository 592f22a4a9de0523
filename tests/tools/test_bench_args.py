"""The bench scripts' bad arguments are one usage line and exit status 2, before any GPU is needed
(`bench/*.py` run on the device; a typo there must not cost a compile or a traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench(name: str):
    """The bench script `name` imported as a module (its folder on sys.path while it imports)."""
    sys.path.insert(0, str(BENCH))
    try:
        return __import__(name)
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("decode_step.py", ["--shapes", "smollm2,gpt9"], "--shapes: unknown shape 'gpt9' (known: smollm2, llama8b, qwen25_7b, qwen3_8b, qwen3_30b_a3b)"),
        ("decode_step.py", ["--numerics", "int4"], "--numerics: unknown numerics 'int4'"),
        ("decode_step.py", ["--fill", "1000"], "--fill 1000, --steps 64, --context 1024: needs fill >= 0"),
        ("decode_step.py", ["--steps", "0"], "--fill 512, --steps 0, --context 1024: needs fill >= 0"),
        ("decode_step.py", ["--tuning", "pre_wait_loads"], "--tuning: tuning item `pre_wait_loads`: KEY=VALUE (e.g. merge=false, prefetch_bytes=0)"),
        ("decode_step.py", ["--tuning", "pre_wait_load=4"], "--tuning: tuning has no `pre_wait_load`: its keys are merge, prefetch_bytes, pdl,"),
        ("decode_step.py", ["--tuning", "pre_wait=4"], "--tuning: tuning pre_wait=4: true or false"),
        ("decode_step.py", ["--tuning", "pdl=sometimes"], "--tuning: tuning pdl='sometimes': one of off, wait, ahead, early"),
        ("decode_step.py", ["--tuning", "tail_threads=many"], "--tuning: tuning tail_threads=many: a whole number (e.g. 4096, 8<<20)"),
        ("decode_step.py", ["--leave-out", "rms_(norm"], "--leave-out 'rms_(norm': not a regular expression"),
        ("decode_step.py", ["--empty", "attention["], "--empty 'attention[': not a regular expression"),
        ("decode_step.py", ["--timeline", "gemv("], "--timeline 'gemv(': not a regular expression"),
        ("decode_step.py", ["--weights", "q4_k_s"], "--weights: unknown mix 'q4_k_s' (known: q8_0, q4_0, q4_1, q5_k, q6_k, q4_k_m)"),
        ("decode_step.py", ["--llama-bench", "/nonexistent/llama-bench"], "--llama-bench /nonexistent/llama-bench: no executable there"),
        ("instructions.py", ["--types", "q8_0"], "--types: 'q8_0': affine GGML types of q2_k,"),
        ("instructions.py", ["--types", "q4_k,,q6_k"], "--types: '': affine GGML types of q2_k,"),
        ("instructions.py", ["--shape", "4096x100"], "--shape 4096x100: N x K, K a positive multiple of 256"),
        ("instructions.py", ["--shape", "4096x0"], "--shape 4096x0: N x K, K a positive multiple of 256"),
        ("instructions.py", ["--sass", "--ptxas", "/nonexistent/ptxas"], "--sass: no /nonexistent/ptxas (a CUDA toolkit's"),
        ("gemv.py", ["--types", "q4_k,f64"], "--types q4_k,f64: weight types of q8_0, q4_0, q4_1,"),
        ("attention.py", ["--shapes", "gpt9"], "--shapes: unknown shape 'gpt9' (known: smollm2, llama8b, llama8b_kv)"),
        ("attention.py", ["--try", "b128u4"], "--try: `b128u4` is not an attention launch tag"),
        ("attention.py", ["--fill", "1024"], "--fill 1024, --context 1024: needs 0 <= fill < context"),
        ("attention.py", ["--tuning", "combine_registers=-1"], "--tuning: tuning combine_registers=-1: a whole number >= 0"),
        ("attention.py", ["--tuning", "no_such=1"], "--tuning: tuning has no `no_such`"),
        ("compile_time.py", ["--numerics", "int4"], "argument --numerics: invalid choice: 'int4'"),
        ("read_sizes.py", ["--reps", "0"], "--reps is at least 1"),
        ("occupancy.py", ["--shapes", "gpt9"], "--shapes 'gpt9': of smollm2, llama8b"),
        ("occupancy.py", ["--numerics", "int4"], "--numerics 'int4': of dequant, int8-act, two-pass-int8"),
        ("occupancy.py", ["--arch", "hopper"], "--arch 'hopper': an architecture such as sm_90"),
        ("occupancy.py", ["--cap", "80,lots"], "--cap '80,lots': register counts, comma-separated"),
        ("occupancy.py", ["--cap", "8"], "--cap '8': register counts from 16 to 255"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.endswith(".py") else None,
)
def test_a_bad_argument_is_one_usage_error(script, args, message):
    r = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith(f"{script}: error: ") and message in last, last


def test_attention_launch_tags_round_trip():
    bench_attention = _bench("attention")
    assert bench_attention.parse_tag("b128u4s17o5") == (128, 4, 17, 5)
    assert bench_attention.parse_tag("b64u2s9") == (64, 2, 9, None)
    for t in ("b128u4s17o5", "b128u4s17o0", "b64u2s9"):
        assert bench_attention.tag(bench_attention.parse_tag(t)) == t


def test_occupancy_without_ptxas_is_one_line(monkeypatch, capsys):
    occ = _bench("occupancy")
    monkeypatch.setattr(occ, "find_ptxas", lambda: None)
    with pytest.raises(SystemExit) as e:
        occ.main(["--shapes", "smollm2"])
    assert e.value.code == 2
    assert capsys.readouterr().err == "occupancy.py: no ptxas here (a CUDA toolkit's bin on PATH, or CUDA_HOME): nothing to assemble with\n"


def test_occupancy_reads_ptxas_lines():
    occ = _bench("occupancy")
    text = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
            "ptxas info    : Function properties for k\n"
            "    0 bytes stack frame, 32 bytes spill stores, 32 bytes spill loads\n"
            "ptxas info    : Used 80 registers, used 1 barriers, 41216 bytes smem, 400 bytes cmem[0]\n")
    assert occ.parse_ptxas(text) == (80, 32, 41216)
    assert occ.parse_ptxas("ptxas info    : Used 28 registers, 392 bytes cmem[0]") == (28, 0, 0)
    with pytest.raises(ValueError, match="no register count"):
        occ.parse_ptxas("ptxas fatal   : Unresolved extern function")


def test_occupancy_largest_loop_reads_sass():
    """`largest_loop` takes the longest backward branch's range and counts its opcodes by `_MIX`."""
    occ = _bench("occupancy")
    sass = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0020*/                   PRMT R8, R4, 0x7440, R9 ;
        /*0030*/                   FADD R8, R8, -8388736 ;
        /*0040*/                   FFMA R10, R8, R12, R10 ;
        /*0050*/               @P0 BRA 0x10 ;
        /*0060*/                   HMMA.16816.F32 R4, R8, R12, RZ ;
        /*0070*/               @!P1 BRA 0x60 ;
        /*0080*/                   EXIT ;
        /*0090*/                   BRA 0x90;
"""
    assert occ.largest_loop(sass) == (5, {"LDG": 1, "FFMA": 1, "FADD": 1, "PRMT": 1})
    assert occ.largest_loop("        /*0000*/                   EXIT ;\n") is None


@pytest.mark.parametrize(
    "script, status, message",
    [
        ("attention.py", 1, "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU"),
        ("decode_step.py", 1, "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU"),
        ("gemv.py", 1, "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU"),
        ("instructions.py", 1, "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which compiles no PTX: unset it, on a GPU"),
        ("read_sizes.py", 1, "NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which times nothing: unset it, on a GPU"),
    ],
)
def test_the_simulator_is_one_line_not_a_traceback(script, status, message):
    """Under the simulator `cuda.is_available()` is true: the benchmarks refuse it by name (they timed
    nothing and died on the fake device's missing attributes)."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    r = subprocess.run([sys.executable, str(BENCH / script)], capture_output=True, text=True, timeout=120, env=env)
    assert (r.returncode, r.stderr) == (status, f"{script}: {message}\n")


def test_occupancy_under_the_simulator_is_one_line(monkeypatch, capsys):
    occ = _bench("occupancy")
    monkeypatch.setattr(occ, "find_ptxas", lambda: "ptxas")
    monkeypatch.setattr("numba.config.ENABLE_CUDASIM", True)
    with pytest.raises(SystemExit) as e:
        occ.main(["--shapes", "smollm2"])
    assert e.value.code == 2
    assert capsys.readouterr().err == "occupancy.py: NUMBA_ENABLE_CUDASIM=1 runs Numba's CUDA simulator, which compiles no PTX: unset it\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "/no/such.gguf"], "/no/such.gguf: no such file, and not a known model name (gemma3-270m, smollm2)"),
        (["--model", str(Path(__file__).resolve()), "--context", "64"], "not a GGUF file"),
    ],
)
def test_compile_time_bad_model_is_one_line(args, message):
    """A model `fwdshim run` refuses in one line is one line here too, not ModelError's traceback."""
    r = subprocess.run([sys.executable, str(BENCH / "compile_time.py"), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("compile_time.py: error: ") and message in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_leave_out_drops_the_matching_launches_and_only_within(monkeypatch):
    """`decode_step.py --leave-out REGEX` (`--empty REGEX`): within `leaving_out(REGEX[, empty=True])` a
    compiled step launches none of the kernels whose names match (here the RMS norms: the buffer only
    they write keeps its old values while every other launch runs; with `empty` an empty kernel of
    their grid runs in their place), and on leaving it launches them all again."""
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("runs the step under Numba's CUDA simulator")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, where support/ is
    from support import seeds
    from support.llama_ir import TINY, llama_inputs, llama_src, llama_weights, parse, pipeline

    from fwdshim.codegen.runtime import CompiledForward

    decode_step = _bench("decode_step")
    rng = seeds.rng()
    fw = CompiledForward(pipeline(parse(llama_src(**TINY)), "dequant"), llama_weights(rng, **TINY))
    norms = [la for la in fw.plan.launches if "rms_norm" in la.kernel.name]
    others = [la for la in fw.plan.launches if "rms_norm" not in la.kernel.name]
    assert norms and others
    written = {a.buffer for la in norms for a, p in zip(la.args, la.kernel.params, strict=True) if p.role == "out"}
    by_others = {a.buffer for la in others for a, p in zip(la.args, la.kernel.params, strict=True) if p.role != "in"}
    only_norms = sorted(written - by_others)
    assert only_norms, written
    inputs = llama_inputs(rng, **TINY, rows=1)
    before = {b: fw.array(b).copy_to_host().copy() for b in only_norms}
    for empty in (False, True):  # left out, or an empty kernel of the same grid launched in place
        with decode_step.leaving_out("rms_norm", empty):
            fw.run_stagewise(inputs)
        for b in only_norms:
            np.testing.assert_array_equal(fw.array(b).copy_to_host(), before[b], err_msg=b)
    with decode_step.leaving_out("no_such_kernel"), pytest.raises(ValueError, match=r"^/no_such_kernel/ matches none of the step's kernels \(.*rms_norm"):
        fw.run_stagewise(inputs)  # a REGEX matching nothing would time the whole step under another name
    stand_in = decode_step.empty_kernel(norms[0].kernel)
    assert (stand_in.grid, stand_in.block) == (norms[0].kernel.grid, norms[0].kernel.block)
    fw.run_stagewise(inputs)  # every launch again: the norms write their results
    assert any(not np.array_equal(fw.array(b).copy_to_host(), before[b]) for b in only_norms)


@pytest.mark.parametrize("unroll, words, grid", [(2, 1000, (2, 8)), (4, 4096, (1, 32)), (8, 36, (3, 4))])
def test_read_sizes_kernel_reads_every_word_once(monkeypatch, unroll, words, grid):
    """The bare streaming read (`fwdshim profile`'s and `bench/read_sizes.py`'s) XORs every word of its buffer into one thread's
    accumulator, once (the unrolled steps and the remainder together; under the simulator, with its
    16-byte load): a buffer of zeros but one word of the kernel's magic value makes it store that
    value, wherever the word lies — a word read by no thread, or twice, would leave it unstored."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("runs the kernel under Numba's CUDA simulator")
    from numba import cuda

    from fwdshim.codegen import intrinsics, simulator

    monkeypatch.setattr(intrinsics, "ld_i32x4", simulator.ld_i32x4)
    from fwdshim.tools.timing import sized_read_kernel

    k = sized_read_kernel(unroll)
    rng = np.random.default_rng(unroll)
    for at in [0, words - 1, *rng.integers(0, words, size=4)]:
        a = np.zeros(words, np.int32)
        a[at] = 0x7FEDCBA9
        out = cuda.to_device(np.zeros(1, np.int64))
        k[grid](cuda.to_device(a), words, out)
        assert out.copy_to_host()[0] == 0x7FEDCBA9, at


def test_the_q4_k_m_mix_is_llama_cpps():
    """`--weights q4_k_m` types each matrix as llama.cpp's quantize does: Q4_K; Q6_K for the output
    and for attn_v and ffn_down in `use_more_bits` layers (the first and last eighth, every third
    between); a K-quant's rows that are not whole super-blocks take its fallback."""
    d = _bench("decode_step")
    six = [i for i in range(32) if d.mix_types("q4_k_m", f"blk.{i}.ffn_down.weight", 32, 14336) == "q6_k"]
    assert six == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert d.mix_types("q4_k_m", "blk.6.attn_v.weight", 32, 4096) == "q6_k"
    assert d.mix_types("q4_k_m", "blk.6.attn_q.weight", 32, 4096) == "q4_k"
    assert d.mix_types("q4_k_m", "output.weight", 32, 4096) == "q6_k"
    assert d.mix_types("q4_k_m", "token_embd.weight", 32, 4096) == "q4_k"
    assert d.mix_types("q4_k_m", "blk.0.attn_q.weight", 30, 576) == "q5_0"  # 576 is not whole blocks of 256
    assert d.mix_types("q6_k", "blk.0.attn_v.weight", 30, 576) == "q8_0"
    assert d.mix_types("q4_1", "blk.0.attn_v.weight", 30, 576) == "q4_1"


@pytest.mark.parametrize("shape", ["qwen25_7b", "qwen3_8b", "qwen3_30b_a3b"])
def test_the_family_shapes_write_files_fwdshim_imports(tmp_path, monkeypatch, shape):
    """`bench/decode_step.py --shapes` of issue 41's families writes, at a tiny size of the same kind,
    a file of that architecture fwdshim imports: Qwen2.5's Q/K/V biases, Qwen3's heads' norms and head
    size, Qwen3-MoE's experts (Q8_0 whatever the mix) of their own width."""
    from fwdshim.frontend.importer import import_gguf

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    d = _bench("decode_step")
    tiny = dict(d.SHAPES[shape], n_layer=2, d=256, h=4, kv=2, hd=32, rope_dim=32, vocab=300)
    tiny["ff"] = 512
    if tiny.get("n_expert"):
        tiny.update(ff=64, n_expert=4, top_k=2)
    m = import_gguf(d.write_random(tmp_path / "m.gguf", tiny, 64, "q4_k_m"), context=64)
    assert m.params.arch == tiny["arch"] and m.params.hd == 32 and not m.converted
    text = m.text
    assert ("attn_q.bias" in text) == (shape == "qwen25_7b") and ("attn_q_norm" in text) == (shape != "qwen25_7b")
    assert ("fwd.moe" in text) == (shape == "qwen3_30b_a3b")


def test_instruction_counts_take_a_loop_once_a_trip():
    """`bench/instructions.py` counts a PTX function's instructions outside loops and each loop's body
    (a label with a branch back to it), directives and labels left out."""
    ptx = """
.visible .entry k(.param .u64 a)
{
    .reg .b32 %r<4>;
    ld.param.u64 %rd1, [a];
    mov.u32 %r1, 0;
$L__BB0_1:
    add.s32 %r1, %r1, 1;
    setp.lt.s32 %p1, %r1, 8;
    @%p1 bra $L__BB0_1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""
    straight, loops = _bench("instructions").ptx_counts(ptx)
    assert (straight, loops) == (4, [3])
