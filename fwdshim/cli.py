"""`fwdshim`: the main job — import a GGUF model, fetch one, run one.

    fwdshim run --model smollm2 --prompt "The capital of France is" --max-tokens 16
    fwdshim import MODEL.gguf -o step.mlir [--requantize q8_0|none] [--context N]
    fwdshim fetch-model smollm2

`run` imports the model (requantizing what the kernels do not compute into a cached sidecar GGUF),
compiles its decode step once through `forward-shim{numerics}`, and decodes greedily: on the GPU as a
CUDA graph when one is present, else with the NumPy reference executor. It prints the prompt and the
generated text on stdout, then the tokens/s on stderr.

A user error (a missing, truncated or non-GGUF file, an unsupported model, a refused step) prints one
line `fwdshim: error: ...` naming the file and exits 1, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_CONTEXT = 4096
REQUANTIZE = ("q8_0", "none")
NUMERICS = ("dequant", "int8-act", "two-pass-int8")
DEVICES = ("auto", "gpu", "cpu")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fwdshim", description="The forward shim's main job: run a GGUF llama model."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    imp = sub.add_parser("import", help="write the decode-step IR of a GGUF model")
    imp.add_argument("model", metavar="MODEL.gguf", help="a GGUF file of architecture llama (dense or MoE)")
    imp.add_argument("-o", "--output", metavar="STEP.mlir", help="where to write the IR (default: stdout)")
    imp.add_argument("--requantize", choices=REQUANTIZE, default="q8_0",
                     help="requantize weights the kernels do not compute to Q8_0 (default), or keep them "
                     "(the legality pass then refuses their matmuls)")  # fmt: skip
    imp.add_argument("--context", type=int, default=DEFAULT_CONTEXT, metavar="N",
                     help="the attention's context capacity l (default 4096; at most 12256 fits the kernel)")  # fmt: skip

    fetch = sub.add_parser("fetch-model", help="download a known model into the cache and print its path")
    fetch.add_argument("name", help="smollm2 (SmolLM2-135M-Instruct, Q4_1)")

    run = sub.add_parser("run", help="generate text with a model, greedily")
    run.add_argument("--model", required=True, metavar="NAME|PATH.gguf", help="smollm2, or a GGUF llama file")
    run.add_argument("--prompt", required=True, metavar="TEXT")
    run.add_argument(
        "--max-tokens", type=int, default=32, metavar="N", help="tokens to generate (default 32)"
    )
    run.add_argument("--numerics", choices=NUMERICS, default="dequant")
    run.add_argument("--device", choices=DEVICES, default="auto", help="auto: the GPU when present")
    run.add_argument("--context", type=int, default=DEFAULT_CONTEXT, metavar="N",
                     help="context capacity (default 4096; at most 12256)")  # fmt: skip
    run.add_argument("--requantize", choices=REQUANTIZE, default="q8_0")
    run.add_argument(
        "--logits-out", metavar="FILE.npy", help="save each generated step's logits, [n, vocab] float32"
    )
    run.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `fwdshim`. Returns the exit status (0 ok, 1 a user error, 2 a usage error)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from fwdshim.importer import ModelError
    from fwdshim.runner import RunError

    try:
        return {"import": _import, "fetch-model": _fetch, "run": _run}[args.command](args)
    except (ModelError, RunError) as e:
        lines = str(e).strip().splitlines() or ["failed"]
        print(f"fwdshim: error: {lines[0]}", file=sys.stderr)
        for line in lines[1:]:
            print(f"  {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fwdshim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def _import(args) -> int:
    from fwdshim.importer import import_gguf

    out = Path(args.output) if args.output else None
    sidecar = out.with_suffix(".weights.gguf") if out is not None else None
    model = import_gguf(
        args.model, requantize=args.requantize, context=args.context, sidecar=sidecar,
        source_name=str(out) if out is not None else "<stdout>", progress=sys.stderr.isatty(),
    )  # fmt: skip
    if out is None:
        sys.stdout.write(model.text)
    else:
        out.write_text(model.text)
    p = model.params
    note = f"; {len(model.converted)} tensors converted into {model.gguf_path}" if model.converted else ""
    where = f"wrote {out}" if out is not None else "imported"
    print(f"fwdshim: {where}: {p.n_layer} layers, context {args.context}{note}", file=sys.stderr)
    return 0


def _fetch(args) -> int:
    from fwdshim.models import fetch_model

    print(fetch_model(args.name))
    return 0


def _run(args) -> int:
    import numpy as np

    from fwdshim.importer import import_gguf
    from fwdshim.models import models_dir, resolve_model
    from fwdshim.runner import Decoder, RunError, generate
    from fwdshim.tokenizer import GGUFTokenizer

    if args.max_tokens < 1:
        raise RunError(f"--max-tokens {args.max_tokens}: ask for at least one token")
    path = resolve_model(args.model)
    step_file = models_dir() / f"{path.stem}.{args.requantize}.ctx{args.context}.decode_step.mlir"
    model = import_gguf(path, requantize=args.requantize, context=args.context, source_name=str(step_file),
                        progress=sys.stderr.isatty())  # fmt: skip
    step_file.parent.mkdir(parents=True, exist_ok=True)
    step_file.write_text(model.text)  # so that a refusal's file:line:col can be opened
    tok = GGUFTokenizer(model.reader, model.gguf_path)
    prompt = tok.chat(args.prompt) if args.chat else args.prompt
    ids = tok.encode(prompt)
    decoder = Decoder(model, args.numerics, args.device)
    if len(ids) >= model.context:
        raise RunError(
            f"the prompt has {len(ids)} tokens, the context holds {model.context} (raise --context)"
        )
    if not args.chat:
        sys.stdout.write(args.prompt)
        sys.stdout.flush()
    stream = _Stream(tok)
    gen = generate(decoder, ids, args.max_tokens, stop_ids=tok.stop_ids, on_token=stream.add)
    stream.finish()
    if args.logits_out:
        np.save(args.logits_out, np.stack(gen.logits).astype(np.float32))
    p = model.params
    print(
        f"fwdshim: {len(gen.tokens)} tokens, {gen.tokens_per_s:.1f} tokens/s "
        f"({decoder.device}, {args.numerics}; {p.n_layer} layers, d {p.d}, {decoder.stages} stages); "
        f"prompt {len(ids)} tokens in {gen.prefill_s:.2f} s; stopped: {gen.stopped}",
        file=sys.stderr,
    )
    return 0


class _Stream:
    """Prints generated text as it comes, holding back an incomplete UTF-8 sequence."""

    def __init__(self, tok):
        self.tok = tok
        self.ids: list[int] = []
        self.shown = 0

    def add(self, token: int) -> None:
        self.ids.append(token)
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):
            return
        sys.stdout.write(text[self.shown :])
        sys.stdout.flush()
        self.shown = len(text)

    def finish(self) -> None:
        text = self.tok.decode(self.ids)
        sys.stdout.write(text[self.shown :] + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
