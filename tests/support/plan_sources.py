"""The plan-stability check's cases and their kernels' source hashes (issue 39: "every kernel's
generated source byte for byte as before").

    python tests/support/plan_sources.py [--write] [--cases REGEX]

A case is a decode step (the `examples/` layers; SmolLM2's step as shipped, Q4_1 matrices and a Q8_0
embedding, and as `--requantize q8_0` makes it; `bench/decode_step.py`'s two random Q8_0 shapes),
a numerics, and a lowering setting; its record maps each kernel of the plan (in first-launch order)
to the SHA-256 of its source, and holds the plan's text's hash. The records are made in the
simulator's mode (`NUMBA_ENABLE_CUDASIM=1`) and in the GPU's (its prelude and alignment; planning
compiles nothing, so no GPU is needed), each in a subprocess of its own: a setting read at import
(`FWDSHIM_PDL`) takes a fresh interpreter. `--write` writes `tests/data/plan_sources.json`; without
it, the script prints every case whose hashes differ from that file and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "plan_sources.json"
NUMERICS = ("dequant", "int8-act", "two-pass-int8")

SHAPES = {
    "smollm2": dict(n_layer=30, d=576, ff=1536, h=9, kv=3, hd=64, rope_dim=64, rope_base=100000.0, eps=9.999999747378752e-06, vocab=49152),
    "llama8b": dict(n_layer=32, d=4096, ff=14336, h=32, kv=8, hd=128, rope_dim=128, rope_base=500000.0, eps=9.999999747378752e-06, vocab=128256),
}  # fmt: skip
"""`bench/decode_step.py`'s shapes (SmolLM2-135M's is also the shipped file's)."""

STEPS = {
    # name: (shape, tied, matrices' type, embedding's type, context)
    "smollm2_shipped": ("smollm2", True, "Q4_1", "Q8_0", 4096),
    "smollm2_q8_0": ("smollm2", True, "Q8_0", "Q8_0", 4096),
    "bench_smollm2": ("smollm2", True, "Q8_0", "Q8_0", 1024),
    "bench_llama8b": ("llama8b", False, "Q8_0", "Q8_0", 1024),
}

MODES = {"sim": "1", "gpu": "0"}
"""`NUMBA_ENABLE_CUDASIM` of each mode."""

SETTINGS = {
    # name: the `Tuning` fields that differ from the default
    "default": {},
    "merge_off": {"merge": False, "prefetch_bytes": 0},
    "pdl_off": {"pdl": "off"},
    "pdl_wait": {"pdl": "wait"},
    "pdl_early": {"pdl": "early"},
    "prefetch_off": {"prefetch_bytes": 0},
    "one_wave_off": {"one_wave_blocks": 0},
    "quantized_prologues_off": {"quantized_prologues": False},
    "pre_wait_prologue_off": {"pre_wait_prologue": False},
    "binary_epilogues_off": {"binary_epilogues": False},
    "rope_epilogues_off": {"rope_epilogues": False},
    "pair_epilogues_off": {"pair_epilogues": False},
    "quant_epilogues_off": {"quant_epilogue_values": 0},
    "pre_wait_off": {"pre_wait": False},
    "pre_wait_loads_off": {"pre_wait_loads": 0},
    "pair_quant_warp": {"pair_quant_block": False},
}

_LEGACY = {
    # before `Tuning` (recorded so): field -> (environment variable | module.constant, value map)
    "merge": ("FWDSHIM_MERGE", {False: "0"}),
    "pdl": ("FWDSHIM_PDL", None),
    "prefetch_bytes": ("prefetch.NEXT_BYTES", None),
    "one_wave_blocks": ("merge.ONE_WAVE", {0: False}),
    "quantized_prologues": ("merge.QUANTIZED_PROLOGUES", None),
    "pre_wait_prologue": ("merge.PRE_WAIT_PROLOGUE", None),
    "binary_epilogues": ("merge.EPILOGUES", None),
    "rope_epilogues": ("merge.ROPE_EPILOGUES", None),
    "pair_epilogues": ("merge.PAIR_EPILOGUES", None),
    "quant_epilogue_values": ("merge.QUANT_EPILOGUES", {0: False}),
    "pre_wait": ("gemv.PRE_WAIT", None),
    "pre_wait_loads": ("gemv.PRE_WAIT_LOADS", None),
    "pair_quant_block": ("gemv.PAIR_QUANT_BLOCK", None),
}


def _legacy_setting(fields: dict) -> tuple[dict, list]:
    """The environment and module constants that made `fields` before `Tuning` existed."""
    env, consts = {}, []
    for f, v in fields.items():
        where, values = _LEGACY[f]
        v = values.get(v, v) if values else v
        if where.isupper():
            env[where] = str(v)
        elif not (f == "prefetch_bytes" and fields.get("merge") is False):  # merging off took prefetch with it
            consts.append((where, v))
    return env, consts


def step_module(name: str):
    """The `@decode_step` module of step `name` (`STEPS`), written by the importer's own IR writer."""
    from gguf import GGMLQuantizationType as QT

    from fwdshim.frontend.gguf_model import NORM, LlamaParams, expected_tensors
    from fwdshim.frontend.step_ir import parse_step, step_text

    shape, tied, mat, emb, context = STEPS[name]
    p = LlamaParams(**SHAPES[shape], context_length=context)
    uses = {n: u for n, u in expected_tensors(p, tied).items() if not u.optional}
    types = {n: QT.F32 if u.role == NORM else QT[mat] for n, u in uses.items()}
    types["token_embd.weight"] = QT[emb]
    return parse_step(step_text(p, uses, types, context), f"{name}.mlir")


def example_module(path: Path):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from fwdshim.diagnostics import LocatingParser
    from fwdshim.dialects.fwd import Fwd

    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    return LocatingParser(ctx, path.read_text(), path.name).parse_module()


def records(pattern: str, setting: str) -> dict[str, dict]:
    """This process's records under `setting` (`SETTINGS`): case -> {kernel name#i: hash}."""
    import importlib.util

    fields = SETTINGS[setting]
    legacy = importlib.util.find_spec("fwdshim.codegen.tuning") is None
    if legacy:
        env, consts = _legacy_setting(fields)
        os.environ.update(env)  # read at import (`FWDSHIM_PDL`) or in `build_plan` (`FWDSHIM_MERGE`)
        for where, v in consts:
            mod, name = where.split(".")
            setattr(importlib.import_module(f"fwdshim.codegen.{mod}"), name, v)
        tuning = None
    else:
        from fwdshim.codegen.tuning import Tuning

        tuning = Tuning(**fields)
    from xdsl.context import Context
    from xdsl.dialects.func import Func

    from fwdshim.codegen.plan import plans_of
    from fwdshim.dialects.fwd import Fwd
    from fwdshim.passes.pipeline import ForwardShimPass

    steps = {f"example_{p.stem}": (lambda p=p: example_module(p)) for p in sorted((ROOT / "examples").glob("*.mlir"))}
    steps |= {name: (lambda n=name: step_module(n)) for name in STEPS}
    out: dict[str, dict] = {}
    for step, make in steps.items():
        for numerics in NUMERICS:
            case = f"{step}/{numerics}"
            if not re.search(pattern, case):
                continue
            module = make()
            ctx = Context()
            ctx.load_dialect(Func)
            ctx.load_dialect(Fwd)
            ForwardShimPass(numerics=numerics).apply(ctx, module)
            rec: dict[str, str] = {}
            for plan in plans_of(module) if tuning is None else plans_of(module, tuning):
                rec["plan text"] = hashlib.sha256(plan.text().encode()).hexdigest()[:16]
                for i, k in enumerate(plan.kernels()):
                    rec[f"{i:03d} {k.name}"] = hashlib.sha256(k.source.encode()).hexdigest()[:16]
            out[case] = rec
    return out


def collect_one(mode: str, setting: str, pattern: str = "") -> dict[str, dict]:
    """One setting's records in one mode (`sim` or `gpu`), made in a subprocess: `mode/setting/case` -> record."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("FWDSHIM_PDL", "FWDSHIM_MERGE"))}
    e |= {"NUMBA_ENABLE_CUDASIM": MODES[mode], "PYTHONPATH": str(ROOT)}
    e["FWDSHIM_PLAN_SETTING"] = setting
    got = subprocess.run([sys.executable, __file__, "--child", pattern], env=e, capture_output=True, text=True)
    if got.returncode:
        raise RuntimeError(f"{mode}/{setting}: {got.stderr[-3000:]}")
    return {f"{mode}/{setting}/{case}": rec for case, rec in json.loads(got.stdout.splitlines()[-1]).items()}


def collect(pattern: str = "", settings: str = "") -> dict[str, dict]:
    """Every setting's (matching `settings`) records in both modes."""
    out: dict[str, dict] = {}
    for mode in MODES:
        for setting in SETTINGS:
            if re.search(settings, setting):
                out |= collect_one(mode, setting, pattern)
    return out


def wanted(mode: str = "", setting: str = "", pattern: str = "") -> dict[str, dict]:
    """The recorded records (`tests/data/plan_sources.json`) of `mode`, `setting` and cases matching `pattern`."""
    want = json.loads(DATA.read_text())
    keep = lambda k: (k.split("/")[0] == mode or not mode) and (k.split("/")[1] == setting or not setting)
    return {k: v for k, v in want.items() if keep(k) and re.search(pattern, k.split("/", 2)[2])}


def differences(want: dict, got: dict) -> list[str]:
    lines = []
    for case in sorted(set(want) | set(got)):
        if case not in got or case not in want:
            lines.append(f"{case}: {'missing now' if case not in got else 'new'}")
        elif want[case] != got[case]:
            bad = [k for k in sorted(set(want[case]) | set(got[case])) if want[case].get(k) != got[case].get(k)]
            lines.append(f"{case}: {len(bad)} differ: {', '.join(bad[:6])}{' ...' if len(bad) > 6 else ''}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--cases", default="", help="only the cases matching REGEX")
    ap.add_argument("--settings", default="", help="only the settings matching REGEX (--write keeps the others' records)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(records(a.child, os.environ["FWDSHIM_PLAN_SETTING"])))
        return 0
    got = collect(a.cases, a.settings)
    if a.write:
        kept = json.loads(DATA.read_text()) if (a.cases or a.settings) and DATA.exists() else {}
        DATA.write_text(json.dumps(kept | got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} records to {DATA}")
        return 0
    want = {k: v for k, v in wanted(pattern=a.cases).items() if re.search(a.settings, k.split("/")[1])}
    bad = differences(want, got)
    print("\n".join(bad) or f"{len(got)} records: the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
