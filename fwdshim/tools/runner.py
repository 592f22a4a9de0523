"""The decode loop of `fwdshim run`: one compiled step per model, run once per token, greedy.

`Decoder(model, numerics, device)` runs the `forward-shim{numerics}` pipeline once on the imported
step (`ImportedModel`), then per token (`step(token)`):

1. the token's embedding row (`token_embd.weight` row `token`, dequantized alone) and the position's
   rope angles (`reference.rope_angles`) are the step's inputs `x`, `angles`;
2. each layer's attention reads the rows cached so far (the first `pos` rows of its caches);
3. the step returns the logits, and each layer's new `k`, `v` rows land in row `pos` of its caches
   (the CPU backend appends the step's results; on the GPU the graph's last kernel does).

Backends: `cpu` runs the legalized step with the NumPy reference executor (`reference.execute`;
weights dequantized once and kept by the store; BLAS held to `$FWDSHIM_CPU_THREADS` threads, default 1); `gpu` runs it as a CUDA graph through the runtime
of `fwdshim.codegen.runtime` — as a device-resident loop (`codegen.loop.DeviceLoop`): the token id,
its embedding row, the angles and the greedy pick all on the device; `auto` takes the GPU when one
is present.

`generate(decoder, prompt_ids, max_tokens, logits=True)` feeds the prompt, then picks the most
likely token (`argmax`, ties to the lower id, NaN first) until `max_tokens`, a stop token or a full
context; it returns a `Generation` with the tokens, each step's logits (with `logits`) and the
timings. On the GPU with `logits=False` step t+1 is enqueued before t's pick is read back (one id
and its logit a step; the logits never leave the device).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import Func, FuncOp
from xdsl.utils.exceptions import DiagnosticException

from fwdshim.classes import NUMERICS
from fwdshim.codegen.tuning import Tuning
from fwdshim.diagnostics import with_source_lines
from fwdshim.dialects import fwd
from fwdshim.frontend.gguf_model import LlamaParams, argument_text, choice_error, integer_error, is_integer
from fwdshim.frontend.importer import ImportedModel
from fwdshim.tools.tuning_env import tuning_from_env

DEVICES = ("auto", "gpu", "cpu")


class RunError(Exception):
    """A model fwdshim cannot run as asked; `str(e)` is the message (the legality errors, one per line)."""


def compile_step(model: ImportedModel, numerics: str = "dequant") -> ModuleOp:
    """A copy of the model's step module through `forward-shim{numerics}` (quantize, fuse, legalize).

    Raises: RunError with the pass's diagnostics (e.g. a refused op at its location, then its line
    of the step's IR and a caret, as `fwdshim-opt` prints it), or for a `model` that is not an
    ImportedModel or an unknown `numerics`."""
    _check_model(model)
    if not isinstance(numerics, str) or numerics not in NUMERICS:
        raise RunError(choice_error("numerics", numerics, NUMERICS))
    from fwdshim.dialects.fwd import Fwd
    from fwdshim.passes.pipeline import ForwardShimPass

    ctx = Context()
    ctx.load_dialect(Func)
    ctx.load_dialect(Fwd)
    module = model.module.clone()
    try:
        ForwardShimPass(numerics=numerics).apply(ctx, module)
    except DiagnosticException as e:
        raise RunError(with_source_lines(_summarize(str(e), numerics), _step_line(model.text))) from None
    return module


def _step_line(text: str) -> Callable[[str, int], str | None]:
    """The line of the step's IR `text` a location names (every op of `model.module` is located in
    the one file `text` was parsed as, whatever its name)."""
    lines = text.split("\n")
    return lambda _file, line: lines[line - 1] if 1 <= line <= len(lines) else None


def _check_model(model) -> None:
    """RunError unless `model` is an ImportedModel (a path or a ModuleOp was an AttributeError)."""
    if not isinstance(model, ImportedModel):
        raise RunError(
            f"model={argument_text(model)}: an ImportedModel (import_gguf's result)"
        )


def _summarize(message: str, numerics: str, keep: int = 3) -> str:
    """The pass's errors, the first `keep` of them and a count of the rest."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    if len(lines) <= keep + 1:
        return "\n".join(lines)
    where = lines[0].split(":", 1)[0]
    rest = f"... and {len(lines) - keep} more (`fwdshim-opt {where} -p 'fwd-legalize{{numerics={numerics} mode=mark}}' --explain` lists every stage)"
    return "\n".join([*lines[:keep], rest])


def _func(module: ModuleOp) -> FuncOp:
    return next(op for op in module.walk() if isinstance(op, FuncOp) and op.sym_name.data == "decode_step")



def _cpu_threads() -> int:
    """`$FWDSHIM_CPU_THREADS` (default 1): BLAS threads of the CPU executor; RunError unless a whole
    number >= 1."""
    text = os.environ.get("FWDSHIM_CPU_THREADS", "1").strip()
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_CPU_THREADS:
        raise RunError(f"FWDSHIM_CPU_THREADS={text!r}: expected a whole number of threads, 1 to {MAX_CPU_THREADS}")
    return int(text)


MAX_CPU_THREADS = 1024
"""The most BLAS threads `$FWDSHIM_CPU_THREADS` may ask for."""


class CpuForward:
    """The compiled step on the NumPy reference executor, holding its KV caches on the host.

    `step(x, angles, pos) -> logits`: runs the step with each attention reading the first `pos` rows
    of its caches, then appends the step's `k`, `v` rows at `pos`."""

    name = "cpu"

    def __init__(self, module: ModuleOp, model: ImportedModel, threads: int | None = None):
        from threadpoolctl import ThreadpoolController

        p = model.params
        self.func = _func(module)
        self.weights = model.weights
        self.threads = threads if threads is not None else _cpu_threads()
        self._blas = ThreadpoolController()
        self.rows, width = model.context - 1, p.kv * p.hd
        self.k_cache = [np.zeros((self.rows, width), np.float32) for _ in range(p.n_layer)]
        self.v_cache = [np.zeros((self.rows, width), np.float32) for _ in range(p.n_layer)]

    def weights_to_convert(self) -> list[str]:
        """The weight matrices the executor reads dequantized (`float64`, once per weight)."""
        from fwdshim.dialects.attributes import WeightsType

        names = []
        for op in self.func.walk():
            if isinstance(op, fwd.WeightOp) and isinstance(op.result.type, WeightsType):
                if len(op.result.type.dims) == 2:  # an expert stack is dequantized per expert
                    names.append(op.tensor_name.data)
        return list(dict.fromkeys(names))

    def convert(self, names: Iterable[str]) -> None:
        """Dequantize `names` now (else the first step does: a silent wait counted as the prompt's)."""
        for name in names:
            self.weights.get(name).f64

    def step(self, x: np.ndarray, angles: np.ndarray, pos: int) -> np.ndarray:
        from fwdshim.reference import execute

        inputs: list[np.ndarray] = [x, angles]
        for kc, vc in zip(self.k_cache, self.v_cache):
            inputs += [kc[:pos], vc[:pos]]
        # a GEMV per projection is memory-bound: BLAS threads only contend (8x slower on 2 busy cores)
        with self._blas.limit(limits=self.threads, user_api="blas"):
            out = execute(self.func, inputs, self.weights)
        if pos < self.rows:
            for cache, row in zip(self.k_cache, out[1::2]):
                cache[pos] = np.asarray(row).reshape(-1)
            for cache, row in zip(self.v_cache, out[2::2]):
                cache[pos] = np.asarray(row).reshape(-1)
        return np.asarray(out[0], dtype=np.float32).reshape(-1)


class GpuForward:
    """The compiled step as CUDA graphs (`fwdshim.codegen.runtime.CompiledForward`), its KV caches
    on the device.

    The decode loop (`loop`, a `codegen.loop.DeviceLoop`, its own graph): the token id is read from
    device memory, the embedding row gathered and dequantized and the position's rope angles taken
    from a table on the device, the greedy pick made there (written to a mapped host slot and to the
    next position's id), and the position advanced — a step uploads nothing, so `generate` enqueues
    step t+1 before it reads t's pick. `token_step(token, pos) -> logits` runs one such step and
    copies its logits back.

    `step(x, angles, pos) -> logits`, the step on host inputs: one upload of `x`, `angles` and the
    cache length (the runtime's packed step buffers), one launch of the runtime's own graph — whose
    last kernel, `kv_append`, writes the step's `k`, `v` rows into row `pos` of every cache (a runtime
    without it gets a host-side append, and no device loop) — and one copy of the logits into a
    page-locked host array; returns a fresh array. `timings` holds the seconds spent per part of the
    last such step (`inputs`: the upload, `launch`, `logits`: the wait for the graph and the copy
    back) when `profile` is set. Under Numba's CUDA simulator the launches run one by one."""

    name = "gpu"

    def __init__(self, module: ModuleOp, model: ImportedModel, profile: bool = False, tuning: Tuning | None = None):
        """RunError, before anything is allocated, for a step (with the device loop's tables) that
        needs more device memory than is free; and for an allocation the device refuses."""
        from fwdshim.codegen.runtime import DeviceMemoryError, allocations

        try:  # an out-of-memory error once the runtime exists (the logits' page-locked copy) says its need
            with allocations(lambda: getattr(getattr(self, "runtime", None), "memory", None)):
                self._setup(module, model, tuning_from_env() if tuning is None else tuning)
        except DeviceMemoryError as e:
            raise RunError(f"{model.gguf_path}: {e}") from None
        self.profile = profile
        self.timings: dict[str, float] = {}

    def _setup(self, module: ModuleOp, model: ImportedModel, tuning: Tuning) -> None:
        from fwdshim.codegen.loop import DeviceLoop, loop_bytes
        from fwdshim.codegen.runtime import CompiledForward

        from numba import cuda

        embedding = model.weights.get("token_embd.weight")
        extra = loop_bytes(embedding, model.context, angles_of(model.params, 0).size)
        self.runtime = CompiledForward(_func(module), model.weights, extra_bytes=extra, tuning=tuning)
        self.capacity = self.runtime.capacity() or 0
        self._logits_dev = self.runtime._outputs()[0].reshape(-1)
        self._logits = cuda.pinned_array(self._logits_dev.size, dtype=np.float32)  # one DMA back
        self._host_append = not self.runtime.appends_caches
        self.loop: DeviceLoop | None = None
        if not self._host_append:
            table = np.stack([angles_of(model.params, p).reshape(-1) for p in range(self.capacity + 1)])
            self.loop = DeviceLoop(self.runtime, embedding, table)

    def token_step(self, token: int, pos: int) -> np.ndarray:
        """One step of the device loop on `token` at `pos`; its logits (a fresh host array)."""
        assert self.loop is not None
        self.loop.feed(pos, [token])
        self.loop.launch()
        return self.loop.logits()

    def step(self, x: np.ndarray, angles: np.ndarray, pos: int) -> np.ndarray:
        rt = self.runtime
        if self.loop is not None:
            self.loop.forget_position()  # the host writes the cache length here
        t0 = time.perf_counter()
        rt.set_inputs([x, angles], pos)
        t1 = time.perf_counter()
        rt.launch()
        t2 = time.perf_counter()
        if rt.simulated:
            self._logits[:] = self._logits_dev.copy_to_host()
        else:
            self._logits_dev.copy_to_host(self._logits, stream=rt.stream)
            rt.sync()
        if self._host_append and pos < self.capacity:
            rt.append_caches(pos)  # a runtime whose graph does not append (no kv_append)
        if self.profile:
            self.timings = {"inputs": t1 - t0, "launch": t2 - t1, "logits": time.perf_counter() - t2}
        return self._logits.copy()


def angles_of(p: LlamaParams, pos: int) -> np.ndarray:
    """The rope angles of position `pos` (`reference.rope_angles` with the model's rope)."""
    from fwdshim.reference import rope_angles

    return rope_angles(pos, p.half, p.rope_base, hd=p.rope_dim, factors=p.rope_factors)


def gpu_available() -> bool:
    """Whether a CUDA GPU (not the simulator) and fwdshim's GPU runtime are here."""
    import importlib.util

    if (
        os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
        or importlib.util.find_spec("fwdshim.codegen.runtime") is None
    ):
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # no driver, no libraries: no GPU
        return False


@dataclass
class Generation:
    """The result of `generate`: prompt and generated token ids, each generated token's logits
    (`float32 [n, vocab]`: step i's logits chose token i), why it stopped, and timings in seconds."""

    prompt_ids: list[int]
    tokens: list[int] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    stopped: str = "max_tokens"
    prefill_s: float = 0.0
    decode_s: float = 0.0

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second after the prompt (the first token comes with the prompt)."""
        n = len(self.tokens) - 1
        return n / self.decode_s if n > 0 and self.decode_s > 0 else 0.0


class Decoder:
    """One model compiled once, decoding token by token (see the module docstring).

    `device`: `cpu`, `gpu` or `auto` (the GPU when present); `tuning`: the back end's launch choices
    on the GPU (`codegen.tuning.Tuning`; default: the defaults with `FWDSHIM_MERGE` and `FWDSHIM_PDL`
    applied, `tools.tuning_env`). Raises RunError for a refused step, an unknown device, or `gpu`
    without a GPU."""

    def __init__(self, model: ImportedModel, numerics: str = "dequant", device: str = "auto", tuning: Tuning | None = None):
        _check_model(model)
        if not isinstance(device, str) or device not in DEVICES:
            raise RunError(choice_error("device", device, DEVICES))
        if not isinstance(numerics, str) or numerics not in NUMERICS:  # before the GPU's own check
            raise RunError(choice_error("numerics", numerics, NUMERICS))
        if device == "gpu" and not gpu_available():
            raise RunError("device='gpu': no CUDA GPU (or no fwdshim GPU runtime) here; use device='cpu'")
        use_gpu = device == "gpu" or (device == "auto" and gpu_available())
        self.model = model
        self.params: LlamaParams = model.params
        self.numerics = numerics
        self.module = compile_step(model, numerics)
        self.forward: CpuForward | GpuForward = (
            GpuForward(self.module, model, tuning=tuning) if use_gpu else CpuForward(self.module, model)
        )
        self.device = self.forward.name
        self.stages = sum(1 for _ in fwd.stages(_func(self.module)))
        """The compiled step's stages (a fused kernel counts once; a MoE is one stage of three kernels)."""
        self.capacity = model.context
        self._pos = 0
        self._written = 0
        """How many cache rows hold this decoder's history (`pos` may go back to any of them)."""
        self._embd = model.weights.get("token_embd.weight")
        self._rows: dict[int, np.ndarray] = {}
        """Dequantized embedding rows by token id (each dequantized once)."""

    def reset(self) -> None:
        """Forget every cached position (the next step is position 0)."""
        self._pos = self._written = 0

    @property
    def pos(self) -> int:
        """The next step's position: the cache rows its attention reads (0 after `reset`).

        Set it to rewind: any position from 0 to the rows written (a step at position p keeps the rows
        before it and writes row p: the rows after p, computed from the row it replaced, are no longer
        written). Raises RunError for anything else: a step on rows never written would read whatever
        the cache holds and return plausible logits without a word (`assume_filled` does that on
        purpose, for benchmarks)."""
        return self._pos

    @pos.setter
    def pos(self, value: int) -> None:
        takes = f"a position from 0 to {self._written}, the rows this decoder has written (Decoder.reset() starts over)"
        if (why := integer_error("pos", value, takes)):
            raise RunError(why)
        if not 0 <= value <= self._written:
            raise RunError(f"pos={value!r}: {takes}")
        self._pos = int(value)

    def assume_filled(self, rows: int) -> None:
        """For benchmarks: take the first `rows` cache rows as written, holding whatever the cache holds
        (never decoded: the logits of the steps after them mean nothing), and make `rows` the next
        position — to time the attention at a cache fill without decoding that many tokens.

        Raises RunError unless 0 <= `rows` < `capacity` (an integer)."""
        takes = f"a cache fill from 0 to {self.capacity - 1} (the context less one)"
        if (why := integer_error("rows", rows, takes)):
            raise RunError(why)
        if not 0 <= rows < self.capacity:
            raise RunError(f"rows={rows!r}: {takes}")
        self._pos = self._written = int(rows)

    def _advance(self, pos: int) -> None:
        """Position `pos` was stepped: the rows up to it are written, and the next step is `pos + 1`."""
        self._pos = self._written = pos + 1

    @property
    def full(self) -> bool:
        """Whether the context holds `capacity` positions (no further step fits)."""
        return self.pos >= self.capacity

    def angles(self, pos: int) -> np.ndarray:
        return angles_of(self.params, pos)

    def step(self, token: int) -> np.ndarray:
        """Run the step for `token` at the next position; returns its logits (`float32 [vocab]`)."""
        if self.full:
            raise RunError(f"the context of {self.capacity} positions is full (import_gguf(context=...) sets a larger one; Decoder.reset() starts over)")
        _check_token(token, self._embd.shape[0])
        pos = self.pos
        if getattr(self.forward, "loop", None) is not None:
            logits = self.forward.token_step(token, pos)  # type: ignore[union-attr]
        else:
            x = self._rows.get(token)
            if x is None:
                x = self._rows[token] = np.ascontiguousarray(self._embd.rows(token).reshape(-1), dtype=np.float32)
            logits = self.forward.step(x, self.angles(pos), pos)
        self._advance(pos)
        return logits


def generate(
    decoder: Decoder,
    prompt_ids: Iterable[int],
    max_tokens: int,
    *,
    stop_ids: Iterable[int] = (),
    on_token: Callable[[int], None] | None = None,
    logits: bool = True,
    on_prompt_token: Callable[[int], None] | None = None,
) -> Generation:
    """Greedy decoding (see the module docstring), continuing from the decoder's cache: the prompt's
    first token is position `decoder.pos` (what earlier calls left; `decoder.reset()` starts at 0).
    `on_token(id)` is called for each generated
    token that is not a stop token; `logits=False` keeps no logits (on the GPU they then never leave
    the device, and step t+1 is enqueued before t's pick is read). Raises RunError for an empty
    prompt, a full context, a token outside the vocabulary, or logits that are not finite (NaN or
    inf: the text would be noise); every fault of the arguments (`max_tokens` below 1, an id that is
    no integer, outside the vocabulary or past the context, a stop id that is no integer) before any
    step, the cache untouched."""
    prompt = _checked_request(decoder, prompt_ids, max_tokens)
    stop_ids = _checked_ids("stop_ids", stop_ids)
    bad = next((s for s in stop_ids if not is_integer(s)), None)
    if bad is not None:  # a str or float never equals a pick: the run would not stop there, without a word
        raise RunError(f"stop_ids: {bad!r} is not a token id (an integer)")
    for name, fn in (("on_token", on_token), ("on_prompt_token", on_prompt_token)):
        if fn is not None and not callable(fn):
            raise RunError(f"{name}={argument_text(fn)}: a callable taking a token id, or None")
    if getattr(decoder.forward, "loop", None) is not None:
        return _generate_on_device(decoder, prompt, max_tokens, set(stop_ids), on_token, logits, on_prompt_token)
    stops = set(stop_ids)
    gen = Generation(prompt_ids=prompt)
    t0 = time.perf_counter()
    last = None
    for tok in prompt:
        last = decoder.step(tok)
        if on_prompt_token is not None:
            on_prompt_token(tok)
    gen.prefill_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    while len(gen.tokens) < max_tokens:
        assert last is not None
        nxt = int(np.argmax(last))
        _check_finite(decoder, decoder.pos - 1, nxt, float(last[nxt]))
        gen.tokens.append(nxt)
        if logits:
            gen.logits.append(last)
        if nxt in stops:
            gen.stopped = "stop token"
            break
        if on_token is not None:
            on_token(nxt)
        if len(gen.tokens) >= max_tokens:
            break
        if decoder.full:
            gen.stopped = "context full"
            break
        last = decoder.step(nxt)
    gen.decode_s = time.perf_counter() - t1
    return gen


def _check_token(tok, vocab: int) -> None:
    """RunError unless `tok` is an integer token id of a vocabulary of `vocab`."""
    if not is_integer(tok):
        raise RunError(f"token id {tok!r} is not an integer")
    if not 0 <= tok < vocab:
        raise RunError(f"token id {tok} is outside the vocabulary of {vocab}")


def _checked_request(decoder: Decoder, prompt_ids: Iterable[int], max_tokens: int) -> list[int]:
    """The prompt's ids as ints, once `generate`'s arguments are checked: RunError before any step
    (the CPU path stepped the prompt first, so a bad id or an overlong prompt left the cache holding
    the tokens before it, and `max_tokens=0` decoded the prompt to return nothing)."""
    if not isinstance(decoder, Decoder):
        raise RunError(f"decoder={argument_text(decoder)}: a Decoder")
    if (why := integer_error("max_tokens", max_tokens, "a whole number of tokens to generate (an int), at least 1")):
        raise RunError(why)
    if max_tokens < 1:
        raise RunError(f"max_tokens={max_tokens!r}: ask for at least one token")
    prompt = _checked_ids("prompt_ids", prompt_ids, " (GGUFTokenizer.encode gives them)", ordered=True)
    if not prompt:
        raise RunError("the prompt has no tokens")
    vocab = decoder._embd.shape[0]
    for tok in prompt:
        _check_token(tok, vocab)
    if decoder.pos + len(prompt) > decoder.capacity:
        room = "(import_gguf(context=...) sets a larger one; Decoder.reset() starts over)"
        if decoder.full:
            raise RunError(f"the context of {decoder.capacity} positions is full {room}")
        held = f", {decoder.pos} of them held" if decoder.pos else ""
        n = f"{len(prompt)} token{'s' if len(prompt) != 1 else ''}"
        raise RunError(f"the prompt's {n} do not fit the context of {decoder.capacity} positions{held} {room}")
    return [int(tok) for tok in prompt]


def _checked_ids(name: str, ids, hint: str = "", ordered: bool = False) -> list:
    """`ids` as a list, RunError naming `name` unless an iterable that is not a str (a str's
    characters are no ids; an int was "'int' object is not iterable"); `ordered` (a prompt): not a
    set or a mapping either, whose order is not the tokens' (a set's is arbitrary)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise RunError(f"{name}={argument_text(ids)}: an iterable of token ids{hint}")
    if ordered and isinstance(ids, (AbstractSet, Mapping)):
        raise RunError(f"{name}={argument_text(ids)}: the token ids in order, a list or tuple, not a {type(ids).__name__}{hint}")
    return list(ids)


def _check_finite(decoder: Decoder, pos: int, nxt: int, value: float) -> None:
    if not np.isfinite(value):  # argmax finds a NaN or +inf first: one look, not a scan
        raise RunError(
            f"{decoder.model.gguf_path}: the logits at position {pos} are not finite "
            f"(logit {nxt} is {value}): {_nonfinite_cause(decoder.model)}"
        )


def _generate_on_device(
    decoder: Decoder, prompt: list[int], max_tokens: int, stops: set[int],
    on_token: Callable[[int], None] | None, keep: bool,
    on_prompt_token: Callable[[int], None] | None = None,
) -> Generation:  # fmt: skip
    """`generate` through the GPU's device loop: the prompt's ids uploaded once, then one graph
    launch a step; without `keep` the next step is enqueued before this one's pick is read."""
    loop = decoder.forward.loop  # type: ignore[union-attr]
    start = decoder.pos
    gen = Generation(prompt_ids=prompt)
    t0 = time.perf_counter()
    loop.feed(start, prompt)
    for tok in prompt:
        loop.launch()
        if on_prompt_token is not None:
            on_prompt_token(tok)
    p = start + len(prompt) - 1  # the step whose pick comes next
    first = True
    t1 = t0
    while len(gen.tokens) < max_tokens:
        more = len(gen.tokens) + 1 < max_tokens and p + 1 < decoder.capacity
        if more and not keep:
            loop.launch()  # step p+1 reads step p's pick on the device
        nxt, value = loop.result(p)
        if first:
            t1 = time.perf_counter()
            gen.prefill_s = t1 - t0
            first = False
        if keep:
            gen.logits.append(loop.logits())
        decoder._advance(p)
        _check_finite(decoder, p, nxt, value)
        gen.tokens.append(nxt)
        if nxt in stops:
            gen.stopped = "stop token"
            break
        if on_token is not None:
            on_token(nxt)
        if len(gen.tokens) >= max_tokens:
            break
        if p + 1 >= decoder.capacity:
            gen.stopped = "context full"
            break
        if keep:
            loop.launch()
        p += 1
    gen.decode_s = time.perf_counter() - t1
    return gen


def _nonfinite_cause(model: ImportedModel) -> str:
    """Why logits are not finite: the first weight holding NaN or inf, by name (each dequantized
    alone; only on this error path), or an overflow of the step when every weight is finite."""
    from fwdshim.weights import dequantize_raw

    for name in model.weights.names():
        wd = model.weights.get(name)
        with np.errstate(all="ignore"):  # a NaN/inf Q8_0 scale times its quants
            values = np.asarray(dequantize_raw(wd.raw, wd.qtype))
        bad = values[~np.isfinite(values)]
        if bad.size:
            return f"weight `{name}` holds {bad[0]}"
    return "every weight is finite: the step overflowed"
