"""The legality report: one row per stage — op, location, verdict, class or reason — and fusion remarks.

`fwdshim-opt --explain` prints it after the IR as `//` comment lines (the output stays valid IR);
`--report-json FILE` writes the same rows as JSON: `{"shim": ..., "rows": [{stage, op_name, location,
verdict, detail, branch, covers}, ...], "fusion": [{rule, fired, nested}, ...], "unfused": [{stage,
op_name, location, rule, guard}, ...]}` (with `--split-input-file`, a list of those, one per chunk). Verdicts come from `fwdshim.shim.legality.check`, the function
the pass itself refuses with, under the shim the module's `fwd.numerics` names (before legalization,
the numerics the pipeline's passes ran with, e.g. `fwd-fuse{numerics=int8-act}`, else DEQUANT), so
the table, the errors and the `fwd.refused` attributes agree.

Rows: `native kernel` (detail: the fused class, `quantize, <format>` — with `(inserted by <pass>)` for
one the pipeline inserted, located at the value it quantizes — or `primitive`), `decomposed` (a DECOMPOSE fused op
not yet split, or a part split from one: detail `<class>` / `part of <class>`), `refused` (detail:
the reason; JSON adds the seed branch id), `remark` (a rule of `fwd-fuse` matched but the shim
refuses its class: the op's `fwd.remark`).

The stage column numbers the stages after fusion; a fused op's row adds `covers [..]`, the numbers its
parts had before fusion (the op's `covers`; the JSON row's `covers`, empty for any other op).
The fusion coverage closes the table (and is the JSON's `fusion`): per rule of `fwd-fuse`, the fused
ops of its class, nested ones included; then each norm, elementwise op, silu, relu or quantize left
as its own stage with the guard that stopped fusing it: the first rule whose match takes it and the
reason that match was not fused, or that no rule matches (what it reads, what reads it). The guards
come from `fwdshim.passes.fuse.unfused_guards`, handed in by the caller (`unfused`: the passes sit a
floor above the shim).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

from fwdshim.diagnostics import inserted_by, where
from fwdshim.dialects.fwd import FusedOp, QuantizeOp, stage_numbers
from fwdshim.shim.forward import ForwardShim
from fwdshim.shim.contract import forward_shim, shim_of
from fwdshim.shim.legality import DECOMPOSED_ATTR, check
from fwdshim.shim.refusal import DECOMPOSED, NATIVE, REMARK, REMARK_ATTR, Verdict, disabled_rules, mark_text


def _stage_rows(shim: ForwardShim, op: Operation, stage: int, part_of: str | None) -> list[Verdict]:
    covers = op.cover_list if isinstance(op, FusedOp) else ()
    if isinstance(op, FusedOp) and shim.supports(op.class_id).is_decompose:
        cls = op.class_.data
        detail = cls if part_of is None else f"{cls}, part of {part_of}"
        rows = [Verdict(stage, op.name, where(op), DECOMPOSED, detail, covers=covers)]
        for p in op.parts():
            rows += _stage_rows(shim, p, stage, cls)
        return rows
    r = check(shim, op)
    if r is not None:
        return [replace(Verdict.refused(stage, r), covers=covers)]
    origin = op.attributes.get(DECOMPOSED_ATTR)
    if part_of is None and isinstance(origin, StringAttr):
        part_of = origin.data
    if part_of is not None:
        return [Verdict(stage, op.name, where(op), DECOMPOSED, f"part of {part_of}")]
    return [Verdict(stage, op.name, where(op), NATIVE, _kernel(op), covers=covers)]


def _kernel(op: Operation) -> str:
    if isinstance(op, FusedOp):
        return op.class_.data
    if isinstance(op, QuantizeOp):
        by = inserted_by(op)
        return f"quantize, {op.format.data.value}" + (f" (inserted by {by})" if by else "")
    return "primitive"


def verdicts(module: Operation, shim: ForwardShim | None = None) -> list[Verdict]:
    """Every stage's verdict in program order, each fusion remark after its op's row."""
    shim = shim_of(module) if shim is None else shim
    numbers = stage_numbers(module)
    rows: list[Verdict] = []
    for op, stage in numbers.items():
        rows += _stage_rows(shim, op, stage, None)
        rows += _remarks(op, stage)
    for op in module.walk():
        remark = mark_text(op, REMARK_ATTR)
        if remark is not None and op not in numbers and not _inside_stage(op, numbers):
            rows.append(Verdict(-1, op.name, where(op), REMARK, remark))
    return rows


def _inside_stage(op: Operation, numbers: dict[Operation, int]) -> bool:
    parent = op.parent_op()
    while parent is not None:
        if parent in numbers:
            return True
        parent = parent.parent_op()
    return False


def _remarks(op: Operation, stage: int) -> list[Verdict]:
    rows = []
    for o in op.walk():
        remark = mark_text(o, REMARK_ATTR)
        if remark is not None:
            rows.append(Verdict(stage, o.name, where(o), REMARK, remark))
    return rows


_HEAD = ("stage", "op", "location", "verdict", "class or reason")
_STAGES = "// stage: the stage number after fusion; covers [..]: a fused op's stages, numbered before fusion"


def format_table(shim: ForwardShim, rows: list[Verdict]) -> str:
    """The rows as aligned `//` comment lines, headed by the shim's name."""
    cells = [_HEAD] + [
        ("" if v.stage < 0 else str(v.stage), v.op_name, v.location, v.verdict, _last(v)) for v in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(_HEAD) - 1)]
    lines = [f"// legality report: {shim.name()}", _STAGES]
    for c in cells:
        lines.append("// " + "  ".join(x.ljust(w) for x, w in zip(c, widths)) + "  " + c[-1])
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _last(v: Verdict) -> str:
    if not v.covers:
        return v.detail
    return f"{v.detail}  covers [{', '.join(map(str, v.covers))}]"


def fusion_counts(module: Operation, rules: Sequence[str] = ()) -> list[dict[str, object]]:
    """Per rule of `fwd-fuse`'s table (`rules`: its names in table order, given by the caller — the
    table lives in `fwdshim.passes.rules`, a floor above the shim), then any other class a fused op
    names: how many fused ops of its class the module holds (`fired`) and how many of those sit inside
    another fused op (`nested`).

    A count of fused ops, so a DECOMPOSE class that legalization has split counts no more."""
    off = set(disabled_rules(module))
    counts: dict[str, list[int]] = {name: [0, 0] for name in rules if name not in off}
    for op in module.walk():
        if isinstance(op, FusedOp):
            c = counts.setdefault(op.class_.data, [0, 0])
            c[0] += 1
            c[1] += isinstance(op.parent_op(), FusedOp)
    out = [{"rule": name, "fired": n, "nested": k} for name, (n, k) in counts.items()]
    return out + [{"rule": name, "fired": 0, "nested": 0, "disabled": True} for name in rules if name in off]


def format_fusion(counts: list[dict[str, object]]) -> str:
    """The fusion coverage lines that close `--explain`: the rules that fired, then those that did not."""
    fired = [c for c in counts if c["fired"]]
    width = max([len(str(c["rule"])) for c in fired] + [0])
    lines = ["// fusion coverage: fused ops of each rule's class in the module (nested ones, and any written in the input, included)"]
    for c in fired:
        nested = f"  ({c['nested']} inside another fused op)" if c["nested"] else ""
        lines.append(f"// {str(c['rule']).ljust(width)}  {c['fired']}{nested}")
    idle = [str(c["rule"]) for c in counts if not c["fired"] and not c.get("disabled")]
    if idle:
        lines.append(f"// did not fire: {', '.join(idle)}")
    off = [str(c["rule"]) for c in counts if c.get("disabled")]
    if off:
        lines.append(f"// not run (fwd-fuse{{disable=...}}): {', '.join(off)}")
    return "\n".join(lines) + "\n"


Unfused = Callable[[Operation, ForwardShim], list[dict[str, object]]]
"""`(module, shim) -> [{stage, op_name, location, rule, guard}, ...]`: why each fusable primitive left
as its own stage is not fused (`fwdshim.passes.fuse.unfused_guards`)."""


def format_unfused(rows: list[dict[str, object]]) -> str:
    """The lines after the rule counts: each fusable primitive left alone, and what stopped it."""
    if not rows:
        return "// left unfused: no norm, elementwise op, silu, relu or quantize\n"
    cells = [(str(r["stage"]), str(r["op_name"]), str(r["location"])) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    lines = [f"// left unfused: {len(rows)} fusable stage(s) (norm, elementwise op, silu, relu, quantize), and why no rule took each"]
    for c, r in zip(cells, rows):
        guard = str(r["guard"]) if r["rule"] is None else f"{r['rule']}: {r['guard']}"
        lines.append("// " + "  ".join(x.ljust(w) for x, w in zip(c, widths)) + "  " + guard)
    return "\n".join(lines) + "\n"


def _shim_arg(module: Operation, shim: ForwardShim | str | None, rules: Sequence[str]) -> ForwardShim:
    """The shim judging `module`: given, named by its numerics (`"int8-act"`), else the module's
    contract. Raises: TypeError for another kind of `shim`, or `rules` given as one string."""
    if isinstance(rules, str):
        raise TypeError(f"rules: a sequence of rule names, not the string {rules!r}")
    if shim is None:
        return shim_of(module)
    if isinstance(shim, str):
        return forward_shim(shim)
    if not isinstance(shim, ForwardShim):
        raise TypeError(f"shim: a ForwardShim or a numerics name, not {type(shim).__name__}")
    return shim


def report_table(
    module: Operation, shim: ForwardShim | str | None = None, rules: Sequence[str] = (), unfused: Unfused | None = None
) -> str:
    """The `--explain` table of `module`, closed by its fusion coverage (`shim`: the judging shim, or
    its numerics' name, default the module's contract; `rules`: see `fusion_counts`; `unfused`: the
    guards of the primitives left alone, none listed without it). Raises: TypeError (`_shim_arg`)."""
    shim = _shim_arg(module, shim, rules)
    text = format_table(shim, verdicts(module, shim)) + format_fusion(fusion_counts(module, rules))
    return text if unfused is None else text + format_unfused(unfused(module, shim))


def report_json(
    module: Operation, shim: ForwardShim | str | None = None, rules: Sequence[str] = (), unfused: Unfused | None = None
) -> dict[str, object]:
    """The `--report-json` document of `module` (`shim`, `rules`, `unfused`: see `report_table`)."""
    shim = _shim_arg(module, shim, rules)
    rows = [v.as_dict() for v in verdicts(module, shim)]
    doc = {"shim": shim.name(), "rows": rows, "fusion": fusion_counts(module, rules)}
    if unfused is not None:
        doc["unfused"] = unfused(module, shim)
    return doc


def explain_module(
    module: Operation,
    explain: bool,
    json_path: str | None,
    numerics: str | None = None,
    docs: list[dict[str, object]] | None = None,
    rules: Sequence[str] = (),
    unfused: Unfused | None = None,
    chunk: int | None = None,
) -> str:
    """Write the JSON report to `json_path` (when given); return the table when `explain` ('' if not).

    The shim judging is the one the module's `fwd.numerics` names, else the one of `numerics` (the
    option the pipeline's passes ran with), else DEQUANT. With `docs` (the reports of the chunks
    before this one, `--split-input-file`), this module's report is appended to it and the file
    holds the list, one report per chunk, each with its `chunk` (0-based: the chunk's index in the
    input, so a list missing a chunk that failed still says which report is which). The driver appends the returned table to the printed IR."""
    shim = shim_of(module, default=None if numerics is None else forward_shim(numerics))
    if json_path is not None:
        doc = report_json(module, shim, rules, unfused)
        if docs is not None:
            doc = {"chunk": len(docs) if chunk is None else chunk, **doc}
            docs.append(doc)
        try:
            if json_path == "-":  # stdout (the driver sends the IR to a file then)
                if docs is None:  # with chunks the driver prints the list once, after the last (`write_docs`)
                    json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
                    sys.stdout.write("\n")
                return report_table(module, shim, rules, unfused) if explain else ""
            with open(json_path, "w") as f:
                json.dump(doc if docs is None else docs, f, indent=2, ensure_ascii=False)
                f.write("\n")
        except OSError as e:  # a failed write or close names no file: name it
            if e.filename is None:
                e.filename = json_path
            raise
    return report_table(module, shim, rules, unfused) if explain else ""
