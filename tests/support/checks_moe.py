"""Helpers the tests share (from tests/codegen/test_kernels_moe.py, which imports them from here, as others do)."""

from __future__ import annotations

import numpy as np

from fwdshim import reference as R
from fwdshim.codegen import moe
from fwdshim.dialects.attributes import GgmlType
from fwdshim.int8 import quantize_act
from fwdshim.weights import WeightData
from support.kernels_common import close, q8_0, rng

F32 = np.float32


def _wd(raw, shape):
    return WeightData("w", GgmlType.Q8_0, shape, raw)


def _x(x, act):
    if act == "f32":
        return x, {"x": x}
    qx = quantize_act(x)
    return qx, {"xq": qx.q, "xd": qx.d}


def route(e: int, d: int, top_k: int, act: str, rq, rd, xa) -> dict:
    """The router's two launches, its logits (`moe.logits`) then its top-k (`moe.topk`)."""
    lg = moe.logits(e, d, act=act).run(qs=rq, dw=rd, **xa)["y"]
    return moe.topk(e, top_k).run(lg=lg)


def check_router(e: int, d: int, top_k: int, act: str, scales) -> tuple[np.ndarray, np.ndarray]:
    """Router rows that are multiples of one row: their logits order as `scales`, equal scales tie
    bit for bit."""
    g = rng()
    x = g.standard_normal(d).astype(F32)
    base = g.standard_normal(d).astype(F32)
    if base @ x < 0:
        base = -base
    router = np.stack([base * F32(s) for s in scales]).astype(F32)
    raw, rq, rd = q8_0(router)
    xin, xa = _x(x, act)
    out = route(e, d, top_k, act, rq, rd, xa)
    idx, wts = R.moe_route(xin, _wd(raw, (e, d)), top_k)
    assert list(out["idx"]) == list(idx), f"router chose {list(out['idx'])}, reference {list(idx)}"
    close(out["wts"], wts, 2e-6, "router weights")
    assert abs(float(out["wts"].sum()) - 1) < 1e-6
    return out["idx"], out["wts"]


def check_moe(e: int, d: int, ff: int, top_k: int, act: str, **kw) -> None:
    g = rng()
    x = g.standard_normal(d).astype(F32)
    router = g.standard_normal((e, d)).astype(F32) * F32(0.3)
    gate = (g.standard_normal((e, ff, d)) * 0.2).astype(F32)
    up = (g.standard_normal((e, ff, d)) * 0.2).astype(F32)
    down = (g.standard_normal((e, d, ff)) * 0.2).astype(F32)
    (rr, rq, rd), (gr, gq, gd), (ur, uq, ud), (dr, dq, dd) = (q8_0(a) for a in (router, gate, up, down))
    xin, xa = _x(x, act)
    routed = route(e, d, top_k, act, rq, rd, xa)
    gk = moe.gate_up(e, d, ff, top_k, act=act, shape=kw.get("gate_shape"))
    h = gk.run(qs=gq, dw=gd, qs2=uq, dw2=ud, idx=routed["idx"], **xa)["z0"]
    dk = moe.down(e, d, ff, top_k, shape=kw.get("down_shape"))
    y = dk.run(qs=dq, dw=dd, x=h, idx=routed["idx"], wts=routed["wts"])["out"]
    want = R.moe(xin, _wd(rr, (e, d)), _wd(gr, (e, ff, d)), _wd(ur, (e, ff, d)), _wd(dr, (e, d, ff)), top_k)
    # float32 dots over d and ff: an error budget relative to the output's scale (sums cancel)
    close(y, want, 1e-5 * (1 + np.abs(want)) + 4e-6 * np.abs(want).max(), f"moe ({act})")
