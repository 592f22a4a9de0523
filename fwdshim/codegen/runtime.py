"""The runtime: a decode step's launch plan on a device, captured once as one CUDA graph, replayed per step.

`CompiledForward(func, weights)` (DESIGN.md §6):

1. builds the launch plan (`codegen.plan.plan_for`), or takes one;
2. allocates every buffer part of the plan as a zeroed device array and uploads the weights from the
   `WeightStore` (Q8_0 repacked by `weights.repack_q8_0` into `qs int8` + `dw float32`, the affine
   block types by `ggml_blocks.repack` into `qs int8` + the file's scales, F32 as is,
   F16 as half, BF16 as its `uint16` bits). The step's small buffers — every `input` that is not a
   cache, and `%cache_len` — are views of one device allocation (`packed`, each at a 256-byte
   boundary) mirrored by one page-locked host array, so a step that writes all of them uploads them in one copy;
3. on a GPU: compiles every kernel, runs the stages once (so every module is loaded), then captures
   the whole forward with cuda.core's `GraphBuilder` — one kernel launch per plan launch, nothing
   else: the argument tuples are built before capture, so no allocation, sync or host array happens
   inside it — and checks that the graph holds exactly the plan's kernel count of kernel nodes, each
   with its launch's grid and block (`RuntimeError` otherwise).

Per step, `step(inputs, cache_len=)` writes the inputs into their device buffers (a NumPy array or
any object with `__cuda_array_interface__`, of the argument's shape; a cache argument may hold fewer
rows than its capacity: they fill the first rows), writes the number of cache rows into the device
scalar `%cache_len` that every attention kernel reads (so one capture serves every step, the first
one included: `cache_len=0` attends the current position alone), and replays the graph on the
runtime's stream. It returns the function's results as device arrays of the declared shapes: views
of the runtime's own buffers, valid until the next step (copy them, or `outputs_host()`).
`set_inputs(...)` and `launch()` are its two halves. `run_stagewise(...)` does the same launching the stages one by one (the path under Numba's CUDA
simulator, where there are no graphs, and the reference of the GPU test "graph == stagewise").

Cache maintenance: where the plan has `kv_append` launches (`LaunchPlan.maintenance`), the step
itself copies each attention's current `k`, `v` into row `cache_len` of its caches (inside the
graph). `append_caches(row)` copies them into row `row` from the host side (stream-ordered copies);
it skips the caches the last step already appended at that row, so a caller that appends after each
step keeps working and costs nothing.

Kernel source lives in the kernel cache directory (`codegen.kernel_cache.cache_dir`), so Numba's on-disk
cache makes a second compile of the same model fast.

Device memory: before allocating anything, the step's need (`step_memory`: every buffer part and
weight the runtime allocates, plus what the caller allocates beside it, `extra`) is compared with
the free memory of the CUDA context (`device_memory`); a step that does not fit is a
`DeviceMemoryError` (`memory_refusal`: one line, the GiB needed and the GiB free of the total). An
allocation the device still refuses (CUDA out of memory, from Numba or cuda.core) is the same error.

Errors: `ValueError` for an input of the wrong size or dtype, an unknown input name, or a cache
length outside `0..l-1`; `MissingWeight` for a weight the store lacks; `PlanError` for IR the plan
cannot lower; `DeviceMemoryError` for a step the device's memory does not hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from xdsl.ir import Operation

from fwdshim.codegen.device import simulating
from fwdshim.codegen.launch import (  # noqa: F401 - the memory accounting, re-exported where it was
    CACHE_LEN,
    GIB,
    PACK_ALIGN,
    Buffer,
    LaunchPlan,
    StepMemory,
    _aligned,
    _packed_parts,
    gib,
    step_memory,
)
from fwdshim.codegen.plan import plan_for
from fwdshim.codegen.tuning import DEFAULT, Tuning
from fwdshim.ggml_blocks import AFFINE, repack
from fwdshim.weights import WeightStore


def _host_weight(buf: Buffer, weights: WeightStore) -> dict[str, np.ndarray]:
    """The parts of a weight buffer as host arrays, from the store (checked against the plan)."""
    wd = weights.get(buf.tensor)
    if tuple(wd.shape) != tuple(buf.shape):
        raise ValueError(f"weight `{buf.tensor}` ({buf.name}) has shape {list(wd.shape)}, the IR declares {list(buf.shape)}")
    ggml = wd.ggml.value
    if buf.dtype == "q8_0":
        if ggml != "q8_0":
            raise ValueError(f"weight `{buf.tensor}` is {ggml}, the IR declares q8_0")
        qs, d = wd.q8_0
        return {"qs": qs.reshape(-1), "dw": d.reshape(-1)}
    if wd.qtype in AFFINE:
        if buf.dtype != ggml:
            raise ValueError(f"weight `{buf.tensor}` is {ggml}, the IR declares {buf.dtype}")
        return repack(wd.raw, wd.qtype)
    if buf.dtype == "f16":
        return {"": np.asarray(wd.raw, dtype=np.float16).reshape(-1)}
    if buf.dtype == "bf16":
        return {"": np.ascontiguousarray(wd.raw).view(np.uint16).reshape(-1)}
    return {"": np.asarray(wd.f32, dtype=np.float32).reshape(-1)}


# ---------------------------------------------------------------------------------------------
# device memory

class DeviceMemoryError(MemoryError):
    """A step the device's memory does not hold: refused before allocating (`memory_refusal`), or an
    allocation the device refused (CUDA out of memory); `str(e)` is one line."""


def memory_refusal(need: StepMemory, free: float, total: float) -> str | None:
    """Why a step needing `need` does not fit a device with `free` of `total` bytes (one line), or
    None when it fits."""
    if need.total <= free:
        return None
    return f"{need.describe()}; the device has {gib(free)} GiB free of {gib(total)} GiB"


def device_memory() -> tuple[float, float] | None:
    """(free, total) bytes of the current CUDA context (Numba's `get_memory_info`; the simulator says
    infinite), or None where the memory manager cannot say."""
    from numba import cuda

    try:
        info = cuda.current_context().get_memory_info()
    except NotImplementedError:  # an external memory manager (a pool) that does not report
        return None
    return info[0], info[1]


def check_memory(need: StepMemory) -> None:
    """DeviceMemoryError when `need` exceeds the free memory of the current context."""
    mem = device_memory()
    why = memory_refusal(need, *mem) if mem is not None else None
    if why is not None:
        raise DeviceMemoryError(why)


OUT_OF_MEMORY = 2
"""`CUDA_ERROR_OUT_OF_MEMORY`, the driver's code of a refused allocation."""


def out_of_memory(e: BaseException) -> bool:
    """Whether `e` is the device refusing an allocation: Numba's `CudaAPIError` of code
    `CUDA_ERROR_OUT_OF_MEMORY`, or an error naming it (cuda.core's `CUDAError`: `CUDA_ERROR_OUT_OF_MEMORY:
    out of memory`; the runtime API's `cudaErrorMemoryAllocation`)."""
    if type(e).__name__ == "CudaAPIError" and getattr(e, "code", None) == OUT_OF_MEMORY:
        return True
    text = str(e)
    return "CUDA_ERROR_OUT_OF_MEMORY" in text or "cudaErrorMemoryAllocation" in text


def allocation_failure(need: StepMemory, e: BaseException) -> DeviceMemoryError:
    """The one-line error of an allocation the device refused while setting up a step of `need`."""
    try:
        mem = device_memory()
    except Exception:  # noqa: BLE001 - the error says what it can without the figures
        mem = None
    has = f"; the device has {gib(mem[0])} GiB free of {gib(mem[1])} GiB" if mem is not None else ""
    return DeviceMemoryError(
        f"the device is out of memory (CUDA_ERROR_OUT_OF_MEMORY): {need.describe()}{has}"
    )


@contextmanager
def allocations(need) -> Iterator[None]:
    """Run a setup that allocates device memory: a CUDA out-of-memory error inside it becomes
    `allocation_failure(need(), e)` (one line), `need` a callable giving the step's `StepMemory` (None:
    the error is left as it is, nothing known to say); every other error passes unchanged."""
    try:
        yield
    except DeviceMemoryError:
        raise
    except Exception as e:
        known = need() if out_of_memory(e) else None
        if known is None:
            raise
        raise allocation_failure(known, e) from None


def _names(name: str) -> tuple[str, str]:
    return (name, name[1:]) if name.startswith("%") else (f"%{name}", name)


class CompiledForward:
    """A decode step compiled to Numba CUDA kernels, replayed as one CUDA graph (module docstring)."""

    def __init__(
        self, func: Operation, weights: WeightStore, *, plan: LaunchPlan | None = None,
        entry: str | None = None, capture: bool | None = None, extra_bytes: int = 0, tuning: Tuning = DEFAULT,
    ) -> None:  # fmt: skip
        """`func`: a legalized `func.func` or the module holding it (`entry` picks a function);
        `tuning`: what the plan is built under (a given `plan` keeps its own);
        `capture`: build the graph (default: on a GPU, never under the simulator); `extra_bytes`:
        device memory the caller allocates beside the step (the device loop's), counted in the check
        made before allocating (DeviceMemoryError when the step does not fit the free memory)."""
        from numba import cuda

        self.cuda = cuda
        self.plan = plan if plan is not None else plan_for(func, entry, tuning)
        self.tuning = self.plan.tuning
        self.simulated = simulating()
        self.memory = step_memory(self.plan, extra_bytes)
        """The device bytes the step needs (`step_memory`), checked before anything is allocated."""
        check_memory(self.memory)
        with allocations(lambda: self.memory):
            self._setup(weights, capture)

    def _setup(self, weights: WeightStore, capture: bool | None) -> None:
        """Allocate the buffers, upload the weights and capture the graph (the constructor's body)."""
        cuda = self.cuda
        self.stream: Any = 0
        if not self.simulated:
            from cuda.core import Device, StreamOptions

            # Numba's device, named: `Device()` alone probes the current context first, a failing
            # driver call (CUDA_ERROR_INVALID_CONTEXT) that compute-sanitizer reports as an error
            self.device = Device(cuda.get_current_device().id)
            self.device.set_current()
            # blocking: synchronous copies on the default stream (`copy_to_host()`) wait for its work
            self.stream = self.device.create_stream(options=StreamOptions(nonblocking=False))
        self.arrays: dict[tuple[str, str], Any] = {}
        packed = _packed_parts(self.plan)
        nbytes = sum(_aligned(n, t) for *_, n, t in packed)
        self.packed = cuda.to_device(np.zeros(max(nbytes, PACK_ALIGN), dtype=np.uint8))
        self._stage = cuda.pinned_array(max(nbytes, PACK_ALIGN), dtype=np.uint8)
        self._stage[:] = 0
        """The host mirror of `packed` (page-locked: an upload is one DMA), uploaded whole by a step
        that writes every packed buffer; rewritten only once the last upload from it is done."""
        self._pending = False
        self._stage_views: dict[str, np.ndarray] = {}
        for name, part, off, n, dtype in packed:
            size = n * np.dtype(dtype).itemsize
            self.arrays[(name, part)] = self.packed[off : off + size].view(dtype)
            self._stage_views[name] = self._stage[off : off + size].view(dtype)
        for buf in self.plan.buffers:
            host = _host_weight(buf, weights) if buf.role == "weight" else {}
            for p in buf.parts:
                if (buf.name, p.name) in self.arrays:
                    continue
                data = host.get(p.name)
                if data is None:
                    data = np.zeros(p.size, dtype=p.dtype)
                elif data.dtype != np.dtype(p.dtype) or data.size != p.size:
                    raise ValueError(f"weight {buf.name}.{p.name}: {data.size} {data.dtype}, the kernels read {p.size} {p.dtype}")
                self.arrays[(buf.name, p.name)] = cuda.to_device(np.ascontiguousarray(data))
        self._args = [tuple(self.arrays[(a.buffer, a.part)] for a in launch.args) for launch in self.plan.launches]
        self._caches = self._cache_pairs()
        self._appended = {
            a.buffer for launch in self.plan.maintenance for a in launch.args if a.param.startswith(("k_cache", "v_cache"))
        }
        """The cache buffers the step appends to itself (`kv_append`)."""
        self._outs: list[Any] | None = None
        self._last_len: int | None = None
        """The cache length of the last step launched (its row appended by `kv_append`)."""
        self.graph = None
        self.graph_kernel_nodes: int | None = None
        if capture is None:
            capture = not self.simulated
        if capture:
            self._capture()
        self.sync()

    # -----------------------------------------------------------------------------------------
    # buffers

    def array(self, name: str, part: str = "") -> Any:
        """The device array of part `part` of buffer `name` (`%x` or `x`)."""
        return self.arrays[(_names(name)[0], part)]

    def _buffer(self, name: str) -> Buffer:
        return self.plan.buffer(_names(name)[0])

    def _cache_pairs(self) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        """(current row buffer, cache buffer) for each attention's k and v, from its launch's args."""
        pairs = []
        for launch in self.plan.stage_launches:
            by = {a.param: (a.buffer, a.part) for a in launch.args}
            for cur, cache in (("k", "k_cache"), ("v", "v_cache")):
                if cache in by and cur in by:
                    pairs.append((by[cur], by[cache]))
        return pairs

    def capacity(self) -> int | None:
        """The number of cache rows the buffers hold (`l - 1`), or None without attention."""
        for _, cache in self._caches:
            b = self.plan.buffer(cache[0])
            return b.shape[0]
        return None

    def write(self, name: str, value: Any) -> int | None:
        """Write an input (or cache) buffer from a host array or a device array (any object with
        `__cuda_array_interface__`); returns the number of rows written for a cache, else None."""
        buf = self._buffer(name)
        if buf.role not in ("input", "cache"):
            raise ValueError(f"{buf.name} is a {buf.role} buffer, not an input of @{self.plan.function}")
        dst = self.arrays[(buf.name, "")]
        dev = hasattr(value, "__cuda_array_interface__")
        src = self.cuda.as_cuda_array(value) if dev else np.asarray(value)
        if np.dtype(src.dtype) != np.float32:
            raise ValueError(f"input {buf.name} is float32, got {src.dtype}")
        size = int(np.prod(src.shape)) if src.shape else 1
        rows = None
        if buf.role == "cache":
            width = int(np.prod(buf.shape[1:]))
            if size % width or size // width > buf.shape[0]:
                raise ValueError(f"cache {buf.name} holds up to {buf.shape[0]} rows of {width}, got {size} values")
            rows = size // width
        elif size != dst.size:
            raise ValueError(f"input {buf.name} holds {dst.size} values, got {size}")
        if size == 0:
            return rows
        mirror = self._stage_views.get(buf.name)
        if mirror is not None and not dev:
            self._stage_free()
            mirror[:] = np.asarray(src, dtype=np.float32).reshape(size)
            dst.copy_to_device(mirror, stream=self.stream)
            self._pending = True
            return rows
        target = dst[:size] if size != dst.size else dst
        if dev:
            if not src.is_c_contiguous():
                raise ValueError(f"input {buf.name}: a device array must be C-contiguous")
            target.copy_to_device(src.reshape(size), stream=self.stream)
        else:
            target.copy_to_device(np.ascontiguousarray(src, dtype=np.float32).reshape(size), stream=self.stream)
        return rows

    def set_inputs(self, inputs: Mapping[str, Any] | Sequence[Any] | None, cache_len: int | None = None) -> None:
        """Write a step's inputs and cache length (what `step` does before launching)."""
        if inputs is None:
            inputs = {}
        if not isinstance(inputs, Mapping):
            if len(inputs) > len(self.plan.inputs):
                raise ValueError(f"@{self.plan.function} takes {len(self.plan.inputs)} inputs, got {len(inputs)}")
            inputs = dict(zip(self.plan.inputs, inputs))
        self._stage_free()
        known = set(self.plan.inputs)
        rows: set[int] = set()
        staged: set[str] = set()
        for name, value in inputs.items():
            full = _names(name)[0]
            if full not in known:
                raise ValueError(f"@{self.plan.function} has no input {full} (inputs: {', '.join(self.plan.inputs)})")
            if self._stage_host(full, value):
                staged.add(full)
                continue
            r = self.write(full, value)
            if r is not None:
                rows.add(r)
        has_len = CACHE_LEN in self._stage_views
        if has_len:
            if cache_len is None:
                if len(rows) != 1:
                    raise ValueError("give cache_len (the cache rows written so far), or the caches themselves")
                cache_len = rows.pop()
            self._check_len(cache_len)
            self._stage_views[CACHE_LEN][0] = cache_len
            staged.add(CACHE_LEN)
            self._last_len = cache_len
        if not staged:
            return
        self._pending = True
        if staged == set(self._stage_views):  # every packed buffer: one upload
            self.packed.copy_to_device(self._stage, stream=self.stream)
            return
        for name in staged:
            self.arrays[(name, "")].copy_to_device(self._stage_views[name], stream=self.stream)

    def _stage_host(self, name: str, value: Any) -> bool:
        """Put a host array for packed input `name` into the host mirror (checked); False for a
        device array or a buffer that is not packed."""
        mirror = self._stage_views.get(name)
        if mirror is None or hasattr(value, "__cuda_array_interface__"):
            return False
        src = np.asarray(value)
        if src.dtype != np.float32:
            raise ValueError(f"input {name} is float32, got {src.dtype}")
        if src.size != mirror.size:
            raise ValueError(f"input {name} holds {mirror.size} values, got {src.size}")
        mirror[:] = src.reshape(-1)
        return True

    def _check_len(self, n: int) -> None:
        cap = self.capacity() or 0
        if not 0 <= n <= cap:
            raise ValueError(f"cache length {n} outside 0..{cap} (the IR's l - 1)")

    def set_cache_len(self, n: int) -> None:
        """Write the number of cache rows the attention kernels attend (besides the current one)."""
        self._check_len(n)
        self._stage_free()
        self._stage_views[CACHE_LEN][0] = n
        self.arrays[(CACHE_LEN, "")].copy_to_device(self._stage_views[CACHE_LEN], stream=self.stream)
        self._pending = True
        self._last_len = n

    def _outputs(self) -> list[Any]:
        if self._outs is None:
            self._outs = self._output_views()
        return list(self._outs)

    def _output_views(self) -> list[Any]:
        out = []
        for name in self.plan.outputs:
            buf = self.plan.buffer(name)
            arr = self.arrays[(name, buf.parts[0].name)]
            out.append(arr.reshape(buf.shape) if len(buf.parts) == 1 and buf.shape else arr)
        return out

    def outputs_host(self) -> list[np.ndarray]:
        """The results of the last step copied to the host (synchronizes)."""
        self.sync()
        return [np.asarray(a.copy_to_host()) for a in self._outputs()]

    @property
    def appends_caches(self) -> bool:
        """Whether every attention's caches are appended by the step itself (`kv_append`)."""
        return all(cache[0] in self._appended for _, cache in self._caches)

    def append_caches(self, row: int) -> None:
        """Copy each attention's current `k`, `v` rows into row `row` of its caches (stream-ordered);
        the caches the last step appended at `row` itself (`kv_append`) are skipped."""
        for (cur_b, cur_p), (cache_b, cache_p) in self._caches:
            cur = self.arrays[(cur_b, cur_p)]
            buf = self.plan.buffer(cache_b)
            width = int(np.prod(buf.shape[1:]))
            if not 0 <= row < buf.shape[0]:
                raise ValueError(f"cache row {row} outside 0..{buf.shape[0] - 1}")
            if cur.size != width:
                raise ValueError(f"{cur_b} holds {cur.size} values, a row of {cache_b} {width}")
            if row == self._last_len and cache_b in self._appended:
                continue
            self.arrays[(cache_b, cache_p)][row * width : (row + 1) * width].copy_to_device(cur, stream=self.stream)

    # -----------------------------------------------------------------------------------------
    # launching

    def _launch_all(self, stream: Any) -> None:
        for launch, args in zip(self.plan.launches, self._args, strict=True):
            k = launch.kernel
            if self.simulated:
                k.fn[k.grid, k.block](*args)
            else:
                k.launch_on(stream, *args)

    def run_stagewise(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None, cache_len: int | None = None) -> list[Any]:
        """One step launching the stages one by one (see the module docstring)."""
        self.set_inputs(inputs, cache_len)
        self._launch_all(self.stream)
        return self._outputs()

    def step(self, inputs: Mapping[str, Any] | Sequence[Any] | None = None, cache_len: int | None = None) -> list[Any]:
        """One step: write the inputs and the cache length, replay the graph (stagewise without one)."""
        self.set_inputs(inputs, cache_len)
        self.launch()
        return self._outputs()

    def launch(self) -> None:
        """Replay the graph on the runtime's stream (launch the stages one by one without one), on
        the inputs and cache length written before."""
        if self.graph is None:
            self._launch_all(self.stream)
        else:
            self.graph.launch(self.stream)

    def sync(self) -> None:
        """Wait for the runtime's stream."""
        self._pending = False
        if self.simulated:
            return
        self.stream.sync()

    def _stage_free(self) -> None:
        """Wait for an upload from the host mirror still in flight (none after a `sync`)."""
        if self._pending:
            self.sync()

    # -----------------------------------------------------------------------------------------
    # the graph

    def compile_all(self) -> list[Any]:
        """Compile every kernel for its signature now (GPU); returns the compile results."""
        return [k.compile() for k in self.plan.kernels()]

    def _capture(self) -> None:
        if self.simulated:
            raise RuntimeError("Numba's CUDA simulator has no CUDA graphs: use run_stagewise")
        self.compile_all()
        if CACHE_LEN in {b.name for b in self.plan.buffers}:
            self.set_cache_len(0)
        self._launch_all(self.stream)  # loads every module before the capture
        self.sync()
        gb = self.device.create_graph_builder()
        gb.begin_building()
        self._launch_all(gb)
        handle = _capture_graph(gb)
        gb.end_building()
        self.graph_kernel_nodes = _check_nodes(gb, handle, self.plan)
        self.graph = gb.complete()
        self.graph.upload(self.stream)


def _capture_graph(gb: Any) -> Any:
    """The CUgraph a builder is capturing into (the driver's capture info), or None."""
    try:
        from cuda.bindings import driver

        info = driver.cuStreamGetCaptureInfo(int(gb.stream.handle))
        return info[3] if int(info[0]) == 0 else None
    except Exception:  # noqa: BLE001 - only a fallback for cuda-core without graph_definition
        return None


def _driver_kernel_nodes(handle: Any) -> int:
    from cuda.bindings import driver

    _, _, n = driver.cuGraphGetNodes(handle, 0)
    _, nodes, n = driver.cuGraphGetNodes(handle, n)
    kernel = driver.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
    return sum(1 for node in nodes[:n] if driver.cuGraphNodeGetType(node)[1] == kernel)


def _check_nodes(gb: Any, handle: Any, plan: LaunchPlan) -> int:
    """The number of kernel nodes of the captured graph, checked against the plan: the count and,
    where cuda-core exposes the graph (`graph_definition`, 1.1+), each launch's grid and block (as
    multisets); older cuda-core: the count through the driver (`cuGraphGetNodes`)."""
    definition = getattr(gb, "graph_definition", None)
    if definition is None:
        if handle is None:
            raise RuntimeError("cannot read the captured graph's nodes (cuda-core without graph_definition)")
        count = _driver_kernel_nodes(handle)
        if count != plan.kernel_count:
            raise RuntimeError(f"the captured graph holds {count} kernel nodes, the plan {plan.kernel_count} launches")
        return count
    kernels = [n for n in definition.nodes() if type(n).__name__ == "KernelNode"]
    if len(kernels) != plan.kernel_count:
        raise RuntimeError(f"the captured graph holds {len(kernels)} kernel nodes, the plan {plan.kernel_count} launches")
    pad = lambda t: tuple(t) + (1,) * (3 - len(t))  # noqa: E731
    got = sorted((pad(n.grid), pad(n.block)) for n in kernels)
    want = sorted((pad(launch.grid), pad(launch.block)) for launch in plan.launches)
    if got != want:
        raise RuntimeError(f"the captured graph's launch shapes {got} differ from the plan's {want}")
    return len(kernels)
