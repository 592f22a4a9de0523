"""`fwdshim.tools.profile` without a GPU: the bytes of each launch, the table sorted by time, the family
sums, the JSON and the PNG chart (its file and axes), from a tiny step's plan and given times."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from support.llama_ir import TINY, llama_src, parse, pipeline

from fwdshim.codegen.plan import build_plan, functions
from fwdshim.codegen.tuning import Tuning
from fwdshim.tools import profile as P


def _plan(numerics: str = "int8-act"):
    """The tiny step's plan, one launch a stage (the byte counts below are per stage kernel)."""
    m = pipeline(parse(llama_src(**TINY)), numerics)
    return build_plan(functions(m)[0], m, Tuning(merge=False, prefetch_bytes=0))


def test_families():
    assert P.family("gemv_q8_0_int8_1x576x576_v16r1w4u1s2") == "gemv_q8_0_int8"
    assert P.family("gemv_q8_0_1x64x32_r2w8u2s4") == "gemv_q8_0"
    assert P.family("attention_one_word_h9kv3d64_l4096_b1024u8") == "attention_one_word"
    assert P.family("rms_norm_res_w_sum_one_word_1x32_b32") == "rms_norm_res_w_sum_one_word"
    assert P.family("kv_append_1x32_r3") == "kv_append"
    assert P.family("rope_2x32_h16") == "rope"


def test_merged_launch_family_names_its_parts():
    """A merged launch's family is its parts' families joined by `+` (the Q/K/V GEMVs once, then the
    rope tails'), so the table and chart say what a merged launch computes."""
    m = pipeline(parse(llama_src(**TINY)), "dequant")
    plan = build_plan(functions(m)[0], m)
    fams = {r.family for r in P.records_of(plan, 1)}
    merged = [launch for launch in plan.launches if launch.holds]
    assert merged, "the tiny step merges launches"
    for launch in merged:
        parts = [P.family(h.name) for h in launch.holds]
        assert P.launch_family(launch) == "+".join(dict.fromkeys(parts))
    assert any(f.startswith("gemv_q8_0+") for f in fams), fams
    assert not any(f == "merged" for f in fams)


def test_launch_bytes():
    plan = _plan()
    recs = {r.kernel: r for r in P.records_of(plan, fill=2)}
    assert len(P.records_of(plan, 2)) == plan.kernel_count
    d, ff, l = TINY["d"], TINY["ff"], TINY["l"]
    # the gate projection: ff x d int8 quants + ff x d/32 f32 scales + the d activation quants and scales
    gate = next(r for name, r in recs.items() if name.startswith(f"gemv_q8_0_int8_1x{ff}x{d}_"))
    assert gate.read == ff * d + ff * (d // 32) * 4 + d + (d // 32) * 4 and gate.written == ff * 4
    # the attention reads `fill` rows of each cache (kv * hd floats a row), kv_append writes one row of each
    row = TINY["kv"] * TINY["hd"] * 4
    att = next(r for name, r in recs.items() if name.startswith("attention"))
    kva = next(r for name, r in recs.items() if name.startswith("kv_append"))
    att0 = next(r for r in P.records_of(plan, 0) if r.kernel == att.kernel)
    assert att.read - att0.read == 2 * 2 * row
    assert kva.written == 2 * row and kva.read == 2 * row + 4  # k, v and the cache length
    assert all(r.us is None for r in recs.values()) and l > 2


def _profile(plan):
    recs = P.records_of(plan, fill=1)
    for r in recs:
        r.us = 1.0 + (5.0 if r.kernel.startswith("gemv") else 0.0)
    return P.Profile(recs, ceiling_gbs=4000.0, step_us=40.0, floor_us=0.7, meta={"model": "tiny", "numerics": "int8-act", "fill": 1})


def test_table_sorted_by_time_and_shares():
    prof = _profile(_plan())
    rows = prof.kernels()
    totals = [k.total_us for k in rows]
    assert totals == sorted(totals, reverse=True)
    assert sum(k.launches for k in rows) == len(prof.records)
    assert abs(sum(k.step_share for k in rows) - 1.0) < 1e-9
    assert abs(sum(f[4] for f in prof.families()) - 1.0) < 1e-9
    top = rows[0]
    assert top.kernel.startswith("gemv") and top.gbs == pytest.approx((top.read + top.written) / top.us / 1e3)
    assert top.ceiling_share == pytest.approx(top.gbs / 4000.0)
    text = prof.table()
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| kernel")]
    assert [line.split(" | ")[0][2:] for line in lines] == [k.kernel for k in rows]
    assert "the step's graph 40.0 us" in text and "an empty launch 0.70 us" in text
    data = json.loads(prof.to_json())
    assert len(data["launches"]) == len(prof.records) and data["kernels"][0]["kernel"] == top.kernel
    assert data["families"][0]["family"] == "gemv_q8_0_int8"


def test_png_chart(tmp_path):
    pytest.importorskip("matplotlib")
    prof = _profile(_plan("dequant"))
    path = tmp_path / "p.png"
    fig = prof.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    assert ax.get_xlabel() == "time in one step (us)" and ax.get_ylabel() == "kernel family"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f for f, *_ in prof.families()][::-1]  # the largest family on top
    assert labels[-1] == "gemv_q8_0" and "tiny" in ax.get_title()
    for name in ("chart", "chart.txt"):  # written as named, a PNG whatever the suffix (not `chart.png`)
        prof.plot(tmp_path / name)
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "chart.png").exists()


def test_cli_profile_needs_a_gpu(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from support.cli_models import tiny

    from fwdshim.tools import cli

    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    assert cli.main(["profile", "--model", str(tiny(tmp_path)), "-o", str(tmp_path / "p.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fwdshim: error:") and "CUDA GPU" in err  # the simulator is no GPU
    assert cli.main(["profile", "--model", "x.gguf", "--fill", "-1"]) == 1
    assert capsys.readouterr().err == "fwdshim: error: --fill -1: give a fill of 0 or more (cache rows)\n"
    assert cli.main(["profile", "--model", "x.gguf", "--reps", "0"]) == 1
    assert capsys.readouterr().err == "fwdshim: error: --reps 0: give at least one replay\n"
    # a fill past --context is said before any GPU is looked for (the model's own context: once read)
    assert cli.main(["profile", "--model", "x.gguf", "--context", "64", "--fill", "64"]) == 1
    assert capsys.readouterr().err == "fwdshim: error: --fill 64: the caches hold at most 63 rows (the context less one)\n"


@pytest.mark.parametrize(
    "regs, shared, threads, blocks, limiter",
    [
        (116, 2180, 128, 4, "registers"),  # Llama-3-8B's attention on the H200: 528 blocks a wave
        (137, 2180, 128, 3, "registers"),  # 137 rounds up to 144 a thread
        (95, 40960, 128, 5, "registers"),  # the gate/up launch: 5 by registers and by shared memory
        (32, 48000, 128, 4, "shared memory"),  # 48000 + 1024 reserved a block
        (16, 0, 1024, 2, "threads"),
        (16, 0, 32, 32, "blocks"),
    ],
)
def test_occupancy(regs, shared, threads, blocks, limiter):
    assert P.occupancy(regs, shared, threads) == (blocks, limiter)


def test_occupancy_columns_and_waves():
    """With the kernels' registers and shared memory the table gives blocks an SM, the limit and the
    grid in waves; a kernel without them keeps empty columns."""
    plan = _plan()
    prof = _profile(plan)
    gate = next(k for k in prof.kernels() if k.kernel.startswith("gemv"))
    prof.occupancy = {gate.kernel: P.Occupancy(regs=200, shared=0)}
    prof.limits = P.SMLimits(sms=2)
    rows = {k.kernel: k for k in prof.kernels()}
    rec = next(r for r in prof.records if r.kernel == gate.kernel)
    threads = rec.block[0]
    n, limiter = P.occupancy(200, 0, threads, prof.limits)
    assert rows[gate.kernel].blocks_per_sm == n and rows[gate.kernel].limiter == limiter == "registers"
    assert rows[gate.kernel].waves == pytest.approx(rec.grid[0] * rec.grid[1] / (n * 2))
    line = next(line for line in prof.table().splitlines() if line.startswith(f"| {gate.kernel} |"))
    assert line.endswith(f"| 200 | {n} (registers) | {rows[gate.kernel].waves:.2f} |")
    other = next(line for line in prof.table().splitlines() if line.startswith("| ") and gate.kernel not in line and "kernel" not in line)
    assert other.endswith("|  |  |  |")
    assert json.loads(prof.to_json())["sm_limits"]["sms"] == 2


def test_bare_read_columns():
    """With a bare read's time for a kernel (`Profile.read_us`) its row gives that time and the read's
    time over the kernel's; a kernel without one keeps both columns empty; the JSON carries both."""
    prof = _profile(_plan())
    gate = next(k for k in prof.kernels() if k.kernel.startswith("gemv"))
    prof.read_us = {gate.kernel: 4.5}
    rows = {k.kernel: k for k in prof.kernels()}
    assert rows[gate.kernel].read_us == 4.5 and rows[gate.kernel].of_read == pytest.approx(4.5 / 6.0)
    line = next(line for line in prof.table().splitlines() if line.startswith(f"| {gate.kernel} |"))
    assert f"| {gate.ceiling_share:.1%} | 4.50 | 75.0% |" in line
    header = next(line for line in prof.table().splitlines() if line.startswith("| kernel"))
    assert "| of ceiling | bare read us | of read | regs |" in header
    other = next(k for k in rows.values() if k.kernel != gate.kernel)
    line = next(line for line in prof.table().splitlines() if line.startswith(f"| {other.kernel} |"))
    assert f"| {other.ceiling_share:.1%} |  |  |" in line and other.read_us is None and other.of_read is None
    kernels = {k["kernel"]: k for k in json.loads(prof.to_json())["kernels"]}
    assert kernels[gate.kernel]["read_us"] == 4.5 and kernels[other.kernel]["of_read"] is None


@pytest.mark.gpu
def test_profile_on_the_gpu_reads_each_kernels_occupancy(tmp_path, monkeypatch):
    """On a GPU (`FWDSHIM_GPU=1`): a tiny model's profile gives every kernel its registers, shared
    memory, blocks an SM (at least one) and waves, on an SM of the device's own limits."""
    from numba import cuda
    from support.cli_models import tiny

    from fwdshim.codegen.device import simulating
    from fwdshim.frontend.importer import import_gguf

    if simulating():
        pytest.skip("the gpu suite runs on a device (FWDSHIM_GPU=1), not the simulator")
    monkeypatch.setenv("FWDSHIM_CACHE", str(tmp_path / "cache"))
    prof = P.profile_model(import_gguf(tiny(tmp_path), context=16), "dequant", fill=3, reps=3)
    assert prof.limits.sms == cuda.get_current_device().MULTIPROCESSOR_COUNT
    rows = prof.kernels()
    assert rows and all(k.regs and k.regs <= 255 and k.blocks_per_sm >= 1 and k.waves > 0 for k in rows), rows
    assert any(k.shared > 0 for k in rows)  # the norms' and the attention's shared rows
    # every kernel has a bare read of its bytes, no slower than an empty launch and not absurdly fast
    assert all(k.read_us is not None and prof.floor_us * 0.5 < k.read_us < 1e3 for k in rows), rows
    print("\n" + prof.table())


def test_read_times_runs_every_grid_over_the_buffers_in_turn(monkeypatch):
    """`read_times` captures `launches` reads of the buffers in turn for each grid and gives each
    grid the time its `time_graph` says (under the simulator, the capture run on stream 0)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        pytest.skip("runs the reads under Numba's CUDA simulator")
    from numba import cuda

    from fwdshim.codegen import intrinsics, simulator
    from fwdshim.tools import timing

    monkeypatch.setattr(intrinsics, "ld_i32x4", simulator.ld_i32x4)
    monkeypatch.setattr(timing, "_SIZED_READS", {})
    words, grids = 64, ((2, 8, 1), (1, 16, 2))
    bufs = [cuda.to_device(np.full(words, i, np.int32)) for i in range(3)]
    captured = []

    def time_graph(record):
        record(0)
        captured.append(len(captured))
        return 1.5 * len(captured)

    times = timing.read_times(bufs, words, grids, 3, time_graph)
    assert times == {(2, 8, 1): 1.5, (1, 16, 2): 3.0}
