"""Kernel bodies as data (`codegen.source`): a family's statements are a template written out under an
`Index` (a kernel of its own, or a merged launch's part), and what a kernel does is read from its
syntax tree (`Facts`), never from substrings of its text."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from support import seeds

from fwdshim.codegen import source
from fwdshim.codegen.source import KERNEL, KernelBody, SharedArray, device_index, facts, late_wait, ld
from fwdshim.codegen.tuning import Tuning

RED = SharedArray("red", 64, "float32")
BODY = KernelBody(
    "k",
    ("x", "y"),
    f"{RED.decl}    i = $gid\n    b = $bx + $by\n    t = $tx\n    v0, v1, v2, v3 = {ld('f32x4', 'x', 'i * 4')}\n"
    + "".join(f"    {ln}\n" for ln in late_wait("ahead"))
    + "    y[i] = v0 + red[t]\n",
    shared=(RED,),
)


def test_a_kernel_of_its_own_reads_cudas_indices():
    text = BODY.text()
    assert text.splitlines()[:4] == [
        "@cuda.jit(cache=True)",
        "def k(x, y):",
        "    red = cuda.shared.array(64, float32)",
        "    i = cuda.grid(1)",
    ]
    assert "    b = cuda.blockIdx.x + cuda.blockIdx.y\n    t = cuda.threadIdx.x\n" in text
    assert "ld_f32x4(x, i * 4)" in text and "$" not in text
    assert f"    {source.LATE_WAIT}\n    pdl_wait()\n    pdl_launch()\n    y[i] = v0 + red[t]\n" in text
    assert BODY.waits_late and source.with_pdl(BODY, "ahead") == BODY  # it waits itself: no wait at its top


def test_a_merged_part_reads_its_arguments():
    index = device_index(128, True, generic=("x",), after_wait="\n    _pro(a, b)", hoist=True)
    text = BODY.device_fn("part0", ["_bx", "_by", "_tx", "red"], index)
    lines = text.splitlines()
    assert lines[:3] == ["@cuda.jit(device=True, inline=True)", "def part0(x, y, _bx, _by, _tx, red):", "    i = (_bx * 128 + _tx)"]
    assert "    b = _bx + _by" in lines and "    t = _tx" in lines and "lda_f32x4(x, i * 4)" in text
    assert lines[lines.index("    pdl_launch()") + 1] == "    _pro(a, b)"
    assert "cuda.shared.array" not in text and "cuda.blockIdx" not in text
    # not hoisted, not a tail: the shared array stays, the thread index is CUDA's
    plain = BODY.device_fn("part1", ["_bx", "_by"], device_index(64, False))
    assert "    red = cuda.shared.array(64, float32)" in plain and "    t = cuda.threadIdx.x" in plain
    assert "i = (_bx * 64 + cuda.threadIdx.x)" in plain and "ld_f32x4(x, i * 4)" in plain


def test_a_body_reading_cudas_index_itself_is_no_device_function():
    raw = KernelBody("k", ("y",), "    y[cuda.blockIdx.x] = 1.0\n")
    assert raw.text() == "@cuda.jit(cache=True)\ndef k(y):\n    y[cuda.blockIdx.x] = 1.0\n"  # a kernel of its own: fine
    with pytest.raises(ValueError, match="reads the block or thread index"):
        raw.device_fn("part0", ["_bx", "_by"], device_index(32, False))
    literal = KernelBody("k", ("y",), "    s = cuda.shared.array(8, float32)\n    y[$bx] = s[0]\n")
    with pytest.raises(ValueError, match="declares shared arrays"):
        literal.device_fn("part0", ["_bx", "_by"], device_index(32, False, hoist=True))


def test_shared_arrays_are_declared_as_written():
    with pytest.raises(ValueError, match="shared arrays declared"):
        KernelBody("k", ("y",), "    y[0] = 1.0\n", shared=(RED,))
    with pytest.raises(ValueError, match="shared arrays declared"):
        KernelBody("k", ("y",), f"{RED.decl}    y[0] = 1.0\n")
    two = SharedArray("s", 4, "int32", aligned=True)
    with pytest.raises(ValueError, match="shared arrays declared"):  # in the order written
        KernelBody("k", ("y",), f"{two.decl}{RED.decl}    y[0] = 1.0\n", shared=(RED, two))
    with pytest.raises(ValueError, match=r"no value for `\$bogus`"):
        KernelBody("k", ("y",), "    y[$bogus] = 1.0\n").text()
    assert KernelBody("k", ("y",), f"{two.decl}    y[0] = 1.0\n", shared=(two,)).text().splitlines()[2] == (
        "    s = cuda.shared.array(4, int32, alignment=16)"
    )


def test_facts_come_from_the_syntax_tree_not_substrings():
    """A comment or a name holding `atomic`, `shared`, `ld_` or `gridDim` is no atomic, shared array,
    load or grid read; the calls and attributes are."""
    quiet = facts(
        "def k(x, held_x, atomic_count):\n"
        "    # atomic adds, syncthreads, gridDim and shared memory are not used here\n"
        "    shared_total = held_x[0] + atomic_count[0]\n"
        "    x[cuda.grid(1)] = shared_total\n",
        "k",
    )
    assert not (quiet.atomics or quiet.barriers or quiet.nc_loads or quiet.grid_shape or quiet.threads_yz)
    assert quiet.shared_bytes == 0 and quiet.block_index
    busy = facts(
        "def k(x, c):\n"
        "    t = cuda.shared.array((32, 33), float32)\n"
        "    r = cuda.shared.array(8, int32)\n"
        "    if cuda.threadIdx.y == 0:\n"
        "        cuda.syncthreads()\n"
        "    a, b, c2, d = ld_i32x4(x, 0)\n"
        "    cuda.atomic.add(c, 0, cuda.gridDim.x)\n",
        "k",
    )
    assert busy.atomics and busy.barriers and busy.nc_loads and busy.grid_shape and busy.threads_yz
    assert busy.shared_bytes == 32 * 33 * 4 + 8 * 4 and busy.top_shared == ("t", "r")
    assert facts("def k(y):\n    i, j = cuda.grid(2)\n").grid_shape
    assert facts("def k(y):\n    f = atomic_add_acq_rel(y, 0, 1)\n").atomics
    with pytest.raises(ValueError, match="does not parse"):
        facts("def k(:\n")


@pytest.mark.parametrize("numerics", ["dequant", "int8-act"])
def test_the_families_write_their_indices_as_the_template_says(numerics):
    """A SmolLM2-shaped layer's step merges (each part written by `KernelBody.device_fn`, which
    refuses a part reading a CUDA index of its own), and no kernel's source holds a template's `$`."""
    from support.llama_ir import llama_src, parse, pipeline

    from fwdshim.codegen.plan import build_plan, functions

    m = pipeline(parse(llama_src(d=576, h=9, kv=3, hd=64, ff=1536, l=1024)), numerics)
    plan = build_plan(functions(m)[0], m, Tuning())
    assert sum(len(launch.holds) for launch in plan.merged) >= 8
    assert all("$" not in launch.kernel.source for launch in plan.launches)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize(("kind", "y_first"), [("add", False), ("mul", True)])
def test_a_dense_gemvs_elementwise_epilogue_is_the_elementwise_kernel(dtype, kind, y_first):
    """`gemv.binary_variant` of a dense GEMV stores `y` and `y kind e` (or `e kind y`) bit for bit as
    the GEMV and then the elementwise kernel alone."""
    from fwdshim.codegen import gemv, unary

    rng = seeds.rng()
    n, k = 40, 96
    plain = gemv.dense(n, k, dtype=dtype)
    variant = gemv.binary_variant(plain, kind, y_first, Tuning())
    assert variant is not None and variant.name == f"{plain.name}_e{kind}" and variant.param_names[-2:] == ("ep_in", "ep_out")
    assert gemv.binary_variant(variant, kind, y_first, Tuning()) is None  # one epilogue at most
    w = rng.standard_normal(n * k).astype(dtype)
    x = rng.standard_normal(k).astype(np.float32)
    e = (rng.standard_normal(n) + 3.0).astype(np.float32)
    alone = plain.run(w=w, x=x)["y"]
    out = variant.run(w=w, x=x, ep_in=e)
    ab = (alone, e) if y_first else (e, alone)
    want = unary.elementwise(kind, n).run(a=ab[0], b=ab[1])["y"]
    assert np.array_equal(out["y"].view(np.uint32), alone.view(np.uint32))
    assert np.array_equal(out["ep_out"].view(np.uint32), want.view(np.uint32)) and not np.array_equal(want, alone)


def test_an_affine_ggml_gemv_takes_the_elementwise_epilogue_after_its_store():
    from fwdshim.codegen import gemv

    plain = gemv.blocks("q4_0", 64, 256, shape=gemv.Shape(16, 2, 4, 2, 1))
    variant = gemv.binary_variant(plain, "sub", True, Tuning())
    assert variant.spec.shape == plain.spec.shape and variant.spec.weights == "q4_0"
    lines = [ln.strip() for ln in variant.body.splitlines()]
    for r in range(2):
        store = lines.index(f"y[m * 64 + row0 + {r}] = acc{r}")
        assert lines[store + 1] == f"ep_out[m * 64 + row0 + {r}] = fsub_rn(acc{r}, ep_in[m * 64 + row0 + {r}])"
    assert variant.param_names[-3:] == ("y", "ep_in", "ep_out") and variant.spec.binary == ("sub", True)
    assert KERNEL.bx == "cuda.blockIdx.x"


@pytest.mark.parametrize("source", ["llama-dequant", "llama-int8-act", "attention-one-split"])
def test_every_mergeable_kernel_writes_out_as_a_part(source):
    """Each stage kernel merging may take (one 1-D grid, no atomics, no grid size: `merge_groups._plain`)
    writes out as a merged launch's part, hoisted and as a tail run in turns: its family wrote every
    block and thread index, and every top-level shared array, as the template says (an attention of
    one split once read `cuda.blockIdx.x` itself and failed there)."""
    from support.attention_ir import attentions_src
    from support.llama_ir import legalize_only, llama_src, parse, pipeline

    from fwdshim.codegen import merge_groups
    from fwdshim.codegen.plan import functions, stage_plan

    if source.startswith("llama"):
        m = pipeline(parse(llama_src(d=576, h=9, kv=3, hd=64, ff=1536, l=1024)), source.removeprefix("llama-"))
    else:
        m = legalize_only(parse(attentions_src(1, shared=True)))
    plan = stage_plan(functions(m)[0], m, Tuning())
    kernels = [launch.kernel for launch in plan.stage_launches]
    plain = [k for k in kernels if merge_groups._plain(k) and merge_groups._grid1(k) is not None]
    assert len(plain) >= (1 if source.startswith("attention") else 8)
    for k in plain:
        for index in (device_index(k.block[0], False, hoist=True), device_index(k.block[0], True)):
            extra = ["_bx", "_by", "_tx"] if index.tx == "_tx" else ["_bx", "_by"]
            text = k.code.device_fn("part0", [*extra, *(a.name for a in k.code.shared if index.hoist)], index)
            assert "cuda.blockIdx" not in text and "$" not in text, k.name


@pytest.mark.parametrize(
    "family, name, args, kwargs",
    [
        ("gemv", "blocks", ("f16", 8, 64.0), {}),
        ("gemv", "q8_0", (8, 64.0), {}),
        ("norms", "rms_norm", (True,), {}),
        ("moe", "topk", (4.0, 2), {}),
        ("attention", "attention", (2, 1, 32, "8"), {}),
    ],
    ids=["blocks-k-float", "q8_0-k-float", "rms_norm-n-bool", "moe-e-float", "attention-l-str"],
)
def test_a_factory_refuses_a_dimension_that_is_no_integer(family, name, args, kwargs):
    """`kernel.factory`: a float, bool or string for an `int` parameter is a TypeError naming it,
    raised before anything is cached (a float K once built a kernel with `64.0` in its source, and
    the int call with the same value got that kernel back from the cache)."""
    fn = getattr(importlib.import_module(f"fwdshim.codegen.{family}"), name)
    with pytest.raises(TypeError, match=f"^{name}: `.*` must be an integer, got"):
        fn(*args, **kwargs)


def test_a_factory_takes_numpy_integers_as_the_same_kernel():
    """A NumPy integer is the int of its value: the same cached kernel, its source without a NumPy
    repr; keyword and positional forms of one argument are one cache entry."""
    from fwdshim.codegen import gemv

    k = gemv.blocks("f16", 8, np.int64(64))
    assert k is gemv.blocks("f16", 8, 64) is gemv.blocks("f16", n=8, k=64)
    assert "int64(64)" not in k.source and "np." not in k.source


def test_a_kernel_run_refuses_a_name_that_is_no_parameter():
    """`Kernel.run(**arrays)`: a misspelt input is a TypeError naming it and the kernel's parameters
    (it was ignored, and the kernel ran with that input missing or zero)."""
    from fwdshim.codegen import unary

    k = unary.silu(64)
    x = np.ones(64, np.float32)
    with pytest.raises(TypeError, match=r"no parameter `xx` \(its parameters: x, y\)"):
        k.run(xx=x)
