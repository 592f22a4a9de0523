"""Where one launch of a generated kernel spends its time, stage by stage: thread 0 of every block
stamps the GPU's global timer (`intrinsics.globaltimer`: ns, one clock for every SM) and its SM's
cycle counter (`intrinsics.clock64`) at named points of the kernel's generated source.

- `instrument(kern, stages) -> Kernel`: `kern` (blocks along x only) with two more parameters, `stamps` and
  `clocks` (`uint64 [grid * (len(stages) + 1)]`, zeroed: 0 is "not reached"), which thread 0 of block
  `b` writes at `b * (len(stages) + 1) + i`: at entry (`i = 0`), then at each stage `i` of `stages`
  (`Stage`): before or after the first line of the source that starts with its marker, or at the
  end of the kernel function. A stage whose marker the source lacks is a ValueError naming it (the
  generator changed: the stage list follows it), unless the stage is optional (then never reached).
  The stamps change no value the kernel computes (`tests/tools/test_bench_stages.py`).
- `ATTENTION_STAGES`: the decode attention's (`codegen.attention`): the cache length read, the
  scores, the softmax, the V rows (summed over the block's warps next), the partial row counted
  (`atomic.add`; a kernel of one split has none), the combine's maxima and sums read (the combine in
  registers), the end of the head's last block (a kernel of several splits with one active — a short
  cache — stores from its single-split branch and stamps no end).
- `STEP_STAGES`: any plan kernel's: the end of its wait (`pdl_wait()` at its top, when there) and its
  end. `timeline(marks, window) -> list[dict]`: launches of a step stamped so, each launch's first
  and last block entry, its blocks' wait released (first, p50) and its last block's end, in µs after
  the first entry of the launches shown (`bench/decode_step.py --timeline`).
- `summarize(stamps, clocks, names) -> list[dict]`: per stage, the blocks that reached it, the time
  since each block's previous stamp (`step_*`: p50, p90, max; the SM's cycles over its clock rate,
  which the same stamps measure against the global timer) and when it was reached (`at_*`: p50 and
  max, ns after the first block's entry).
- `stage_lines(title, rows) -> list[str]`: those rows as a markdown table, with each stage's share of
  the p50s (a block's time, stage by stage: where it goes). One launch: run it again to see the noise.

`bench/attention.py --stages` stamps the attention's default launch: one plain launch after warm-up
launches (the GPU idle before it), over caches past the L2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Stage:
    """A stamp point: `name`, and `marker` (the start of a source line, its indentation included)
    with `side` "before" (the stamp takes the line's place, the line after it) or "after" (the stamp
    follows the line, indented as the line after it: inside the block it opens), or `marker` None: the
    end of the kernel function. `optional`: the source may lack it."""

    name: str
    marker: str | None
    side: str = "before"
    optional: bool = False


WAITED = Stage("waited", "    pdl_wait()", "after", optional=True)
"""The end of a kernel's wait for the launches before it (`pdl_wait()` at its top: `source._with_pdl`;
a kernel that waits later, `source.LATE_WAIT`, has none there)."""

STEP_STAGES = (WAITED, Stage("end", None))
"""A plan kernel's stages in the step (`bench/decode_step.py --timeline`): its wait, its end."""

ATTENTION_STAGES = (
    Stage("cache length read", "    r0 = sp * rows"),
    Stage("scores", "    n = "),
    Stage("softmax", "    a0_0 = "),
    Stage("V rows", "    if seg == 0:"),
    Stage("partial counted", "    if flag[0] != active - 1:", optional=True),
    Stage("combine: maxima, sums read", "    w0 = float32(math.exp(fsub_rn(m0, m)))", optional=True),
    Stage("end (the head's last block)", None),
)
"""The decode attention's stages (`codegen.attention`'s generated source), in order."""


def _stamp(slot: str, ind: str) -> str:
    return (f"{ind}if cuda.threadIdx.x == 0:\n{ind}    stamps[{slot}] = int64(globaltimer())\n"
            f"{ind}    clocks[{slot}] = int64(clock64())\n")  # fmt: skip


def instrument(kern, stages=ATTENTION_STAGES):
    """`kern` stamped at `stages` (module docstring); ValueError for a 2-D grid or a marker not found."""
    from fwdshim.codegen.device import simulating
    from fwdshim.codegen.kernel import Param
    from fwdshim.codegen.kernel_cache import KernelSource, LazyDispatcher

    if any(g != 1 for g in kern.grid[1:]):
        raise ValueError(f"{kern.name}: stages are stamped on a 1-D grid (blocks along x), not {kern.grid}")
    n = len(stages) + 1
    src = kern.source
    entry = kern.fn.ks.entry if isinstance(kern.fn, LazyDispatcher) else r"\w+_k"
    m = re.search(rf"^def ({entry})\((.*)\):\n", src, re.MULTILINE)
    if m is None:
        raise ValueError(f"{kern.name}: no kernel function in its source")
    lines = src[m.end():].split("\n")
    body_end = next((i for i, ln in enumerate(lines) if ln and not ln.startswith((" ", "\t"))), len(lines))
    body, rest = lines[:body_end], lines[body_end:]
    inserts: list[tuple[int, str]] = []
    for i, st in enumerate(stages, start=1):
        slot = f"cuda.blockIdx.x * {n} + {i}"
        if st.marker is None:
            inserts.append((len(body), _stamp(slot, "    ")))
            continue
        at = next((j for j, ln in enumerate(body) if ln.startswith(st.marker)), None)
        if at is None:
            if st.optional:
                continue
            raise ValueError(f"{kern.name}: stage `{st.name}`: no line starts with {st.marker!r} (the generated source changed)")
        if st.side == "before":
            ind = body[at][: len(body[at]) - len(body[at].lstrip())]
            inserts.append((at, _stamp(slot, ind)))
        else:
            nxt = body[at + 1] if at + 1 < len(body) else "    "
            inserts.append((at + 1, _stamp(slot, nxt[: len(nxt) - len(nxt.lstrip())])))
    for at, text in sorted(inserts, key=lambda t: t[0], reverse=True):
        body[at:at] = text.rstrip("\n").split("\n")
    head = f"def {m.group(1)}({m.group(2)}, stamps, clocks):\n" + _stamp(f"cuda.blockIdx.x * {n}", "    ")
    where = "simulator" if simulating() else "intrinsics"
    top = src[: m.start()]
    if "\nimport math\n" not in top:
        raise ValueError(f"{kern.name}: no prelude in its source")
    top = top.replace("\nimport math\n", f"\nimport math\nfrom fwdshim.codegen.{where} import globaltimer, clock64\n", 1)
    new = top + head + "\n".join(body + rest)
    name = f"{kern.name}_stages"
    size = kern.grid[0] * n
    params = (*kern.params, Param("stamps", "int64", size, "inout", "global timer a block a stage, ns"),
              Param("clocks", "int64", size, "inout", "SM cycles a block a stage"))  # fmt: skip
    return replace(kern, name=name, source=new, fn=LazyDispatcher(KernelSource(name, new, m.group(1))), params=params)


def _pcts(x: np.ndarray) -> tuple[float, float, float]:
    return (float(np.percentile(x, 50)), float(np.percentile(x, 90)), float(x.max())) if x.size else (0.0, 0.0, 0.0)


def summarize(stamps: np.ndarray, clocks: np.ndarray, names) -> list[dict]:
    """Per stage (`names`, entry first): blocks reaching it, `step_p50/p90/max` (ns since the block's
    previous stamp, from its SM's cycles) and `at_p50/at_max` (ns after the first entry)."""
    n = len(names)
    g = np.asarray(stamps, np.int64).reshape(-1, n)
    c = np.asarray(clocks, np.int64).reshape(-1, n)
    reached = g > 0
    if not reached[:, 0].any():
        raise ValueError("no block stamped its entry")
    t0 = g[reached[:, 0], 0].min()
    # cycles per ns: each block's span on its own SM's clock against the global timer
    last = np.where(reached, np.arange(n), -1).max(axis=1)
    rows_ = np.arange(len(g))
    span_g = (g[rows_, last] - g[:, 0])[last > 0]
    span_c = (c[rows_, last] - c[:, 0])[last > 0]
    rate = float(span_c.sum() / span_g.sum()) if span_g.sum() > 0 else 1.0
    out = []
    for i, name in enumerate(names):
        ok = reached[:, i]
        at = (g[ok, i] - t0).astype(np.float64)
        row = dict(stage=name, blocks=int(ok.sum()), at_p50=float(np.percentile(at, 50)) if at.size else 0.0,
                   at_max=float(at.max()) if at.size else 0.0)  # fmt: skip
        if i:
            prev = np.where(reached[:, :i], np.arange(i), -1).max(axis=1)
            both = ok & (prev >= 0)
            step = (c[both, i] - c[both, prev[both]]) / rate
            row.update(zip(("step_p50", "step_p90", "step_max"), _pcts(step), strict=True))
        out.append(row)
    return out


def stage_lines(title: str, rows: list[dict]) -> list[str]:
    """A markdown table of `summarize`'s rows under `title`."""
    whole = sum(r.get("step_p50", 0.0) for r in rows) or 1.0
    lines = [title, "",
             "| stage | blocks | ns a block from its previous stamp (its SM's cycles at the clock the stamps measure): p50 "
             "| p90 | max | share of the p50s | reached, ns after the first block's entry: p50 | max |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if "step_p50" in r:
            step = " | ".join(f"{r[k]:.0f}" for k in ("step_p50", "step_p90", "step_max")) + f" | {r['step_p50'] / whole:.0%}"
        else:
            step = " | | | "
        lines.append(f"| {r['stage']} | {r['blocks']} | {step} | {r['at_p50']:.0f} | {r['at_max']:.0f} |")
    return lines


def timeline(marks, window=None) -> list[dict]:
    """One row a stamped launch of `marks` (`(plan index, kernel name, blocks, stage names, stamps,
    clocks)`, stamps as host arrays), those with plan indices in `window` (a range; None: all): `blocks`,
    `entry_first`/`entry_last`, `waited_first`/`waited_p50` (None without a wait stamp), `end_last` (the
    last stamped end: a launch whose blocks return early — a tail's, an attention's idle splits — has
    fewer ends than blocks), µs after the earliest entry among them."""
    rows = []
    for i, name, nb, names, stamps, _ in marks:
        if window is not None and i not in window:
            continue
        g = np.asarray(stamps, np.int64).reshape(nb, len(names))
        col = {n: g[:, j][g[:, j] > 0] for j, n in enumerate(names)}
        rows.append(dict(index=i, kernel=name, blocks=nb, _e=col["entry"], _w=col.get("waited"), _end=col.get("end")))
    starts = [r["_e"].min() for r in rows if r["_e"].size]
    if not starts:
        raise ValueError("no stamped launch ran")
    t0 = min(starts)
    us = lambda v: round((float(v) - t0) / 1e3, 2)
    for r in rows:
        e, w, end = r.pop("_e"), r.pop("_w"), r.pop("_end")
        r.update(entry_first=us(e.min()) if e.size else None, entry_last=us(e.max()) if e.size else None,
                 waited_first=us(w.min()) if w is not None and w.size else None,
                 waited_p50=us(np.percentile(w, 50)) if w is not None and w.size else None,
                 end_last=us(end.max()) if end is not None and end.size else None)  # fmt: skip
    return rows


def timeline_lines(title: str, rows: list[dict]) -> list[str]:
    """A markdown table of `timeline`'s rows under `title`."""
    f = lambda v: "" if v is None else f"{v:.2f}"
    lines = [title, "", "| # | launch | blocks | entry: first | last | wait released: first | p50 | last end |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['index']} | `{r['kernel']}` | {r['blocks']} | {f(r['entry_first'])} | {f(r['entry_last'])} | "
                     f"{f(r['waited_first'])} | {f(r['waited_p50'])} | {f(r['end_last'])} |")  # fmt: skip
    return lines
