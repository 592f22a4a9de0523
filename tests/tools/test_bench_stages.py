"""`bench/stages.py`: a kernel stamped at its stages computes what it computed unstamped, every block
stamps each stage it reaches in order, and a stage whose marker the generated source lacks is an error
(under the simulator, whose timers are the host's nanosecond clock)."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest
from support.kernels_common import bits_equal, fast_simulator, rng  # noqa: F401

from fwdshim.codegen import attention

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _stages():
    sys.path.insert(0, str(BENCH))
    try:
        return __import__("stages")
    finally:
        sys.path.remove(str(BENCH))


def _inputs(h, kv, hd, l, c):
    g = rng()
    f = np.float32
    return dict(q=g.standard_normal(h * hd).astype(f), k=g.standard_normal(kv * hd).astype(f),
                v=g.standard_normal(kv * hd).astype(f), k_cache=g.standard_normal((l - 1) * kv * hd).astype(f),
                v_cache=g.standard_normal((l - 1) * kv * hd).astype(f), pos=np.array([c], np.int32))  # fmt: skip


@pytest.mark.parametrize(("quant", "c", "active"), [(None, 22, 6), ("one_word", 9, 3)])
def test_stamped_attention_computes_the_same_and_stamps_in_order(quant, c, active):
    st = _stages()
    h, kv, hd, l, splits = 3, 1, 32, 24, 6
    kern = attention.attention(h, kv, hd, l, quant=quant, store_y=True, block=32, unroll=1, splits=splits)
    stamped = st.instrument(kern)
    assert [p.name for p in stamped.params] == [*kern.param_names, "stamps", "clocks"]
    given = _inputs(h, kv, hd, l, c)
    want, got = kern.run(**given), stamped.run(**given)
    for name in kern.param_names:
        bits_equal(got[name], want[name], f"stamped attention {name}")
    names = ["entry", *(s.name for s in st.ATTENTION_STAGES)]
    marks = got["stamps"].reshape(h * splits, len(names))
    assert (marks[:, 0] > 0).all(), "every block stamps its entry"
    sp = np.arange(h * splits) // h
    done = marks[sp < active]
    assert (done[:, 1:6] > 0).all(), "an active split reaches every stage to its count"
    assert (np.diff(done[:, :6], axis=1) >= 0).all(), "a block's stamps are in program order"
    assert not marks[sp >= active, 1:].any(), "a split past the active ones returns after its entry"
    assert (marks[:, 7] > 0).sum() == h, "one block a head (the last to count) combines it"
    rows = st.summarize(got["stamps"], got["clocks"], names)
    assert [r["blocks"] for r in rows] == [h * splits, *[h * active] * 5, h, h]
    assert all(r["step_p50"] >= 0 for r in rows[1:])
    table = st.stage_lines("t", rows)
    assert len(table) == 4 + len(names) and table[4].startswith("| entry | 18 |") and table[5].endswith(f"| {rows[1]['at_max']:.0f} |")
    assert round(sum(float(t.split("|")[6].strip(" %")) for t in table[5:]), -1) == 100, table


def test_one_split_has_no_combine_stages():
    """A kernel of one split divides and stores itself: no count, no combine, its end stamped."""
    st = _stages()
    kern = attention.attention(2, 1, 32, 24, block=32, unroll=1, splits=1)
    stamped = st.instrument(kern)
    got = stamped.run(**_inputs(2, 1, 32, 24, 5))
    names = ["entry", *(s.name for s in st.ATTENTION_STAGES)]
    marks = got["stamps"].reshape(2, len(names))
    assert (marks[:, :5] > 0).all() and not marks[:, 5:7].any() and (marks[:, 7] > 0).all()


def test_a_marker_the_source_lacks_is_an_error():
    st = _stages()
    kern = attention.attention(2, 1, 32, 24, block=32, unroll=1, splits=2)
    with pytest.raises(ValueError, match=r"stage `nowhere`: no line starts with '    nowhere = '"):
        st.instrument(kern, (st.Stage("nowhere", "    nowhere = "),))
    # an optional stage is left out quietly: the kernel still runs, its slot never stamped
    stamped = st.instrument(kern, (st.Stage("nowhere", "    nowhere = ", optional=True), st.Stage("end", None)))
    got = stamped.run(**_inputs(2, 1, 32, 24, 20))
    marks = got["stamps"].reshape(4, 3)
    assert (marks[:, 0] > 0).all() and not marks[:, 1].any() and (marks[:, 2] > 0).sum() == 2


def test_attention_bench_stage_rows(monkeypatch):
    """`bench/attention.py --stages`'s glue: the default launch stamped over the bench's caches (two
    copies here), one summary row a stage, every active block counted."""
    sys.path.insert(0, str(BENCH))
    try:
        bench = __import__("attention")
    finally:
        sys.path.remove(str(BENCH))
    monkeypatch.setattr(bench, "L2_BYTES", 1)
    h, kv, hd, l, fill = 3, 1, 32, 24, 13
    caches = bench.Caches(h, kv, hd, l, fill, np.random.default_rng(0))
    assert caches.copies == 2
    kern = attention.attention(h, kv, hd, l, block=32, unroll=1, splits=4)
    rows = bench.stage_rows(kern, caches, warm=1)
    active = -(-(fill + 1) // attention.split_rows(fill, 4, 32, 32, 1))
    assert [r["stage"] for r in rows][:2] == ["entry", "cache length read"]
    assert [r["blocks"] for r in rows] == [h * 4, *[h * active] * 5, h, h]


def test_decode_step_timeline_stamps_every_launch_of_a_step():
    """`bench/decode_step.py --timeline REGEX`'s `stamping`: a step run within it computes the same
    bits with every matching launch stamped; under the simulator the launches run one after another,
    so each launch's first entry follows the last end of the one before, and the timeline says so."""
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("runs the step under Numba's CUDA simulator")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, where support/ is
    from support import seeds
    from support.llama_ir import TINY, llama_inputs, llama_src, llama_weights, parse, pipeline

    from fwdshim.codegen.runtime import CompiledForward

    sys.path.insert(0, str(BENCH))
    try:
        decode_step = __import__("decode_step")
        st = __import__("stages")
        rng = seeds.rng()
        m = pipeline(parse(llama_src(**TINY)), "int8-act")
        weights = llama_weights(rng, **TINY)
        inputs = llama_inputs(rng, **TINY, rows=2)
        fw = CompiledForward(m, weights)
        want = [np.asarray(a.copy_to_host()).copy() for a in fw.run_stagewise(inputs)]
        fw2 = CompiledForward(m, weights)
        with decode_step.stamping(".") as marks:
            got = [np.asarray(a.copy_to_host()).copy() for a in fw2.run_stagewise(inputs)]
        for a, b in zip(want, got, strict=True):
            bits_equal(b, a, "a stamped step")
        assert [i for i, *_ in marks] == list(range(len(fw2.plan.launches)))
        host = [(i, k, nb, names, s.copy_to_host(), c.copy_to_host()) for i, k, nb, names, s, c in marks]
        attn = next(names for _, k, _, names, *_ in host if k.startswith("attention"))
        assert attn[:3] == ["entry", "waited", "cache length read"] and attn[-1] == "end"
        rows = st.timeline(host)
        assert len(rows) == len(host) and rows[0]["entry_first"] == 0.0
        for a, b in itertools.pairwise(rows):
            assert a["end_last"] is not None and b["entry_first"] >= a["end_last"], (a, b)
        assert all(r["waited_first"] is not None for r in rows if r["kernel"].startswith(("attention", "rms_norm")))
        window = decode_step.timeline_window(host, 4)
        assert window.start == max(0, next(i for i, k, *_ in host if k.startswith("attention")) - 2)
        table = st.timeline_lines("t", st.timeline(host, window))
        assert len(table) == 4 + len([i for i, *_ in host if i in window])
    finally:
        sys.path.remove(str(BENCH))
