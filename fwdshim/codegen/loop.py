"""The device-resident decode loop: token in, greedy token out, one CUDA graph a step, no upload.

`DeviceLoop(runtime, embedding, angle_table)` wraps a `CompiledForward` built with `capture=False`
(the step's launch plan: its first two inputs are the embedding row `x [d]` and the rope angles
`angles [n]`, its first output the logits) and captures one graph of

1. `embed.step_inputs`: the token at the step's position (`ids[pos]`, device memory) gathered from
   the embedding table (uploaded once, in its own layout: Q8_0 quants and scales, F16 or F32) and
   dequantized into `x`; the position's row of the angle table (the host's `rope_angles` of every
   position, uploaded once) into `angles`;
2. the plan's launches (the stages and `kv_append`);
3. `argmax.argmax`: the greedy pick over the logits written into the mapped host slot `out_id[pos+1]`
   (and its logit into `out_val`), into `ids[pos+1]` (unless the host's prompt holds that position),
   and `pos` advanced by one.

So a step needs no host input: step t+1 can be enqueued before t's pick is read (`launch` then
`result`), and the graph reads the token from device memory. The host writes only where it must:
`feed(pos, tokens)` (once per prompt: the prompt's ids, the first position the device may fill, and
the position, when the device's differs). Logits stay on the device unless asked (`logits()`).

Under Numba's CUDA simulator the same launches run one by one.

`launch() -> int`: enqueue one step at the loop's position (returns it); `result(p) -> (id, logit)`:
waits for step `p` and reads its pick; `logits()`: the last finished step's logits on the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwdshim.codegen import argmax as argmax_kernels
from fwdshim.codegen import embed
from fwdshim.codegen.kernel import Kernel
from fwdshim.codegen.launch import CACHE_LEN
from fwdshim.codegen.runtime import allocations

EVENTS = 4
"""Steps that may be in flight (each has an event the host waits on)."""


def embedding_table(wd: Any) -> tuple[str, dict[str, np.ndarray]]:
    """(table kind, parts) of an embedding `WeightData` for `embed.step_inputs`: Q8_0 as its quants
    and scales (row-major, `weights.repack_q8_0`), F16 as is, anything else dequantized to F32."""
    from fwdshim.weights import repack_q8_0

    ggml = wd.ggml.value
    if ggml == "q8_0":
        qs, d = repack_q8_0(np.asarray(wd.raw))
        return "q8_0", {"eq": qs.reshape(-1), "ed": d.reshape(-1)}
    if ggml == "f16":
        return "f16", {"e": np.asarray(wd.raw, dtype=np.float16).reshape(-1)}
    return "f32", {"e": np.ascontiguousarray(wd.f32, dtype=np.float32).reshape(-1)}


def loop_bytes(embedding: Any, positions: int, angle_width: int) -> int:
    """The device bytes a `DeviceLoop` allocates beside its runtime, counted before anything is
    allocated (`CompiledForward(extra_bytes=)`): the embedding table as `embedding_table` lays it
    out (Q8_0: int8 quants and a float32 scale per 32; F16: 2 bytes a value; else 4), the angle table
    (`positions` rows of `angle_width` float32) and the token ids; the argmax's partials (a few KiB)
    left out."""
    vocab, d = embedding.shape
    ggml = embedding.ggml.value
    per_row = d + d // 32 * 4 if ggml == "q8_0" else d * (2 if ggml == "f16" else 4)
    return vocab * per_row + positions * angle_width * 4 + (positions + 2) * 4


class DeviceLoop:
    """A decode step whose inputs and greedy pick are made on the device (module docstring)."""

    def __init__(self, runtime: Any, embedding: Any, angle_table: np.ndarray) -> None:
        """A CUDA out-of-memory error while allocating or capturing is `runtime.DeviceMemoryError`
        (one line: the step's need, the device's free and total memory)."""
        with allocations(lambda: runtime.memory):
            self._setup(runtime, embedding, angle_table)

    def _setup(self, runtime: Any, embedding: Any, angle_table: np.ndarray) -> None:
        from numba import cuda

        self.rt = runtime
        self.cuda = cuda
        plan = runtime.plan
        if len(plan.inputs) < 2 or not plan.outputs:
            raise ValueError(f"@{plan.function} has no (x, angles) inputs or no logits output")
        self.x_name, self.angles_name = plan.inputs[0], plan.inputs[1]
        x = runtime.arrays[(self.x_name, "")]
        ang = runtime.arrays[(self.angles_name, "")]
        self.logits_dev = runtime._outputs()[0].reshape(-1)
        cap = runtime.capacity()
        if cap is None:
            raise ValueError(f"@{plan.function} has no attention cache: no positions to loop over")
        self.positions = cap + 1
        vocab, d = embedding.shape
        if d != x.size:
            raise ValueError(f"the embedding rows hold {d} values, the step's {self.x_name} {x.size}")
        table = np.ascontiguousarray(angle_table, dtype=np.float32).reshape(self.positions, -1)
        if table.shape[1] != ang.size:
            raise ValueError(f"angle rows of {table.shape[1]}, the step's {self.angles_name} holds {ang.size}")
        kind, parts = embedding_table(embedding)
        self.vocab = vocab
        self.embed_k = embed.step_inputs(d, vocab, kind, self.positions, ang.size, tuning=runtime.tuning)
        self.argmax_k = argmax_kernels.argmax(self.logits_dev.size, self.positions, tuning=runtime.tuning)
        dev = cuda.to_device
        self.ids = dev(np.zeros(self.positions + 1, np.int32))
        self.given = dev(np.zeros(1, np.int32))
        self.out_id = cuda.mapped_array(self.positions + 1, np.int32)
        self.out_val = cuda.mapped_array(self.positions + 1, np.float32)
        self.out_id[:] = -1
        pos = runtime.arrays[(CACHE_LEN, "")]
        embed_args = {"ids": self.ids, "pos": pos, "angle_table": dev(table.reshape(-1)), "x": x, "angles": ang}
        embed_args.update({k: dev(v) for k, v in parts.items()})
        grid = self.argmax_k.grid[0]
        argmax_args = {
            "logits": self.logits_dev, "pos": pos, "ids": self.ids, "given": self.given,
            "out_id": self.out_id, "out_val": self.out_val, "part_v": dev(np.zeros(grid, np.float32)),
            "part_i": dev(np.zeros(grid, np.int32)), "count": dev(np.zeros(1, np.int32)),
        }  # fmt: skip
        self._embed_args = tuple(embed_args[p.name] for p in self.embed_k.params)
        self._argmax_args = tuple(argmax_args[p.name] for p in self.argmax_k.params)
        self._stage = cuda.pinned_array(self.positions + 2, np.int32)
        """Host staging of `feed`: `[given, ids...]`, rewritten only after a sync."""
        self.pos = 0
        """The position of the next step launched."""
        self._device_pos: int | None = None
        """The position the device's `%cache_len` holds (None: unknown)."""
        self._events: dict[int, Any] = {}
        self._free_events: list[Any] = []
        self.graph = None
        self.kernel_count = runtime.plan.kernel_count + 2
        if not runtime.simulated:
            self._capture()

    # -----------------------------------------------------------------------------------------

    def _launch_extra(self, k: Kernel, args: tuple, stream: Any) -> None:
        if self.rt.simulated:
            k.fn[k.grid, k.block](*args)
        else:
            k.launch_on(stream, *args)

    def _launch_all(self, stream: Any) -> None:
        self._launch_extra(self.embed_k, self._embed_args, stream)
        self.rt._launch_all(stream)
        self._launch_extra(self.argmax_k, self._argmax_args, stream)

    def _capture(self) -> None:
        from fwdshim.codegen import runtime as rtmod

        rt = self.rt
        for k in (self.embed_k, self.argmax_k, *rt.plan.kernels()):
            k.compile()
        rt.set_cache_len(0)
        self._launch_all(rt.stream)  # loads every module before the capture
        rt.sync()
        gb = rt.device.create_graph_builder()
        gb.begin_building()
        self._launch_all(gb)
        handle = rtmod._capture_graph(gb)
        gb.end_building()
        count = _kernel_nodes(gb, handle)
        if count is not None and count != self.kernel_count:
            raise RuntimeError(f"the captured loop graph holds {count} kernel nodes, expected {self.kernel_count}")
        self.graph = gb.complete()
        self.graph.upload(rt.stream)
        self._device_pos = None
        self.out_id[:] = -1

    # -----------------------------------------------------------------------------------------

    def feed(self, pos: int, tokens: list[int] | tuple[int, ...] = ()) -> None:
        """Set the next step's position to `pos` and the tokens of positions `pos, pos+1, ...` (a
        prompt: the device fills positions from `pos + len(tokens)` on with its picks). Waits for the
        steps in flight."""
        n = len(tokens)
        if not 0 <= pos or pos + n > self.positions:
            raise ValueError(f"tokens at positions {pos}..{pos + n - 1} outside 0..{self.positions - 1}")
        if any(not 0 <= t < self.vocab for t in tokens):
            raise ValueError(f"a token id outside the vocabulary of {self.vocab}")
        self.sync()
        self._stage[0] = pos + n
        self._stage[1 : 1 + n] = tokens
        s = self.rt.stream
        self.given.copy_to_device(self._stage[:1], stream=s)
        if n:
            self.ids[pos : pos + n].copy_to_device(self._stage[1 : 1 + n], stream=s)
        if self._device_pos != pos:
            self.rt.set_cache_len(pos)
        self.rt._last_len = None
        self.pos = self._device_pos = pos
        self.sync()

    def forget_position(self) -> None:
        """The device's position is no longer known (another writer set `%cache_len`): the next
        `launch` writes it."""
        self.sync()
        self._device_pos = None

    def launch(self) -> int:
        """Enqueue one step at the loop's position; returns that position."""
        p = self.pos
        if p >= self.positions:
            raise ValueError(f"the context of {self.positions} position{'s' if self.positions != 1 else ''} is full")
        if self._device_pos != p:
            self.rt.set_cache_len(p)
        if self.graph is None:
            self._launch_all(self.rt.stream)
        else:
            self.graph.launch(self.rt.stream)
            ev = self._free_events.pop() if self._free_events else None
            self._events[p] = self.rt.stream.record(ev)
        self.pos = p + 1
        self._device_pos = min(p + 1, self.positions)
        return p

    def result(self, p: int) -> tuple[int, float]:
        """The greedy pick after step `p` (launched before) and its logit; waits for that step."""
        ev = self._events.pop(p, None)
        if ev is not None:
            ev.sync()
            if len(self._free_events) < EVENTS:
                self._free_events.append(ev)
        elif self.graph is not None:
            self.sync()
        return int(self.out_id[p + 1]), float(self.out_val[p + 1])

    def logits(self) -> np.ndarray:
        """The logits of the last step launched, on the host (waits for it)."""
        self.sync()
        return np.asarray(self.logits_dev.copy_to_host(), dtype=np.float32)

    def sync(self) -> None:
        self.rt.sync()
        for ev in self._events.values():
            if len(self._free_events) < EVENTS:
                self._free_events.append(ev)
        self._events.clear()


def _kernel_nodes(gb: Any, handle: Any) -> int | None:
    definition = getattr(gb, "graph_definition", None)
    if definition is not None:
        return sum(1 for n in definition.nodes() if type(n).__name__ == "KernelNode")
    if handle is not None:
        from fwdshim.codegen.runtime import _driver_kernel_nodes

        return _driver_kernel_nodes(handle)
    return None
