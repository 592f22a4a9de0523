"""The device-resident decode loop's own kernels (codegen.embed, codegen.argmax) under the simulator:
the embedding row and angles bit for bit against the host's (`WeightData.rows`, `rope_angles`), the
greedy pick against `np.argmax` (ties, NaN, -0.0, one block and several), the position advanced and
the prompt's ids left alone."""

from __future__ import annotations

import gguf
import numpy as np
import pytest
from support.kernels_common import bits_equal, fast_simulator, q8_0, rng  # noqa: F401

from fwdshim import reference as R
from fwdshim.codegen import argmax, embed

F32 = np.float32


@pytest.mark.parametrize("table", ["q8_0", "f16", "f32"])
def test_step_inputs_match_the_host_rows(table):
    g = rng()
    vocab, d, positions, half = 7, 64, 5, 8
    w = g.standard_normal((vocab, d)).astype(F32)
    kern = embed.step_inputs(d, vocab, table, positions, 2 * half, block=32)
    if table == "q8_0":
        raw, qs, dw = q8_0(w)
        tab = {"eq": qs.reshape(-1), "ed": dw.reshape(-1)}
        host = lambda t: gguf.quants.dequantize(raw[t], gguf.GGMLQuantizationType.Q8_0).astype(F32)  # noqa: E731
    else:
        dt = np.float16 if table == "f16" else F32
        tab = {"e": w.astype(dt).reshape(-1)}
        host = lambda t: w.astype(dt)[t].astype(F32)  # noqa: E731
    angles = np.stack([R.rope_angles(p, half, 10000.0).reshape(-1) for p in range(positions)])
    ids = np.array([3, 6, 0, 2, 5, 1], np.int32)
    for p in (0, 2, 4):
        out = kern.run(ids=ids, pos=np.array([p], np.int32), angle_table=angles.reshape(-1), **tab)
        bits_equal(out["x"], host(ids[p]).reshape(-1), f"row of token {ids[p]} at {p}")
        bits_equal(out["angles"], angles[p], f"angles of position {p}")


def run_argmax(logits: np.ndarray, p: int, given: int, positions: int = 6, per_thread: int = 2):
    kern = argmax.argmax(logits.size, positions, block=32, per_thread=per_thread)
    ids = np.arange(positions + 1, dtype=np.int32) + 100
    out = kern.run(logits=logits, pos=np.array([p], np.int32), ids=ids.copy(), given=np.array([given], np.int32))
    assert out["count"][0] == 0, "the last block leaves the count at zero"
    return kern, ids, out


@pytest.mark.parametrize("n", [20, 64, 200, 1000])
def test_argmax_is_numpys(n):
    g = rng()
    cases = [g.standard_normal(n).astype(F32)]
    tie = g.integers(-3, 3, n).astype(F32)  # many ties: the lowest index wins
    cases.append(tie)
    nan = g.standard_normal(n).astype(F32)
    nan[[n // 2, n - 1]] = np.nan  # the first NaN wins
    cases.append(nan)
    cases.append(np.full(n, -np.inf, F32))
    zeros = np.zeros(n, F32)
    zeros[: n // 3] = -0.0
    cases.append(zeros)
    for logits in cases:
        kern, ids, out = run_argmax(logits, p=2, given=0)
        want = int(np.argmax(logits))
        assert out["out_id"][3] == want, (n, kern.grid, out["out_id"][3], want)
        bits_equal(out["out_val"][3:4], logits[want : want + 1], "the picked logit")
        assert out["ids"][3] == want and out["pos"][0] == 3
        assert list(out["ids"][:3]) == list(ids[:3]) and list(out["ids"][4:]) == list(ids[4:])


def test_argmax_leaves_the_prompt_and_stops_at_the_end():
    logits = np.array([0.0, 5.0, 1.0], F32)
    _, ids, out = run_argmax(logits, p=1, given=4)  # position 2 holds a prompt token
    assert out["out_id"][2] == 1 and out["ids"][2] == ids[2] and out["pos"][0] == 2
    _, ids, out = run_argmax(logits, p=5, given=0)  # the last position: pos stays in 0..positions
    assert out["out_id"][6] == 1 and out["ids"][6] == 1 and out["pos"][0] == 6
