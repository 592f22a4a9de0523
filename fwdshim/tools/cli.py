"""`fwdshim`: the main job — import a GGUF model, fetch one, run one.

    fwdshim run --model smollm2 --prompt "The capital of France is" --max-tokens 16
    fwdshim import MODEL.gguf -o step.mlir [--requantize none|q8_0] [--context N]
    fwdshim fetch-model smollm2 [--force]
    fwdshim profile --model smollm2 [--numerics N] [--context N] [--fill F] [-o P.json] [--png P.png]

`run` imports the model as the file stores it (its own weight types, read by the kernels; with
`--requantize q8_0`, every other type requantized to Q8_0 into a cached sidecar GGUF),
compiles its decode step once through `forward-shim{numerics}`, and decodes greedily: on the GPU as a
CUDA graph when one is present, else with the NumPy reference executor. It prints the prompt and the
generated text on stdout, then the tokens/s on stderr. `profile` times every launch of the compiled
step on the GPU (`fwdshim.tools.profile`): a table sorted by time on stdout, JSON and a PNG bar chart.

A user error (a bad command line, a missing, truncated or non-GGUF file, an unsupported model, a
refused step, an output that cannot be written) prints one line `fwdshim: error: ...` naming the
file or the argument and exits 1, without a traceback; Ctrl-C prints `fwdshim: interrupted` and exits
130, SIGTERM `fwdshim: terminated` and exits 143 (both after removing the temporary files). Anything else is a bug: one line `fwdshim: internal error: ...` (`FWDSHIM_TRACEBACK=1` shows
the traceback), exit 1. `fwdshim` without a command prints its help on stderr and exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from fwdshim.classes import NUMERICS
from fwdshim.files import why_not_written
from fwdshim.limits import DEFAULT_CONTEXT, MAX_CONTEXT
from fwdshim.text import printable
from fwdshim.tools import (
    EPIPE_STATUS,
    TERMINATED_STATUS,
    Terminated,
    names_directory,
    package_version,
    probe_write,
    quiet_stdout,
    store_once,
    terminated_raises,
    write_whole,
)

REQUANTIZE = ("none", "q8_0")
DEVICES = ("auto", "gpu", "cpu")

_EPILOG = """\
examples:
  fwdshim run --model smollm2 --prompt "The capital of France is" --max-tokens 16
  fwdshim run --model smollm2 --prompt "What is 2+2?" --chat --device cpu
  fwdshim import model.gguf -o step.mlir && fwdshim-opt step.mlir -p forward-shim --explain
  fwdshim fetch-model smollm2

`fwdshim COMMAND --help` explains each command's options. Models and converted weights are
cached under $FWDSHIM_CACHE (default ~/.cache/fwdshim); deleting that directory is always safe."""

_CONTEXT_HELP = (
    f"the attention's context capacity: prompt plus generated tokens (default: {DEFAULT_CONTEXT}, "
    f"or the model's own context length, or the sliding window of a model windowed in every layer, when "
    f"shorter; 2 to {MAX_CONTEXT}, the most whose score "
    "row fits the kernel's 48 KiB of shared memory)"
)
def _requantize_help(default: str) -> str:
    none, q8 = ("none (default)", "q8_0") if default == "none" else ("none", "q8_0 (default)")
    return (
        f"{none}: run the weights as the file stores them (the kernels read F32, F16, Q4_0, Q4_1, Q5_0, "
        "Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and BF16; the legality pass refuses a matmul of any other "
        f"type, naming the type and the op's line); {q8}: requantize every weight but F32, F16, Q8_0 and "
        "BF16 to Q8_0 in a cached sidecar GGUF (a second rounding: the model's answers may change)"
    )


_REQUANTIZE_HELP = _requantize_help("none")


class UsageError(Exception):
    """A bad command line: argparse's own errors and the range checks of `main`."""


class _Parser(argparse.ArgumentParser):
    """argparse with one error line and exit status 1 (not the usage and status 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (`{self.prog} --help` lists the options)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fwdshim",
        description="The forward shim's main job: import, fetch and run GGUF llama (dense or MoE), qwen2, qwen3, qwen3moe and phi3 models (gemma, gemma2 and gemma3 import; the legality pass refuses their steps).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fwdshim {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    imp = sub.add_parser(
        "import", help="write the decode-step IR of a GGUF model",
        description="Write one decode step of a GGUF llama, qwen2, qwen3, qwen3moe, phi3, gemma, gemma2 or gemma3 model as `fwd` IR (for fwdshim-opt). "
        "Weights keep their types unless --requantize q8_0; converted weights (requantized ones, "
        "norms widened to F32) go into STEP.weights.gguf beside the output (-o step.mlir writes "
        "step.weights.gguf; --weights chooses another file; into the cache when writing to stdout). "
        "When nothing is converted no such file is written: the IR's `// weights:` line names the "
        "model's own file, and no weight's values are read (a weight holding an inf or NaN is refused "
        "when `run` or a conversion reads it).",
    )  # fmt: skip
    imp.add_argument("model", metavar="MODEL",
                     help="a GGUF file of architecture llama, qwen2, qwen3, qwen3moe, phi3, gemma, gemma2 or gemma3, or a known model name (smollm2, gemma3-270m)")  # fmt: skip
    imp.add_argument("-o", "--output", metavar="STEP.mlir", help="where to write the IR (default, and `-`: stdout)")
    imp.add_argument("--weights", metavar="PATH.gguf",
                     help="where to write the converted weights (default: STEP.weights.gguf beside -o, "
                     "else the cache); the IR's header comment (`// weights: PATH`) names it")  # fmt: skip
    imp.add_argument("--requantize", choices=REQUANTIZE, default="none", help=_REQUANTIZE_HELP)
    imp.add_argument("--context", type=int, metavar="N", help=_CONTEXT_HELP)

    fetch = sub.add_parser(
        "fetch-model", help="download a known model into the cache and print its path",
        description="Download a known model into the cache (once) and print the path of its .gguf. A cached "
        "copy whose size or SHA-256 is not the model's (an interrupted or damaged one) is fetched again.",
    )  # fmt: skip
    fetch.add_argument("name", help="smollm2 (SmolLM2-135M-Instruct, Q4_1, ~100 MB)")
    fetch.add_argument("--force", action="store_true", help="fetch it again even when a sound copy is cached")

    run = sub.add_parser(
        "run", help="generate text with a model, greedily",
        description="Generate text greedily: the prompt goes to stdout (not with --chat), then the "
        "generated text as it comes; a summary line (tokens/s, why it stopped) goes to stderr.",
    )  # fmt: skip
    run.add_argument("--model", required=True, metavar="NAME|PATH.gguf",
                     help="smollm2 (fetched on first use), or a GGUF llama, qwen2, qwen3, qwen3moe or phi3 file")  # fmt: skip
    run.add_argument("--prompt", required=True, metavar="TEXT",
                     help="the text to continue (UTF-8; with --chat, the user's message)")  # fmt: skip
    run.add_argument("--max-tokens", type=int, default=32, metavar="N",
                     help="the most tokens to generate (default 32); it stops earlier at an end-of-turn "
                     "token or a full context")  # fmt: skip
    run.add_argument("--numerics", choices=NUMERICS, default="dequant",
                     help="dequant (default): f32 activations times dequantized weights; int8-act: the "
                     "activation a block-quantized projection (Q8_0, Q4_x, Q5_x, K-quants) reads is quantized to int8 blocks of 32 in its "
                     "producer's epilogue, for int32 block dot products; two-pass-int8: the same in a "
                     "separate quantize stage, keeping d and d*sum(q) per block (as ggml's q8_1)")
    run.add_argument("--device", choices=DEVICES, default="auto",
                     help="gpu: a CUDA graph; cpu: the NumPy reference executor (slow: SmolLM2 decoded "
                     "9.9 tokens/s on the CPU of an H200 host, bench/RESULTS.md); auto (default): "
                     "the GPU when present")  # fmt: skip
    run.add_argument("--context", type=int, metavar="N", help=_CONTEXT_HELP)
    run.add_argument("--requantize", choices=REQUANTIZE, default="none", help=_REQUANTIZE_HELP)
    run.add_argument("--logits-out", metavar="FILE.npy",
                     help="save each generated token's logits there, float32 [n, vocab] (under the "
                     "exact name given)")  # fmt: skip
    run.add_argument("--chat", action="store_true",
                     help="wrap the prompt in the model's own chat template (one user turn)")  # fmt: skip
    run.add_argument("-q", "--quiet", action="store_true",
                     help="no status line per phase (import, compile, convert, prefill) and no progress "
                     "bars on a terminal's stderr; the text and the summary line stay")  # fmt: skip

    prof = sub.add_parser(
        "profile", help="time every launch of a model's compiled step on the GPU",
        description="Compile the model's decode step for the GPU and time every launch of it, each "
        "distinct kernel in a graph of its own over copies of its weights past the L2, the caches "
        "filled to --fill rows: prints a table sorted by time (bytes, GB/s, share of the read "
        "ceiling, share of the step, the time of a bare read of as many bytes in one launch and the "
        "kernel's speed as a share of it; each kernel's registers, blocks an SM and what limits them, and "
        "its grid in waves of those blocks), writes it as JSON and draws the kernel families as a PNG bar "
        "chart (needs matplotlib: pip install fwdshim[profile]).",
    )  # fmt: skip
    prof.add_argument("--model", required=True, metavar="NAME|PATH.gguf",
                      help="smollm2 (fetched on first use), or a GGUF llama, qwen2, qwen3, qwen3moe or phi3 file")  # fmt: skip
    prof.add_argument("--numerics", choices=NUMERICS, default="dequant", help="as for run (default dequant)")
    prof.add_argument("--context", type=int, metavar="N", help=_CONTEXT_HELP)
    prof.add_argument("--fill", type=int, default=0, metavar="F",
                      help="the cache rows each attention reads (default 0; at most the context less one)")  # fmt: skip
    prof.add_argument("--requantize", choices=REQUANTIZE, default="none", help=_REQUANTIZE_HELP)  # as run: the step run runs
    prof.add_argument("-o", "--output", metavar="PROFILE.json",
                      help="where to write the JSON (default: MODEL.NUMERICS.fillF.profile.json here)")  # fmt: skip
    prof.add_argument("--png", metavar="PROFILE.png", help="where to draw the chart (default: beside the JSON)")
    prof.add_argument("--reps", type=int, default=20, metavar="N", help="graph replays per timing (default 20)")
    store_once(parser)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`argv` parsed, an unrecognized option named before a missing required one (argparse checks the
    required ones first: `run --modle smollm2 --prompt hi` said `--model` is required), with the
    command's closest option suggested (`--modle` -> `--model`)."""
    parsers = [parser, *_commands(parser).values()]
    shown = any(a in ("-h", "--help") for a in argv)  # the help's usage marks the required ones
    required = [] if shown else [a for p in parsers for a in p._actions if a.required]
    for action in required:
        action.required = False
    try:
        args, extra = parser.parse_known_args(argv)
    finally:
        for action in required:
            action.required = True
    if extra:  # argparse's top-level parser names itself; the options are the command's
        where = f"fwdshim {args.command}" if args.command else "fwdshim"
        command = _commands(parser).get(args.command, parser)
        hint = _closest_option(command, extra)
        raise UsageError(f"unrecognized arguments: {' '.join(extra)} ({hint}`{where} --help` lists the options)")
    return parser.parse_args(argv)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser of each command of `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _closest_option(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """`did you mean --model? ` for the first unrecognized `--option` that is close to one of
    `parser`'s, else ''."""
    import difflib

    options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for arg in extra:
        if arg.startswith("--"):
            close = difflib.get_close_matches(arg.split("=", 1)[0], options, n=1, cutoff=0.75)
            if close:
                return f"did you mean {close[0]}? "
    return ""


def _check_cache() -> None:
    """`$FWDSHIM_CACHE` (or its default) is a directory, or can be made one: else a UsageError naming it."""
    from fwdshim.frontend.cache import cache_dir

    root = cache_dir()
    where = f"FWDSHIM_CACHE={root}" if os.environ.get("FWDSHIM_CACHE") else f"the cache {root}"
    if root.exists() and not root.is_dir():
        raise UsageError(f"{where}: not a directory")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{where}: cannot make the directory ({e.strerror or e})") from None


def main(argv: list[str] | None = None) -> int:
    """Entry point of `fwdshim`. Returns the exit status (0 ok, 1 an error, 2 no command, 130 interrupted
    by Ctrl-C, 143 by SIGTERM)."""
    import warnings

    warnings.formatwarning = lambda message, *_args, **_kw: f"fwdshim: warning: {message}\n"
    out = _Output()
    with terminated_raises():
        return _main(argv, out)


def _main(argv: list[str] | None, out: _Output) -> int:
    try:
        parser = _parser()
        args = _parse(parser, sys.argv[1:] if argv is None else argv)
        if args.command is None:  # as a CLI missing its required command: the help, on stderr, status 2
            parser.print_help(sys.stderr)
            return 2
        _check_cache()
        commands = {"import": _import, "fetch-model": _fetch, "run": _run, "profile": _profile}
        return commands[args.command](args, out)
    except UsageError as e:
        out.end_line()
        return _error(str(e), one_line=True)
    except KeyboardInterrupt:
        out.end_line()
        print("fwdshim: interrupted", file=sys.stderr)
        return 130
    except Terminated:  # SIGTERM: Ctrl-C's treatment (the temporary files are gone by now)
        out.end_line()
        print("fwdshim: terminated", file=sys.stderr)
        return TERMINATED_STATUS
    except BrokenPipeError:  # `fwdshim ... | head`: stop quietly, and keep Python's exit flush quiet too
        quiet_stdout()
        return EPIPE_STATUS  # as fwdshim-opt: Python's own status on EPIPE, no error line
    except Exception as e:
        from fwdshim.codegen.kernel_cache import KernelCacheError
        from fwdshim.frontend.gguf_model import ModelError
        from fwdshim.tools.runner import RunError

        if isinstance(e, (ModelError, KernelCacheError)):
            out.end_line()
            return _error(str(e), one_line=True)
        if isinstance(e, RunError):  # the legality's errors, one a line: an argument's line breaks escaped
            out.end_line()
            return _error(_escape_arguments(str(e), sys.argv[1:] if argv is None else argv))
        if os.environ.get("FWDSHIM_TRACEBACK"):
            raise
        out.end_line()
        first = (str(e).strip().splitlines() or [""])[0]
        print(
            f"fwdshim: internal error: {type(e).__name__}: {first} "
            "(a bug in fwdshim: please report it; FWDSHIM_TRACEBACK=1 shows where)",
            file=sys.stderr,
        )
        return 1


def _error(message: str, one_line: bool = False) -> int:
    """Print `message` as `fwdshim: error: ...` and return 1. `one_line`: a usage or model error, one
    line whatever it holds (a file name, key or tensor name with a line break is printed escaped: it
    was split over two lines); else each line of the message (the legality's errors) on its own."""
    lines = [message.strip()] if one_line else message.strip().split("\n") or ["failed"]
    print(f"fwdshim: error: {printable(lines[0])}", file=sys.stderr)
    for line in lines[1:]:
        print(f"  {printable(line)}", file=sys.stderr)
    return 1


def _escape_arguments(message: str, argv: list[str]) -> str:
    """`message` with every command-line argument that holds a line break (a model's file name) and
    its path spelling written escaped, so that splitting the message at its line breaks splits only
    the lines it is made of."""
    for arg in argv:
        if arg.isprintable():
            continue
        for text in dict.fromkeys((arg, str(Path(arg)), os.path.abspath(arg))):
            message = message.replace(text, printable(text))
    return message


class _Output:
    """stdout, remembering whether its last line is unfinished (so that an error starts on its own).

    A reader that leaves (`| head`) raises BrokenPipeError from `write`, which ends the command quietly
    (`main`) — unless `keep_going` (a file still to write, `run --logits-out`): then the rest of the
    output is dropped, `closed` is set, and the command finishes its files."""

    def __init__(self) -> None:
        self.open_line = False
        self.keep_going = False
        self.closed = False

    def write(self, text: str) -> None:
        if text and not self.closed:
            self.open_line = not text.endswith("\n")  # first: a Ctrl-C may land just after the flush
            try:
                sys.stdout.write(text)
                sys.stdout.flush()
            except BrokenPipeError:
                if not self.keep_going:
                    raise
                self.closed, self.open_line = True, False
                quiet_stdout()

    def end_line(self) -> None:
        if self.open_line:
            self.write("\n")


# ---------------------------------------------------------------------------------------------
# checks of the command line, before any work


def _check_context(context: int | None) -> None:
    if context is not None and not 2 <= context <= MAX_CONTEXT:
        raise UsageError(
            f"--context {context}: the context holds 2 to {MAX_CONTEXT} positions (the attention keeps "
            f"a score row of one float per position in 48 KiB of shared memory)"
        )


def _path_arg(value: str | None, option: str) -> Path | None:
    """The path an option gives (None when not given). Raises: UsageError for an empty one, and for
    one ending in a separator (`out/` names a directory; `Path` drops the separator, and a file named
    `out` was written)."""
    if value is None:
        return None
    if not value:
        raise UsageError(f"{option}: an empty path (give a file name)")
    if names_directory(value):
        if os.path.isdir(value):
            raise UsageError(f"{option} {value}: is a directory (give a file name)")
        raise UsageError(f"{option} {value}: names a directory (it ends in {value[-1]!r}; give a file name)")
    return Path(value)


def _is_stdout(value: str, path: Path) -> bool:
    """`-o -`, or a path that is this process's standard output (`/dev/stdout`, `/proc/self/fd/1`)."""
    if value == "-" or str(path) in ("/dev/stdout", "/proc/self/fd/1", "/dev/fd/1"):
        return True
    if os.path.isfile(path):  # a regular file stdout also goes to is written as a file
        return False
    try:
        a, b = os.stat(path), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no such path, or a stdout without a descriptor
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _special(path: Path) -> bool:
    """An existing file that is not a regular file (a device such as /dev/null, a FIFO, a socket)."""
    return path.exists() and not path.is_dir() and not path.is_file()


def _check_writable(path: Path, option: str, model: Path | None = None, regular: bool = False) -> Path:
    """`path` can be written: not empty, not a directory, not the model, in a writable directory.
    Returns the path to write: a symbolic link's target (the link stays a link). `regular`: the file
    must be a regular one (the step's IR and its weights, which the IR names); else a device or FIFO
    (`/dev/null`) is written in place.

    Raises: UsageError naming `option`."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory (give a file name)")
    target = Path(os.path.realpath(path))
    if model is not None and target.exists() and model.exists() and target.samefile(model):
        raise UsageError(f"{option} {path}: is the model itself (give another file name)")
    if model is not None and any(target == _converted(model, mode) for mode in REQUANTIZE if mode != "none"):
        raise UsageError(f"{option} {path}: is the model's converted weights in fwdshim's cache (give another file name)")
    if _special(target):
        if regular:
            raise UsageError(f"{option} {path}: not a regular file (give a file name)")
        if not os.access(target, os.W_OK):
            raise UsageError(f"{option} {path}: not writable (permission denied)")
        return target
    parent = target.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: no such directory {path.parent}")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {path}: not writable (permission denied)")
    try:
        probe_write(target)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    return target


def _converted(model: Path, mode: str) -> Path | None:
    """Where fwdshim's cache keeps `model` converted to `mode` (resolved), or None."""
    from fwdshim.frontend.cache import sidecar_path

    try:
        return Path(os.path.realpath(sidecar_path(model, mode)))
    except (OSError, ValueError):
        return None


def _is_gguf(path: Path) -> bool:
    """`path` is an existing file that starts with GGUF's magic."""
    try:
        with path.open("rb") as f:
            return path.is_file() and f.read(4) == b"GGUF"
    except OSError:
        return False


def _not_converted_weights(path: Path) -> bool:
    """`path` holds something other than weights fwdshim converted: a non-empty file that is not a
    GGUF with fwdshim's `fwdshim.converted` or `fwdshim.source` key (a model, an IR, anything else)."""
    from fwdshim.frontend.gguf_model import CONVERTED_KEY, SOURCE_KEY, ModelError, field_value, open_gguf

    if not path.is_file() or path.stat().st_size == 0:
        return False
    try:
        reader = open_gguf(path)
    except ModelError:
        return True
    return field_value(reader, CONVERTED_KEY) is None and field_value(reader, SOURCE_KEY) is None


def _write_file(path: Path, option: str, write) -> None:
    """`write(f)` into a temporary file beside `path` (a symbolic link's target), then move it there;
    a device or FIFO (`/dev/null`) is written in place.

    Raises: UsageError naming `option` when the file cannot be written."""
    target = Path(os.path.realpath(path))
    if _special(target):
        try:
            with target.open("wb") as f:
                write(f)
        except OSError as e:
            raise UsageError(f"{option} {path}: cannot write the file ({e.strerror or e})") from None
        return
    try:
        write_whole(target, write)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot write the file ({why_not_written(e, target)})") from None


def _plural(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _context_room(model) -> str:
    """How far --context goes: the model's own length, and the kernels' limit past it."""
    own = model.params.context_length
    if own and own < MAX_CONTEXT:
        return f"the model's own length is {own}, the kernels hold at most {MAX_CONTEXT}"
    return f"at most {MAX_CONTEXT}"


def _note_context(args, model) -> None:
    """A warning when `--context` passes the positions the model was trained on, or when the model's
    own length (0 or 1) is no capacity and the step takes the default one."""
    own = model.params.context_length
    arch = model.reader.fields.get("general.architecture")
    key = f"{arch.contents() if arch is not None else 'llama'}.context_length"
    if args.context is None and own < 2 and key in model.reader.fields:
        print(
            f"fwdshim: warning: the model's `{key}` is {own}, fewer than the 2 positions a decode step "
            f"needs: the step holds {model.context} positions (--context sets it)",
            file=sys.stderr,
        )
    if args.context is not None and own >= 2 and args.context > own:
        print(
            f"fwdshim: warning: --context {args.context} is past the model's own context length {own} "
            f"(`{key}`): positions after {own} are beyond what it was trained on",
            file=sys.stderr,
        )


# ---------------------------------------------------------------------------------------------
# the commands


def _import(args, out: _Output) -> int:
    from fwdshim.frontend.cache import damaged_cache_hint, resolve_model
    from fwdshim.frontend.importer import import_gguf

    _check_context(args.context)
    path = resolve_model(args.model)
    dest = _path_arg(args.output, "-o")
    if dest is not None and _is_stdout(args.output, dest):
        dest = None  # the IR to standard output, its converted weights into the cache (as without -o)
    sidecar = dest.with_suffix(".weights.gguf") if dest is not None else None
    if dest is not None:
        _check_writable(dest, "-o", path, regular=True)
        if _is_gguf(Path(os.path.realpath(dest))):
            raise UsageError(f"-o {dest}: is a GGUF file (a model or converted weights); the IR is text: give it another name")
        if dest.suffix.lower() == ".gguf":  # a text file named as a model: a later `run --model` would take it for one
            raise UsageError(f"-o {dest}: the IR is text (MLIR), not a GGUF file: name it .mlir (converted weights "
                             f"go beside it as .weights.gguf, or where --weights says)")  # fmt: skip
    if args.weights is not None:
        if _is_stdout(args.weights, Path(args.weights)):
            raise UsageError(f"--weights {args.weights}: the converted weights are a GGUF file the IR names (give a file name)")
        sidecar = _check_writable(_path_arg(args.weights, "--weights"), "--weights", path, regular=True)
        if dest is not None and sidecar.resolve() == dest.resolve():
            raise UsageError(f"--weights {sidecar}: the same file as -o {dest}")
    elif sidecar is not None and sidecar.exists() and path.exists() and sidecar.samefile(path):
        raise UsageError(f"-o {dest}: its converted weights {sidecar} would overwrite the model")
    if sidecar is not None and _not_converted_weights(Path(os.path.realpath(sidecar))):
        option = f"--weights {args.weights}" if args.weights is not None else f"-o {dest}: its converted weights {sidecar}"
        raise UsageError(f"{option}: the file exists and is not weights fwdshim converted (remove it, or give "
                         "another name with --weights)")  # fmt: skip
    model = _import_model(import_gguf, damaged_cache_hint, args, path, dest, sidecar)
    _note_context(args, model)
    if args.weights is not None and not model.converted:
        print(f"fwdshim: note: no tensor needed converting: --weights {args.weights} was not written; "
              f"the IR reads {model.gguf_path}", file=sys.stderr)  # fmt: skip
    if dest is None:
        out.write(model.text)
    else:
        _write_file(dest, "-o", lambda f: f.write(model.text.encode()))
    p = model.params
    note = f"; {_plural(len(model.converted), 'tensor')} converted into {model.gguf_path}" if model.converted else ""
    where = f"wrote {dest}" if dest is not None else "imported"
    print(printable(f"fwdshim: {where}: {_plural(p.n_layer, 'layer')}, context {model.context}{note}"), file=sys.stderr)
    return 0


def _import_model(import_gguf, hint, args, path: Path, dest: Path | None, sidecar: Path | None):
    from fwdshim.frontend.gguf_model import ModelError

    try:
        return import_gguf(
            path, requantize=args.requantize, context=args.context, sidecar=sidecar,
            source_name=str(dest) if dest is not None else "<stdout>", progress=sys.stderr.isatty(),
        )  # fmt: skip
    except ModelError as e:  # the hint is for the cached model file failing to open, not for a failed write
        about_model = str(e).startswith((f"{path}:", f"{path.resolve()}:"))
        raise ModelError(f"{e}{hint(args.model) if about_model else ''}") from None


def _window_hint(model) -> str:
    """For a model windowed in every layer run at a context longer than its window (refused: the
    kernels attend every cached position), the context that runs it."""
    p = model.params
    if not p.window or p.windowed is not None or model.context <= p.window:
        return ""
    if p.window < 2:
        return f"\n(the model attends a sliding window of {p.window} position: no context of 2 or more runs it)"
    return f"\n(the model attends a sliding window of {p.window} positions: --context {p.window} or less runs it)"


def _keep_refused_step(message: str, step_file: Path, text: str) -> str:
    """A refusal's `message`, its `file:line:col` in `step_file`: the step's IR is written there (only
    for a refused run: a run that compiles writes no step file), and a last line says why it is kept."""
    if str(step_file) not in message:
        return message
    step_file.parent.mkdir(parents=True, exist_ok=True)
    _write_file(step_file, "the step file", lambda f: f.write(text.encode()))
    return f"{message}\n(the step's IR is kept in {step_file} for these locations; deleting it is safe)"


def _fetch(args, out: _Output) -> int:
    from fwdshim.frontend.cache import MODELS, fetch_model

    if not args.name.strip():
        raise UsageError(f"fetch-model {args.name!r}: give a known model's name ({', '.join(sorted(MODELS))})")
    if args.name not in MODELS and (args.name.endswith(".gguf") or os.path.sep in args.name or Path(args.name).exists()):
        raise UsageError(f"{args.name}: fetch-model downloads a known model ({', '.join(sorted(MODELS))}); "
                         "a .gguf file needs no fetching: give it to run or import as it is")  # fmt: skip
    out.write(f"{fetch_model(args.name, force=args.force)}\n")
    return 0


def _run(args, out: _Output) -> int:
    import hashlib

    from fwdshim.frontend.cache import damaged_cache_hint, models_dir, resolve_model
    from fwdshim.frontend.gguf_model import ModelError
    from fwdshim.frontend.importer import import_gguf
    from fwdshim.frontend.tokenizer import GGUFTokenizer
    from fwdshim.tools.runner import Decoder, RunError, generate, gpu_available

    if args.max_tokens < 1:
        raise UsageError(f"--max-tokens {args.max_tokens}: ask for at least one token")
    _check_context(args.context)
    if not args.prompt:
        raise UsageError("--prompt is empty: give the text to continue")
    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 reach argv as lone surrogates
        raise UsageError("--prompt: not UTF-8 text") from None
    if args.device == "gpu" and not gpu_available():  # before the import: nothing it does would help
        raise UsageError("--device gpu: no CUDA GPU (or no fwdshim GPU runtime) here; use --device cpu")
    logits_out = _path_arg(args.logits_out, "--logits-out")
    if logits_out is not None:
        if _is_stdout(args.logits_out, logits_out):
            raise UsageError(f"--logits-out {args.logits_out}: the generated text goes to standard output (give a file name)")
        _check_writable(logits_out, "--logits-out")
    path = resolve_model(args.model)
    if logits_out is not None:
        _check_writable(logits_out, "--logits-out", path)  # not the model itself
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]  # one step file per model file
    ctx = args.context or "default"
    stem = printable(path.stem)  # its name heads the legality's error lines: no line break in it
    step_file = models_dir() / f"{stem}.{key}.{args.requantize}.ctx{ctx}.decode_step.mlir"
    status = _Status(args.quiet or not _stderr_is_terminal())
    t = time.perf_counter()
    model = _import_model(import_gguf, damaged_cache_hint, args, path, step_file, None)
    p = model.params
    converted = f", {_plural(len(model.converted), 'tensor')} converted" if model.converted else ""
    status.line("import", f"{path.name}: {_plural(p.n_layer, 'layer')}, context {model.context}{converted}", t)
    _note_context(args, model)
    tok = GGUFTokenizer(model.reader, model.gguf_path)
    for line in tok.warnings:
        print(f"fwdshim: warning: {printable(line)}", file=sys.stderr)
    try:
        prompt = tok.chat(args.prompt) if args.chat else args.prompt
    except ModelError as e:  # the template's fault, said by the tokenizer; the way round it is a flag
        raise ModelError(f"{e}; run without --chat") from None
    ids = tok.encode(prompt)
    if not ids:
        raise UsageError("--prompt: the text has no tokens")
    if len(ids) > model.context:  # a prompt of exactly the context still yields one token
        raise UsageError(
            f"--prompt: its {len(ids)} tokens{' (the chat template with it)' if args.chat else ''} do not fit the context of {model.context} positions "
            f"(raise --context: {_context_room(model)})"
        )
    from fwdshim.codegen.kernel_cache import CACHE_STATS

    t = time.perf_counter()
    before = dict(CACHE_STATS)
    try:
        decoder = Decoder(model, args.numerics, args.device)
    except RunError as e:
        raise RunError(_keep_refused_step(str(e), step_file, model.text) + _window_hint(model)) from None
    hits, written = (CACHE_STATS[k] - before[k] for k in ("hits", "written"))
    kernels = f"; kernel cache: {hits} hits, {written} written" if hits + written else ""
    status.line("compile", f"{decoder.stages} stages, forward-shim{{numerics={args.numerics}}}, "
                f"{decoder.device}{kernels}", t)  # fmt: skip
    if decoder.device == "cpu":
        names = decoder.forward.weights_to_convert()
        t = time.perf_counter()
        with status.bar(len(names), "convert") as bar:
            for name in names:
                decoder.forward.convert([name])
                bar.update()
        status.line("convert", f"{_plural(len(names), 'weight matrix', 'weight matrices')} dequantized "
                    "for the CPU executor", t)  # fmt: skip
    bar = status.bar(len(ids), "prefill")
    stream = _Stream(tok, out)

    prompt_out = False

    def show_prompt() -> None:  # after the prefill's line, so that no status line splits the text
        nonlocal prompt_out
        if not prompt_out:
            prompt_out = True
            bar.close()
            status.line("prefill", _plural(len(ids), "prompt token"), start)
            if not args.chat:
                out.write(args.prompt)

    done = 0

    def on_prompt_token(_: int) -> None:
        nonlocal done
        done += 1
        bar.update()
        if done == len(ids):  # the prefill is over: its line, then the prompt and the text
            show_prompt()

    start = time.perf_counter()
    out.keep_going = logits_out is not None  # the logits are written whole though stdout's reader left
    gen = generate(decoder, ids, args.max_tokens, stop_ids=tok.stop_ids, on_token=stream.add,
                   logits=logits_out is not None, on_prompt_token=on_prompt_token)  # fmt: skip
    stream.finish()
    if logits_out is not None:
        import numpy as np

        logits = np.stack(gen.logits).astype(np.float32)
        _write_file(logits_out, "--logits-out", lambda f: np.save(f, logits))
    p = model.params
    if gen.stopped == "context full":
        why = f"context full: {model.context} positions, raise --context"
    else:
        why = gen.stopped
    # the first token comes with the prompt: a rate needs a second one
    rate = f"{gen.tokens_per_s:.1f} tokens/s" if len(gen.tokens) > 1 else "no decode rate: the first token comes with the prompt"
    print(
        f"fwdshim: {_plural(len(gen.tokens), 'token')}, {rate} "
        f"({decoder.device}, {args.numerics}; {_plural(p.n_layer, 'layer')}, d {p.d}, {decoder.stages} stages); "
        f"prompt {_plural(len(ids), 'token')} in {gen.prefill_s:.2f} s; stopped: {why}",
        file=sys.stderr,
    )
    return EPIPE_STATUS if out.closed else 0


def _profile(args, out: _Output) -> int:
    from fwdshim.frontend.cache import damaged_cache_hint, resolve_model
    from fwdshim.frontend.importer import import_gguf
    from fwdshim.tools.runner import gpu_available

    _check_context(args.context)
    if args.fill < 0:
        raise UsageError(f"--fill {args.fill}: give a fill of 0 or more (cache rows)")
    if args.reps < 1:
        raise UsageError(f"--reps {args.reps}: give at least one replay")
    if args.context is not None and args.fill > args.context - 1:  # the model's own context: once it is read
        raise UsageError(f"--fill {args.fill}: the caches hold at most {args.context - 1} rows (the context less one)")
    path = resolve_model(args.model)
    stem = f"{path.stem}.{args.numerics}.fill{args.fill}.profile"
    json_out = _path_arg(args.output, "-o") or Path(f"{stem}.json")
    png_out = _path_arg(args.png, "--png") or json_out.with_suffix(".png")
    json_target = _check_writable(json_out, "-o", path)
    png_target = _check_writable(png_out, "--png", path)
    if os.path.realpath(json_target) == os.path.realpath(png_target) and not _special(Path(json_target)):
        if args.png is None:
            raise UsageError(f"-o {json_out}: the chart's default file (the JSON's name, ending .png) is the JSON"
                             " itself: name the JSON .json, or give --png")  # fmt: skip
        raise UsageError(f"--png {png_out}: is -o's file too (give the chart and the JSON each a file)")
    if not gpu_available():  # first: without a GPU, installing matplotlib would not help
        raise UsageError("fwdshim profile times the step on a CUDA GPU, and none is here")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("fwdshim profile draws its chart with matplotlib: pip install 'fwdshim[profile]'") from None
    model = _import_model(import_gguf, damaged_cache_hint, args, path, None, None)
    _note_context(args, model)
    if args.fill > model.context - 1:
        raise UsageError(f"--fill {args.fill}: the caches hold at most {model.context - 1} rows (the context less one)")
    from fwdshim.tools.profile import profile_model

    prof = profile_model(model, args.numerics, args.fill, args.reps, name=path.name)
    out.write(prof.table())
    _write_file(json_out, "-o", lambda f: f.write(prof.to_json().encode()))
    prof.plot(png_out)
    print(f"fwdshim: wrote {json_out} and {png_out}", file=sys.stderr)
    return 0


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class _Status:
    """One line per phase on stderr (`fwdshim: PHASE: what (N.NN s)`), and a progress bar for a
    phase that takes over a second: on a terminal (a log or a pipe gets the summary line only), and
    nothing under `-q`."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def line(self, phase: str, what: str, since: float | None, seconds: float | None = None) -> None:
        if self.quiet:
            return
        if seconds is None:
            seconds = time.perf_counter() - since if since is not None else 0.0
        print(printable(f"fwdshim: {phase}: {what} ({seconds:.2f} s)"), file=sys.stderr, flush=True)

    def bar(self, total: int, phase: str):
        from tqdm import tqdm

        return tqdm(total=total, desc=f"fwdshim: {phase}", delay=1.0, leave=False, file=sys.stderr,
                    disable=self.quiet)  # fmt: skip


class _Stream:
    """Prints generated text as it comes, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tok, out: _Output):
        self.tok = tok
        self.out = out
        self.ids: list[int] = []
        self.shown = 0

    def add(self, token: int) -> None:
        self.ids.append(token)
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):
            return
        self.out.write(text[self.shown :])
        self.shown = len(text)

    def finish(self) -> None:
        text = self.tok.decode(self.ids)
        self.out.write(text[self.shown :] + "\n")


if __name__ == "__main__":
    sys.exit(main())
