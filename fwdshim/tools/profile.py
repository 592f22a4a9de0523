"""Where a decode step's time goes: every launch of the compiled step timed on the GPU (issue 12).

`profile_model(model, numerics=, fill=)` compiles the model's step (`runner.compile_step`, then the
GPU runtime `codegen.runtime.CompiledForward`), sets the caches' fill (the rows each attention reads)
to `fill` and times, on the GPU:

- every distinct kernel of the step in a graph of its own: one launch of it, over as many copies of
  its weight and cache arguments as pass 3x the L2 (64 at most), in turn for at least 32 launches
  (so each launch reads its weights from HBM, as in a step), replayed `reps` times between two
  events; the time per launch is the total over launches. Launches of one kernel (the same name: the
  same code, shapes and launch shape, e.g. one per layer) share its time;
- the whole step's graph, replayed back to back (`step_us`), and an empty kernel in a graph of 32
  launches (`floor_us`, the launch floor);
- a streaming read of 1 GiB (16-byte loads), the read ceiling of the shares;
- for each distinct kernel, a bare streaming read of as many bytes as it reads, one launch over
  copies rotated as its own (`size_read_us`, the best of `SIZE_READ_GRIDS`): what one launch of
  that many bytes can take at best, launch, first loads and drain included (on an H200 a read of a
  Llama-3-8B O projection's 18.9 MB reaches 71 % of the ceiling, of its gate's 66 MB 90 %:
  `bench/read_sizes.py`). `of read` is that time over the kernel's (1.0: as fast as a bare read).

`Profile` holds one `LaunchRecord` per launch (in graph order) with the bytes the launch must read
and write (`launch_bytes`: every array argument whole, except a cache: the `fill` rows an attention
reads, the one row an append writes), its time, GB/s (bytes read + written over the time), share of
the read ceiling and share of the step (its time over the sum of all launches' times).
Each kernel's occupancy (`Occupancy`, read from the compiled kernel on the GPU): registers a thread,
static shared memory a block, the blocks an SM holds at once and what limits them (`occupancy`: the
registers, the shared memory, the threads or the blocks an SM has, `SMLimits`), and its grid in waves
of that many blocks on every SM — a grid just past a whole number of waves runs a thin last wave.
`table()` prints one row per kernel sorted by its time in the step, `families()` sums by kernel
family (the kernel name up to its sizes: `gemv_q8_0_int8`, `attention_one_word`, ...), `to_json()`,
`plot(path)` draws the families as a PNG bar chart (matplotlib, the `profile` extra). The table and
bytes need no GPU (`records_of(plan, fill)`, `Profile(records, ...)` with the times given).

    fwdshim profile --model M [--numerics N] [--context C] [--fill F] [-o PROFILE.json] [--png P.png]
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fwdshim.codegen.device import SMLimits, occupancy  # noqa: F401 - the profile's occupancy rules
from fwdshim.codegen.launch import Launch, LaunchPlan
from fwdshim.codegen.tuning import Tuning
from fwdshim.tools.timing import L2_BYTES, Timer, empty_launch_us, read_ceiling_gbs, size_read_us
from fwdshim.tools.tuning_env import tuning_from_env

_SHAPE_TOKEN = re.compile(r"^(\d|h\d+kv)")


def family(kernel: str) -> str:
    """The kernel's family: its name up to the first size token (`gemv_q8_0_int8_1x576x576_...` ->
    `gemv_q8_0_int8`, `attention_one_word_h9kv3d64_...` -> `attention_one_word`)."""
    tokens = kernel.replace("q8_0", "q8-0").split("_")
    out = []
    for t in tokens:
        if out and _SHAPE_TOKEN.match(t):
            break
        out.append(t)
    return "_".join(out).replace("q8-0", "q8_0")


def launch_bytes(plan: LaunchPlan, launch: Launch, fill: int) -> tuple[int, int]:
    """(bytes read, bytes written) of one launch at cache fill `fill` (module docstring)."""
    read = written = 0
    for a in launch.args:
        buf = plan.buffer(a.buffer)
        part = buf.part(a.part)
        nbytes = part.size * np.dtype(part.dtype).itemsize
        if buf.role == "cache":
            rows = buf.shape[0]
            row = nbytes // rows
            if a.role == "in":
                read += min(fill, rows) * row
            else:  # an append: one row
                written += row
            continue
        if a.role in ("in", "inout"):
            read += nbytes
        if a.role in ("out", "inout"):
            written += nbytes
    return read, written


@dataclass
class LaunchRecord:
    """One launch of the step: its place, kernel, bytes and (once timed) time in microseconds."""

    index: int
    stage: int
    kernel: str
    family: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    read: int
    written: int
    us: float | None = None


def launch_family(launch: Launch) -> str:
    """The family of a launch: its kernel's (`family`), or for a merged launch the families of the
    launches it holds joined by `+`, each once, in order (`gemv_q8_0+rms_norm_res_w_sum`: a GEMV with
    its add+norm tail)."""
    if not launch.holds:
        return family(launch.name)
    return "+".join(dict.fromkeys(family(h.name) for h in launch.holds))


@dataclass(frozen=True)
class Occupancy:
    """A kernel as compiled: `regs` registers a thread, `shared` bytes of static shared memory a block."""

    regs: int
    shared: int


def records_of(plan: LaunchPlan, fill: int) -> list[LaunchRecord]:
    """One untimed record per launch of `plan`, in graph order, with its bytes at fill `fill`."""
    out = []
    for i, launch in enumerate(plan.launches):
        r, w = launch_bytes(plan, launch, fill)
        out.append(LaunchRecord(i, launch.stage, launch.name, launch_family(launch), tuple(launch.grid), tuple(launch.block), r, w))
    return out


@dataclass
class KernelRow:
    """The launches of one kernel summed: `us` per launch, `total_us` over its launches."""

    kernel: str
    family: str
    launches: int
    us: float
    total_us: float
    read: int
    written: int
    gbs: float
    ceiling_share: float
    step_share: float
    read_us: float | None = None
    of_read: float | None = None
    regs: int | None = None
    shared: int | None = None
    blocks_per_sm: int | None = None
    limiter: str | None = None
    waves: float | None = None


@dataclass
class Profile:
    """The timed launches of one step (module docstring). `ceiling_gbs`: the read ceiling;
    `step_us`: the step's graph replayed; `floor_us`: an empty kernel's launch; `meta`: what was
    profiled (model, numerics, fill, GPU); `occupancy`: each kernel's registers and shared memory
    (by name; a kernel missing has no occupancy columns) on an SM of `limits`; `read_us`: by kernel
    name, a bare read of as many bytes as the kernel reads (`size_read_us`; a kernel missing has an
    empty `of read` column)."""

    records: list[LaunchRecord]
    ceiling_gbs: float
    step_us: float | None = None
    floor_us: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    occupancy: dict[str, Occupancy] = field(default_factory=dict)
    limits: SMLimits = SMLimits()
    read_us: dict[str, float] = field(default_factory=dict)

    @property
    def sum_us(self) -> float:
        """The launches' times summed (the share-of-step denominator)."""
        return sum(r.us or 0.0 for r in self.records)

    def _share(self, us: float) -> float:
        total = self.sum_us
        return us / total if total > 0 else 0.0

    def _gbs(self, nbytes: int, us: float) -> float:
        return nbytes / us / 1e3 if us > 0 else 0.0

    def kernels(self) -> list[KernelRow]:
        """One row per kernel, the largest share of the step first."""
        groups: dict[str, list[LaunchRecord]] = {}
        for r in self.records:
            groups.setdefault(r.kernel, []).append(r)
        rows = []
        for name, rs in groups.items():
            total = sum(r.us or 0.0 for r in rs)
            us = total / len(rs)
            read, written = rs[0].read, rs[0].written
            gbs = self._gbs(read + written, us)
            row = KernelRow(name, rs[0].family, len(rs), us, total, read, written, gbs,
                            gbs / self.ceiling_gbs if self.ceiling_gbs else 0.0, self._share(total))  # fmt: skip
            if name in self.read_us:
                row.read_us = self.read_us[name]
                row.of_read = row.read_us / us if us > 0 else None
            occ = self.occupancy.get(name)
            if occ is not None:
                threads = math.prod(rs[0].block)
                n, limiter = occupancy(occ.regs, occ.shared, threads, self.limits)
                row.regs, row.shared, row.blocks_per_sm, row.limiter = occ.regs, occ.shared, n, limiter
                row.waves = math.prod(rs[0].grid) / (n * self.limits.sms) if n else math.inf
            rows.append(row)
        return sorted(rows, key=lambda k: (-k.total_us, k.kernel))

    def families(self) -> list[tuple[str, int, float, int, float]]:
        """(family, launches, total us, bytes read + written, share of step), the largest first."""
        sums: dict[str, list] = {}
        for r in self.records:
            s = sums.setdefault(r.family, [0, 0.0, 0])
            s[0] += 1
            s[1] += r.us or 0.0
            s[2] += r.read + r.written
        out = [(f, n, us, b, self._share(us)) for f, (n, us, b) in sums.items()]
        return sorted(out, key=lambda t: (-t[2], t[0]))

    def table(self) -> str:
        """The kernels as a markdown table sorted by their time in the step, with a header line."""
        m = self.meta
        head = [
            f"{m.get('model', 'step')}: {m.get('numerics', '')}, fill {m.get('fill', 0)}, "
            f"{len(self.records)} launches of {len(self.kernels())} kernels on {m.get('gpu', 'the GPU')}; "
            f"read ceiling {self.ceiling_gbs:.0f} GB/s",
            "launches summed {:.1f} us".format(self.sum_us)
            + (f"; the step's graph {self.step_us:.1f} us" if self.step_us is not None else "")
            + (f"; an empty launch {self.floor_us:.2f} us" if self.floor_us is not None else ""),
            "",
            "| kernel | launches | us each | us in step | share of step | read KB | written KB | GB/s | of ceiling "
            "| bare read us | of read | regs | blocks/SM (limit) | waves |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for k in self.kernels():
            occ = f"{k.regs} | {k.blocks_per_sm} ({k.limiter}) | {k.waves:.2f}" if k.regs is not None else " |  | "
            rd = f"{k.read_us:.2f} | {k.of_read:.1%}" if k.read_us is not None and k.of_read is not None else " | "
            head.append(
                f"| {k.kernel} | {k.launches} | {k.us:.2f} | {k.total_us:.1f} | {k.step_share:.1%} | "
                f"{k.read / 1e3:.1f} | {k.written / 1e3:.1f} | {k.gbs:.0f} | {k.ceiling_share:.1%} | {rd} | {occ} |"
            )
        return "\n".join(head) + "\n"

    def to_json(self) -> str:
        return json.dumps(
            {
                "meta": self.meta,
                "ceiling_gbs": self.ceiling_gbs,
                "step_us": self.step_us,
                "floor_us": self.floor_us,
                "sum_us": self.sum_us,
                "sm_limits": asdict(self.limits),
                "kernels": [asdict(k) for k in self.kernels()],
                "families": [dict(family=f, launches=n, us=us, bytes=b, step_share=s) for f, n, us, b, s in self.families()],
                "launches": [asdict(r) for r in self.records],
            },
            indent=1,
        )

    def plot(self, path: str | Path, title: str | None = None):
        """Draw the families' time in the step as a horizontal bar chart into the PNG `path`, written
        as named whatever its suffix (each bar labelled with its share of the step and its GB/s);
        returns the matplotlib figure."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fams = self.families()[::-1]  # the largest on top
        fig, ax = plt.subplots(figsize=(9, 0.45 * len(fams) + 1.6))
        names = [f for f, *_ in fams]
        times = [us for _, _, us, _, _ in fams]
        ax.barh(names, times, color="#4c72b0")
        for i, (_, n, us, b, share) in enumerate(fams):
            gbs = self._gbs(b, us)
            ax.text(us, i, f" {share:.1%}, {n} launch{'' if n == 1 else 'es'}, {gbs:.0f} GB/s", va="center", fontsize=8)
        ax.set_xlabel("time in one step (us)")
        ax.set_ylabel("kernel family")
        m = self.meta
        title = title or (f"{m.get('model', 'step')} ({m.get('numerics', '')}, fill {m.get('fill', 0)}): "
                          f"{self.sum_us:.0f} us in {len(self.records)} launches")  # fmt: skip
        ax.set_title(textwrap.fill(title, 60), fontsize=10)
        ax.set_xlim(0, max(times or [1.0]) * 1.6)
        fig.tight_layout()
        fig.savefig(path, dpi=110, format="png")  # not by the suffix: `x` is not written as `x.png`
        plt.close(fig)
        return fig


def time_kernels(runtime, fill: int, reps: int = 20, min_launches: int = 32) -> dict[str, float]:
    """Microseconds per launch of each distinct kernel of `runtime` (a captured `CompiledForward`)
    at cache fill `fill`, each in a graph of its own over rotated copies of its weights and caches
    (module docstring)."""
    from numba import cuda

    plan = runtime.plan
    timer = Timer(runtime.device, runtime.stream)
    if runtime.capacity() is not None:
        runtime.set_cache_len(fill)
    runtime.sync()
    out: dict[str, float] = {}
    for launch, args in zip(plan.launches, runtime._args, strict=True):
        k = launch.kernel
        if k.name in out:
            continue
        rot = [i for i, a in enumerate(launch.args) if a.role == "in" and plan.buffer(a.buffer).role in ("weight", "cache")]
        nbytes = sum(args[i].nbytes for i in rot)
        copies = 1 if not rot else max(1, min(64, math.ceil(3 * L2_BYTES / max(nbytes, 1))))
        sets = [tuple(args)]
        for _ in range(1, copies):
            a = list(args)
            for i in rot:
                d = cuda.device_array_like(args[i])
                d.copy_to_device(args[i])
                a[i] = d
            sets.append(tuple(a))
        cuda.synchronize()
        launches = copies * -(-min_launches // copies)

        def record(gb, k=k, sets=sets, launches=launches):
            for i in range(launches):
                k.fn[k.grid, k.block, gb](*sets[i % len(sets)])

        out[k.name] = timer.replay_us(timer.graph(record), reps, launches)
        del sets
    return out


def _one(v) -> int:
    """A Numba dispatcher's per-signature answer (a dict of one) as its value."""
    return int(next(iter(v.values())) if isinstance(v, dict) else v)


def kernel_occupancy(plan) -> dict[str, Occupancy]:
    """Each distinct kernel of `plan` as compiled for the current GPU: registers a thread and static
    shared memory a block (Numba's `get_regs_per_thread`, `get_shared_mem_per_block`)."""
    out: dict[str, Occupancy] = {}
    for launch in plan.launches:
        k = launch.kernel
        if k.name not in out:
            out[k.name] = Occupancy(_one(k.fn.get_regs_per_thread()), _one(k.fn.get_shared_mem_per_block()))
    return out


def device_limits() -> SMLimits:
    """The current GPU's `SMLimits` (an attribute the driver does not give keeps the H200's)."""
    from numba import cuda

    dev = cuda.get_current_device()
    d = SMLimits()

    def get(name: str, default: int) -> int:
        try:
            return int(getattr(dev, name))
        except Exception:  # noqa: BLE001 - an attribute this driver or Numba does not know
            return default

    return SMLimits(
        sms=get("MULTIPROCESSOR_COUNT", d.sms),
        regs=get("MAX_REGISTERS_PER_MULTIPROCESSOR", d.regs),
        shared=get("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR", d.shared),
        reserved_shared=get("RESERVED_SHARED_MEMORY_PER_BLOCK", d.reserved_shared),
        threads=get("MAX_THREADS_PER_MULTIPROCESSOR", d.threads),
        blocks=get("MAX_BLOCKS_PER_MULTIPROCESSOR", d.blocks),
    )


def profile_runtime(runtime, fill: int, reps: int = 20, meta: Mapping[str, Any] | None = None) -> Profile:
    """The `Profile` of a captured `CompiledForward` at cache fill `fill` (module docstring)."""
    import warnings

    from numba import cuda

    warnings.filterwarnings("ignore", message=".*under-utilization.*")  # Numba's note on small grids
    timer = Timer(runtime.device, runtime.stream)
    records = records_of(runtime.plan, fill)
    times = time_kernels(runtime, fill, reps)
    for r in records:
        r.us = times[r.kernel]
    if runtime.capacity() is not None:
        runtime.set_cache_len(fill)
    runtime.sync()
    step_us = timer.replay_us(runtime.graph, reps, 1) if runtime.graph is not None else None
    name = cuda.get_current_device().name
    gpu = name.decode() if isinstance(name, bytes) else str(name)
    info = {"fill": fill, "gpu": gpu, **(meta or {})}
    read_us = {}
    for r in records:
        if r.kernel not in read_us and r.read > 0:
            read_us[r.kernel] = size_read_us(timer, r.read, reps)
    return Profile(records, read_ceiling_gbs(timer, reps), step_us, empty_launch_us(timer, reps), info,
                   kernel_occupancy(runtime.plan), device_limits(), read_us)


def profile_model(model, numerics: str = "dequant", fill: int = 0, reps: int = 20, name: str | None = None,
                  tuning: Tuning | None = None) -> Profile:  # fmt: skip
    """Compile `model` (an `ImportedModel`) under `numerics` for the GPU and profile its step at
    cache fill `fill` (at most the context less one).

    Raises: ValueError for a bad `fill` or `reps` (the fill against the model's context before
    anything is compiled); RunError without a CUDA GPU (Numba's simulator times nothing) or when the
    step does not fit the device's memory."""
    from fwdshim.frontend.gguf_model import integer_error
    from fwdshim.tools.runner import RunError, _func, compile_step, gpu_available

    for arg, value, takes in (("fill", fill, "a cache fill (an int), 0 to the context less one"),
                              ("reps", reps, "a whole number of replays (an int), at least 1")):  # fmt: skip
        if (why := integer_error(arg, value, takes)):
            raise ValueError(why)
    if reps < 1:
        raise ValueError(f"reps={reps}: at least one replay")
    context = getattr(model, "context", None)
    if isinstance(context, int) and not 0 <= fill <= context - 1:
        raise ValueError(f"fill={fill}: the caches hold 0..{context - 1} rows (the context less one)")
    if not gpu_available():
        raise RunError("profile_model times the step on a CUDA GPU, and none is here (Numba's simulator times nothing)")
    from fwdshim.codegen.runtime import CompiledForward, DeviceMemoryError

    module = compile_step(model, numerics)
    try:
        rt = CompiledForward(_func(module), model.weights, tuning=tuning_from_env() if tuning is None else tuning)
    except DeviceMemoryError as e:  # the step does not fit the device: one line, as `fwdshim run` says it
        raise RunError(f"{model.gguf_path}: {e}") from None
    p = model.params
    meta = {"model": name or model.gguf_path.name, "numerics": numerics, "layers": p.n_layer, "d": p.d, "context": model.context}
    return profile_runtime(rt, fill, reps, meta)
