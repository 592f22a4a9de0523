"""GGUF import, the whole of it: `import_gguf(path)` -> an `ImportedModel` (the step's IR and its weights).

The file is read and checked by `gguf_model` (`read_params`, `check_tensors`), converted into a
sidecar GGUF where tensors need it (`export.write_converted`, cached by `cache`), and the step is
built from it (`step_ir.step_text`, `parse_step`); `gguf_model`'s docstring describes the step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import gguf
from gguf import GGMLQuantizationType as QT
from xdsl.dialects.builtin import ModuleOp, StringAttr

from fwdshim.files import why_not_written
from fwdshim.frontend.cache import sidecar_path, source_stamp, sweep_cache
from fwdshim.frontend.export import NotStorable, write_converted
from fwdshim.frontend.gguf_model import (
    CONVERTED_KEY, REQUANTIZE_MODES, SOURCE_KEY, LlamaParams, ModelError, ModelWeights,
    argument_text, check_file, check_layout, check_tensors, choice_error, conversions, field_value,
    integer_error, open_gguf, path_argument, read_params,
)  # fmt: skip
from fwdshim.frontend.step_ir import describe, parse_step, step_text
from fwdshim.limits import DEFAULT_CONTEXT, MAX_CONTEXT


def _cached_sidecar(path: Path, requantize: str):
    """`(reader, params, uses, sidecar)` of the cached sidecar of `path`, when one exists, was
    converted from `path` as it is now and holds nothing left to convert; None otherwise (then `path`
    itself is read, and the sidecar written again: a stale, truncated or damaged one is replaced)."""
    side = sidecar_path(path, requantize)
    if not side.is_file():
        return None
    try:
        reader = open_gguf(side)
        if field_value(reader, SOURCE_KEY) != source_stamp(path):
            return None
        params = read_params(reader, side)
        uses = check_tensors(reader, params, side)
        if conversions(reader, uses, requantize, side):
            return None
    except ModelError:
        return None
    return reader, params, uses, side


def _read_or_convert(path: Path, requantize: str, sidecar: str | Path | None, progress: bool):
    """`(reader, params, uses, weights_path)` of `path`, or of the sidecar it is converted into."""
    reader = open_gguf(path)
    params = read_params(reader, path)
    uses = check_tensors(reader, params, path)
    todo = conversions(reader, uses, requantize, path)
    if not todo:
        return reader, params, uses, path
    out = Path(sidecar) if sidecar is not None else sidecar_path(path, requantize)
    if sidecar is None:
        sweep_cache()  # what killed writers left there
    try:
        write_converted(reader, todo, out, progress=progress, source=source_stamp(path))
    except NotStorable as e:
        raise ModelError(f"{path}: {e}") from None
    except OSError as e:  # an unwritable or full disk: say which and where, and how to move the cache
        hint = "" if sidecar is not None else "; FWDSHIM_CACHE names another cache directory"
        raise ModelError(f"{out}: cannot write the converted weights ({why_not_written(e, out)}){hint}") from None
    reader = open_gguf(out)
    uses = check_tensors(reader, params, out)
    left = conversions(reader, uses, requantize, out)
    if left:
        raise ModelError(f"{out}: the converted file still holds `{next(iter(left))}` unconverted")
    return reader, params, uses, out


def _checked_sidecar(sidecar: Path, path: Path) -> Path:
    """Where to write the converted weights the caller named: the file a symbolic link names (the link
    stays a link), checked before any work as `fwdshim import --weights` checks it. A device such as
    `/dev/null` was replaced by a regular file (as root), and an unrelated file or another model was
    overwritten without a word.

    Raises: ModelError naming `sidecar=` for a directory, a file that is not a regular one, the model
    itself, an existing file that is not weights fwdshim converted, or a missing directory."""
    target = Path(os.path.realpath(sidecar))
    where = f"sidecar={str(sidecar)!r}"
    if target.is_dir():
        raise ModelError(f"{where}: is a directory (give the path of a file to write converted weights to)")
    if path.exists() and target.exists() and target.samefile(path):
        raise ModelError(f"{path}: the sidecar for converted weights is the model itself (give another path)")
    if target.exists() and not target.is_file():
        raise ModelError(f"{where}: not a regular file (converted weights are a GGUF file the step reads)")
    if not target.parent.is_dir():
        raise ModelError(f"{where}: no such directory {target.parent}")
    if target.is_file() and target.stat().st_size and not _fwdshim_weights(target):
        raise ModelError(
            f"{where}: the file exists and is not weights fwdshim converted (remove it, or give another path)"
        )
    return target if os.path.islink(sidecar) else Path(sidecar)


def _fwdshim_weights(path: Path) -> bool:
    """`path` is a GGUF file fwdshim wrote (it holds `fwdshim.converted` or `fwdshim.source`)."""
    try:
        reader = open_gguf(path)
    except ModelError:
        return False
    return field_value(reader, CONVERTED_KEY) is not None or field_value(reader, SOURCE_KEY) is not None


@dataclass
class ImportedModel:
    """A model ready to run: `module` (with `@decode_step`), `text` (its IR as written), `params`,
    `weights` (a WeightStore), `gguf_path` (the file the weights are read from: the sidecar when one
    was written), `source_path` (the file imported) and `converted` (tensor name -> new GGML type)."""

    module: ModuleOp
    text: str
    params: LlamaParams
    weights: ModelWeights
    reader: gguf.GGUFReader
    gguf_path: Path
    source_path: Path
    converted: dict[str, QT]
    context: int

    def decode_step(self):
        """The `func.func @decode_step` of `module`."""
        return next(
            op for op in self.module.ops if getattr(op, "sym_name", None) == StringAttr("decode_step")
        )


def import_gguf(
    path: str | Path,
    *,
    requantize: str = "none",
    context: int | None = DEFAULT_CONTEXT,
    sidecar: str | Path | None = None,
    source_name: str | None = None,
    progress: bool = False,
) -> ImportedModel:
    """Import a GGUF `llama` model (see the module docstring). `path`: the `.gguf` file, or a known
    model name (`frontend.cache.MODELS`, e.g. `"smollm2"`: fetched into the cache on first use, as
    `fwdshim import smollm2` does).

    `requantize`: `"none"` (the default, as `fwdshim import`, `run` and `profile`'s: weights as the file
    stores them) or `"q8_0"` (every weight but F32, F16, BF16 and Q8_0 requantized to Q8_0).
    `context`: the attention's capacity `l` (None: `DEFAULT_CONTEXT`, or the model's own
    `llama.context_length` when that is shorter, or its sliding window when every layer has one and
    it is shorter still). `sidecar`: where to write the converted GGUF when
    tensors need converting (default: the model cache, keyed on the file; reused when present).
    `source_name`: the file name the step's ops are located in (default `<file>.decode_step.mlir`).
    Raises: ModelError (a `path` or `sidecar` that is no path or an empty one, an unknown
    `requantize`, a `context` that is not a whole number in 2..`limits.MAX_CONTEXT`, a `sidecar` that
    is a directory, a device, the model itself, an existing file that is not weights fwdshim
    converted or in a missing directory, a malformed or unsupported file)."""
    from fwdshim.frontend.cache import MODELS, fetch_model, no_such_model

    named = isinstance(path, str)  # a str may be a model's name; a Path is a file's
    if named and path in MODELS:
        path = fetch_model(path, quiet=not progress)
    known = ", ".join(f'"{name}"' for name in MODELS)
    path = path_argument("path", path, f"a GGUF file's path (a str or os.PathLike) or a known model's name ({known})")
    if named and not path.exists():
        raise no_such_model(path)
    if sidecar is not None:
        given = sidecar
        sidecar = path_argument("sidecar", sidecar, "the path (a str or os.PathLike) to write converted weights to, or None")
        if os.fspath(given).endswith(tuple(s for s in (os.sep, os.altsep) if s)):  # as `tools.names_directory`:
            # `Path` drops the separator, and `dir/` was written as a file named `dir`
            raise ModelError(
                f"sidecar={os.fspath(given)!r}: names a directory (it ends in a separator; give the path of a file to write converted weights to)"
            )
    if source_name is not None and not isinstance(source_name, str):
        raise ModelError(f"source_name={argument_text(source_name)}: a file name (a str) to locate the step's ops in, or None")
    # the arguments' own faults name the parameter, not the file: they do not depend on it
    if not isinstance(requantize, str) or requantize not in REQUANTIZE_MODES:
        raise ModelError(choice_error("requantize", requantize, REQUANTIZE_MODES))
    if context is not None:
        if (why := integer_error("context", context, f"a whole number of positions, 2 to {MAX_CONTEXT}, or None")):
            raise ModelError(why)
        context = int(context)
        if context < 2:
            raise ModelError(f"context={context}: at least 2 positions (a context of {context} holds no cached row)")
        if context > MAX_CONTEXT:
            raise ModelError(f"context={context}: the attention holds at most {MAX_CONTEXT} positions")
    if sidecar is not None:
        sidecar = _checked_sidecar(sidecar, path)
    check_layout(check_file(path))  # a cached sidecar does not vouch for its source (older code wrote it)
    cached = _cached_sidecar(path, requantize) if sidecar is None else None
    if cached is None:
        reader, params, uses, weights_path = _read_or_convert(path, requantize, sidecar, progress)
    else:
        reader, params, uses, weights_path = cached
    if context is None:
        own = params.context_length
        context = min(DEFAULT_CONTEXT, own) if own >= 2 else DEFAULT_CONTEXT
        if params.window >= 2 and params.windowed is None:  # every layer windowed (Phi-3): a context
            context = min(context, params.window)  # within the window is the plain attention the kernels run
    types = {t.name: QT(t.tensor_type) for t in reader.tensors}
    converted = {n: types[n] for n in field_value(reader, CONVERTED_KEY, []) if n in types}
    text = describe(params, path, weights_path, converted, context) + step_text(params, uses, types, context)
    name = source_name or f"{path.name}.decode_step.mlir"
    module = parse_step(text, name)
    module.attributes["fwd.gguf"] = StringAttr(str(weights_path))
    return ImportedModel(
        module, text, params, ModelWeights(reader, params, path), reader, weights_path, path, converted, context
    )
