"""fwd-fuse on long chains, wide regions and many layers (issue 10, item 3): the region and chain
search costs about the ops it fuses, not their square (200 chained silus took 73 s, 400 more than
11 minutes, because every member regrew the whole group and re-sorted it per convexity check).

Time is measured, not asserted (it depends on the machine): each test prints its fuse time and
asserts the stages fwd-fuse forms."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType as QT

from fwdshim.classes import Q8MatKind
from fwdshim.dialects.fwd import FusedOp, stages
from fwdshim.frontend.gguf_model import LlamaParams, expected_tensors
from fwdshim.frontend.step_ir import parse_step, step_text
from fwdshim.passes.fuse import fuse_module
from fwdshim.passes.quantize_activations import quantize_activations
from fwdshim.shim.forward import ForwardShim

CASES = Path(__file__).resolve().parents[1] / "cases"
T = "tensor<64xf32>"


def fused(text: str, name: str, numerics: str = "dequant"):
    """The top-level stages of `text` after fwd-quantize-activations and fwd-fuse (the second timed)."""
    module = parse_step(text, name)
    shim = ForwardShim(Q8MatKind.parse(numerics))
    quantize_activations(module, shim)
    start = time.perf_counter()
    fuse_module(module, shim)
    print(f"{name}: fwd-fuse {time.perf_counter() - start:.2f} s")
    module.verify()
    return list(stages(module))


def test_the_case_of_200_chained_silus_is_one_chain():
    """issue 10's case: 200 chained `fwd.silu` (73 s before) fuse into one chain kernel."""
    tops = fused((CASES / "ir_hang_silu_chain200.mlir").read_text(), "ir_hang_silu_chain200.mlir")
    assert len(tops) == 1 and isinstance(tops[0], FusedOp)
    assert tops[0].class_.data == "elementwise_chains"
    assert list(tops[0].cover_list) == list(range(200))


def chain_text(n: int) -> str:
    """A chain of `n` steps cycling through silu, add, mul and max, each reading an argument too."""
    lines = [f"func.func @chain(%x0: {T}, %a: {T}, %b: {T}) -> {T} {{"]
    for i in range(1, n + 1):
        prev = f"%x{i - 1}"
        kind = ("silu", "add", "mul", "max")[i % 4]
        if kind == "silu":
            lines.append(f"  %x{i} = fwd.silu {prev} : {T} -> {T}")
        else:
            other = "%a" if i % 3 else "%b"
            a, b = (prev, other) if i % 2 else (other, prev)
            lines.append(f"  %x{i} = fwd.elementwise {kind} {a}, {b} : {T}, {T} -> {T}")
    lines += [f"  func.return %x{n} : {T}", "}"]
    return "\n".join(lines) + "\n"


def test_a_1000_op_chain_is_one_chain():
    tops = fused(chain_text(1000), "chain1000.mlir")
    assert len(tops) == 1 and tops[0].class_.data == "elementwise_chains"
    assert list(tops[0].cover_list) == list(range(1000))
    assert len(tops[0].parts()) == 1000


def ladder_text(n: int) -> str:
    """Sibling: a region of `n` ops, each reading the two before it (every op a join and a fork)."""
    lines = [f"func.func @ladder(%x0: {T}, %x1: {T}) -> {T} {{"]
    for i in range(2, n + 2):
        kind = ("add", "mul", "sub", "max")[i % 4]
        lines.append(f"  %x{i} = fwd.elementwise {kind} %x{i - 1}, %x{i - 2} : {T}, {T} -> {T}")
    lines += [f"  func.return %x{n + 1} : {T}", "}"]
    return "\n".join(lines) + "\n"


def test_a_1000_op_region_is_one_region():
    tops = fused(ladder_text(1000), "ladder1000.mlir")
    assert len(tops) == 1 and tops[0].class_.data == "elementwise_regions"
    assert list(tops[0].cover_list) == list(range(1000))


def llama_step(n_layer: int) -> str:
    """An imported step (the importer's own text) of a small llama with q/k/v biases."""
    p = LlamaParams(n_layer=n_layer, d=64, ff=128, h=4, kv=2, hd=16, rope_dim=16, rope_base=1e4, eps=1e-5, vocab=256)
    uses = expected_tensors(p, tied=False)
    types = {k: QT.F32 if u.role in ("norm", "bias") else QT.Q8_0 for k, u in uses.items()}
    return step_text(p, uses, types, 64)


def classes(tops) -> dict[str, int]:
    out: dict[str, int] = {}
    for op in tops:
        name = op.class_.data if isinstance(op, FusedOp) else op.name
        out[name] = out.get(name, 0) + 1
    return out


def test_a_120_layer_step_fuses_as_120_layers():
    """Each layer fuses as one layer does (the stages of n layers are n times a layer's, plus the head)."""
    one, two = classes(fused(llama_step(1), "step1.mlir", "int8-act")), classes(fused(llama_step(2), "step2.mlir", "int8-act"))
    many = classes(fused(llama_step(120), "step120.mlir", "int8-act"))
    per_layer = {k: two.get(k, 0) - one.get(k, 0) for k in set(one) | set(two)}
    assert per_layer["add_norm_quant"] >= 1 and per_layer["elementwise_chains"] >= 1
    assert many == {k: one.get(k, 0) + 119 * per_layer[k] for k in per_layer if one.get(k, 0) + 119 * per_layer[k]}


def fan_text(n: int, gate: int, up: int) -> str:
    """`n` Q8_0 projections of one RMS norm; projections `gate` and `up` meet in a GLU."""
    w = "!fwd.weights<64x64, q8_0>"
    lines = [f"func.func @fan(%x: {T}) -> {T} {{", f"  %n = fwd.rms_norm %x eps 1.0e-05 : {T} -> {T}"]
    for i in range(n):
        lines.append(f'  %w{i} = fwd.weight "w{i}" : {w}')
        lines.append(f"  %y{i} = fwd.matmul %n, %w{i} : {T}, {w} -> {T}")
    lines.append(f"  %s = fwd.silu %y{gate} : {T} -> {T}")
    lines.append(f"  %g = fwd.elementwise mul %s, %y{up} : {T}, {T} -> {T}")
    lines += [f"  func.return %g : {T}", "}"]
    return "\n".join(lines) + "\n"


def test_2000_projections_of_one_norm_find_their_gate_and_up():
    """merged_gate_up looks for the up from the gate's GLU, not among every reader of the input: 2000
    projections of one norm took 27.5 s (4000: 111 s), each gate checking every other projection."""
    from support.lanes import EveryClassLane

    n, gate, up = 2000, 1500, 700
    module = parse_step(fan_text(n, gate, up), "fan2000.mlir")
    start = time.perf_counter()
    fuse_module(module, EveryClassLane())
    print(f"fan2000.mlir: fwd-fuse {time.perf_counter() - start:.2f} s")
    module.verify()
    got = sorted((op.class_.data, list(op.cover_list)) for op in stages(module) if isinstance(op, FusedOp))
    # stage numbers: the norm 0, projection i 1 + i, the silu n + 1, the mul n + 2
    assert got == [("glu_act_mul", [n + 1, n + 2]), ("merged_gate_up", [1 + up, 1 + gate])]


def _adds(n: int) -> str:
    lines = [f"  %a{i} = fwd.elementwise add {'%x' if i == 0 else f'%a{i - 1}'}, %y : {T}, {T} -> {T}" for i in range(n)]
    return f"func.func @f(%x: {T}, %y: {T}) -> {T} {{\n" + "\n".join(lines) + f"\n  func.return %a{n - 1} : {T}\n}}\n"


def _norms(n: int) -> str:
    """`n` RMS norms of one activation sharing one weight, summed in a chain of adds."""
    lines = [f'  %w = fwd.weight "w" : {T}']
    for i in range(n):
        lines.append(f"  %n{i} = fwd.rms_norm %x weight(%w : {T}) eps 1.0e-05 : {T} -> {T}")
        lines.append(f"  %s{i} = fwd.elementwise add {'%y' if i == 0 else f'%s{i - 1}'}, %n{i} : {T}, {T} -> {T}")
    return f"func.func @f(%x: {T}, %y: {T}) -> {T} {{\n" + "\n".join(lines) + f"\n  func.return %s{n - 1} : {T}\n}}\n"


def _parse_and_shim_seconds(text: str) -> float:
    """CPU seconds to parse `text` (located, as fwdshim-opt does) and run forward-shim{int8-act} on it."""
    from support.llama_ir import parse, pipeline

    start = time.process_time()
    pipeline(parse(text), "int8-act")
    return time.process_time() - start


@pytest.mark.sweep
@pytest.mark.parametrize(("build", "small", "large"), [(_adds, 1000, 16000), (_norms, 500, 4000)], ids=["adds", "norms"])
def test_forward_shim_is_linear_in_the_ops(build, small, large):
    """issue 43, item 5: a chain of 16k adds took past 65 s of CPU (the 1k chain's 43 s scaled), 4k
    norms sharing a weight 5.8 times 1k's: growing a fused group compared every member's block at each
    step (`FuseContext.convex_with`), and the parser counted the newlines from the input's start at
    every op (`LocatingParser._line_col`). `large / small` times the ops costs at most 1.25 times that
    ratio of time (a quadratic part would cost the ratio squared)."""
    _parse_and_shim_seconds(build(small // 4))  # imports and caches warmed
    t_small, t_large = _parse_and_shim_seconds(build(small)), _parse_and_shim_seconds(build(large))
    ratio = large / small
    print(f"{build.__name__}: {small} ops {t_small:.2f} s, {large} ops {t_large:.2f} s ({t_large / t_small:.1f}x for {ratio:.0f}x)")
    assert t_large < 1.25 * ratio * t_small
