"""`fwd-fuse`: fuse stages into `fwd.fused` kernels by the shared rule table in the shim's order.

Source: DESIGN.md §5 and the seed's `rules()`/`supports()`/`fits()`. Each rule of the composed table
(`fwdshim.passes.rules.compose(shim.rules())`) runs once, to a fixed point, as one rewrite pattern:

- *match*: the rule's `apply` finds the stages it would fuse with a root (`rules.Match`);
- *precondition*: `precondition(match, ctx)` says why it is not fused, or None: the class is not
  Native for the shim (Refuse: a `fwd.remark` on the match's first part gives the reason; Decompose:
  silently, its parts stay for later rules), a part the shim does not run, parts that are not
  convex, an op that may have side effects (a `func.call`) reading a part where fusing would move it
  past another such op (a remark: `reordered_effects`), or the shim's `fits` refusing the would-be
  fused op (a remark again);
- *transform*: `build_fused` clones the parts, in program order, into one `fwd.fused` op (region
  arguments: the parts' outside inputs, weights included; results: every part result read outside
  the match or read by nothing; `covers`: the parts' stage numbers; locations kept, the fused op at
  its first part's), and `splice` puts it in place of the parts (outside ops that sat between the
  parts and read them move after it).

Stage numbers are those of the IR `fwd-fuse` was given (`rules.number_stages`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern
from xdsl.rewriter import InsertPoint
from xdsl.traits import is_side_effect_free

from fwdshim.diagnostics import op_label, where
from fwdshim.dialects.fwd import ElementwiseOp, FusedOp, QuantizeOp, ReluOp, RmsNormOp, SiluOp, YieldOp, stage_numbers
from fwdshim.passes.ir_order import producer
from fwdshim.passes.options import NumericsPass
from fwdshim.passes.rules import RULES, ChipRule, FuseContext, Match, compose, dependents_between
from fwdshim.shim.protocol import Shim
from fwdshim.shim.refusal import FUSE_DISABLED_ATTR, disabled_rules
from fwdshim.shim.refusal import REMARK_ATTR as REMARK
from fwdshim.passes.plan_attrs import forget_plan

"""The discardable attribute that records why a rule's match was not fused: `"<rule>: <reason>"`."""


def remark(op: Operation, text: str) -> None:
    """Add `text` to `op`'s `fwd.remark` (remarks on one op are joined by `; `)."""
    old = op.attributes.get(REMARK)
    if isinstance(old, StringAttr):
        if text in old.data.split("; "):
            return
        text = f"{old.data}; {text}"
    op.attributes[REMARK] = StringAttr(text)


@dataclass(frozen=True)
class NotFused:
    """Why a match is not fused; `remark`: the reason is shown on the match's first part."""

    reason: str
    remark: bool = False


def precondition(match: Match, ctx: FuseContext) -> NotFused | None:
    """Why `match` is not fused under `ctx.shim`, or None (the would-be op's `fits` is asked later)."""
    support = ctx.shim.supports(match.cls)
    if support.is_refuse:
        return NotFused(support.reason or "refused", remark=True)
    if not support.is_native:
        return NotFused(f"{match.cls.value} is not native for {ctx.shim.name()}")
    for p in match.parts:
        why = ctx.fits(p)
        if why is not None:
            return NotFused(f"a part is refused: {why}")
    if not ctx.convex(match.parts):
        return NotFused("an op outside the parts reads one of them and feeds another")
    passed = reordered_effects(match.parts, ctx)
    if passed is not None:
        mover, other = passed
        return NotFused(
            f"{mover.name} ({where(mover)}) reads a part and would move after the fused op, past {other.name}"
            f" ({where(other)}): both may have side effects", remark=True,
        )  # fmt: skip
    covers = [n for p in match.parts for n in (ctx.covers(p) or (-1,))]
    if min(covers) < 0 or any(a >= b for a, b in zip(covers, covers[1:])):
        return NotFused("the parts' stage numbers are not in program order")
    return None


def reordered_effects(parts: tuple[Operation, ...], ctx: FuseContext) -> tuple[Operation, Operation] | None:
    """(an op `splice` would move, an op it would move past) when both may have side effects: the
    outside ops between the parts that read them move after the fused op, past every other op up
    to the last part. None when fusing keeps the order of every op that may have effects (xDSL's
    `is_side_effect_free`: a stage has none unless it writes into a named buffer, `fwd.StageEffects`;
    a `func.call` or an unknown op may have some)."""
    movers = ctx.between(parts)
    effectful = [m for m in movers or () if not is_side_effect_free(m)]
    if not effectful:
        return None
    moving, inside = set(movers or ()), set(parts)
    last = max(parts, key=ctx.pos)
    op = effectful[0].next_op
    while op is not None and op is not last:
        if op not in moving and op not in inside and not is_side_effect_free(op):
            return effectful[0], op
        op = op.next_op
    return None


def build_fused(match: Match, ctx: FuseContext) -> tuple[FusedOp, list[SSAValue]]:
    """The detached `fwd.fused` op of `match`, and the part results it yields (in its result order)."""
    parts = match.parts
    inside = set(parts)
    ins: list[SSAValue] = []
    for p in parts:
        for v in p.operands:
            if producer(v) not in inside and v not in ins:
                ins.append(v)
    outs = [r for p in parts for r in p.results if not r.uses or any(u.operation not in inside for u in r.uses)]
    block = Block(arg_types=[v.type for v in ins])
    mapper: dict[SSAValue, SSAValue] = {}
    for v, arg in zip(ins, block.args):
        mapper[v] = arg
        arg.name_hint = v.name_hint
    for p in parts:
        block.add_op(p.clone(mapper))
    block.add_op(YieldOp.create(operands=[mapper[r] for r in outs]))
    covers = [n for p in parts for n in ctx.covers(p) or ()]
    fused = FusedOp(match.cls, covers, ins, [r.type for r in outs], Region(block))
    fused.location = parts[0].location
    for r, o in zip(fused.results, outs):
        r.name_hint = o.name_hint
    return fused, outs


def splice(
    fused: FusedOp, outs: list[SSAValue], parts: tuple[Operation, ...], rewriter: PatternRewriter, ctx: FuseContext
) -> None:
    """Put `fused` in place of `parts`: after the last part, with the outside ops between the parts
    that read them moved after it; the parts' outside uses read `fused`'s results."""
    movers = dependents_between(parts, ctx)
    rewriter.insert(fused, InsertPoint.after(parts[-1]))
    anchor: Operation = fused
    for m in movers:
        m.detach()
        rewriter.insert(m, InsertPoint.after(anchor))
        anchor = m
    inside = set(parts)
    for old, new in zip(outs, fused.results):
        rewriter.replace_uses_with_if(old, new, lambda use: use.operation not in inside)
    for p in reversed(parts):
        rewriter.erase(p)
    ctx.placed(fused, parts, movers)
    ctx.changed()


class RulePattern(RewritePattern):
    """One rule of the table as a rewrite pattern: match, precondition, transform."""

    def __init__(self, rule: ChipRule, ctx: FuseContext):
        self.rule = rule
        self.ctx = ctx

    def _not_fused(self, match: Match, why: NotFused) -> None:
        if why.remark:
            remark(match.parts[0], f"{self.rule.name}: {why.reason}")

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        match = self.rule.apply(op, self.ctx)
        if match is None:
            return
        why = precondition(match, self.ctx)
        if why is not None:
            return self._not_fused(match, why)
        fused, outs = build_fused(match, self.ctx)
        reason = self.ctx.fits(fused)
        if reason is not None:
            fused.erase(safe_erase=False)
            return self._not_fused(match, NotFused(reason, remark=True))
        splice(fused, outs, match.parts, rewriter, self.ctx)


def fuse_module(module: ModuleOp, shim: Shim, rules: tuple[ChipRule, ...] | None = None) -> None:
    """Run `rules` (default: the shared table composed with `shim.rules()`) on `module`, in order,
    each to a fixed point."""
    table = compose(shim.rules()) if rules is None else rules
    ctx = FuseContext.of(module, shim)
    for rule in table:
        PatternRewriteWalker(RulePattern(rule, ctx), apply_recursively=True).rewrite_module(module)


FUSABLE_PRIMITIVES = (RmsNormOp, ElementwiseOp, SiluOp, ReluOp, QuantizeOp)
"""The primitives some rule of the table takes as a part besides a kernel's main op: norms,
elementwise ops, silus, relus, quantizes (a matmul, rope or attention left alone is the usual case)."""


def _names(ops: list[Operation]) -> str:
    """The ops' names, each once (a fused op's with its class: `fwd.fused (add_norm)`)."""
    return ", ".join(dict.fromkeys(f"{o.name} ({o.class_.data})" if isinstance(o, FusedOp) else op_label(o) for o in ops))


def _guard(op: Operation, ctx: FuseContext, table: tuple[ChipRule, ...]) -> tuple[str | None, str]:
    """The first rule of `table` (in order) whose match takes `op` as a part, and what stopped it; or
    (None, why no rule matches)."""
    roots = [op]
    roots += [p for v in op.operands if (p := producer(v)) is not None]
    roots += [u.operation for r in op.results for u in r.uses]
    roots = list(dict.fromkeys(roots))
    for rule in table:
        for root in roots:
            match = rule.apply(root, ctx)
            if match is None or op not in match.parts:
                continue
            why = precondition(match, ctx)
            if why is not None:
                return rule.name, why.reason
            fused, _ = build_fused(match, ctx)
            reason = ctx.fits(fused)
            fused.erase(safe_erase=False)
            if reason is not None:
                return rule.name, reason
            return rule.name, WOULD_FUSE
    ins = [p for v in op.operands if (p := producer(v)) is not None]
    outs = list(dict.fromkeys(u.operation for r in op.results for u in r.uses))
    reads = f"reads {_names(ins)}" if ins else "reads only the step's arguments"
    read_by = f"read by {_names(outs)}" if outs else "read by no op"
    return None, f"no rule of the table matches it ({reads}; {read_by})"


def unfused_guards(module: Operation, shim: Shim, table: tuple[ChipRule, ...] | None = None) -> list[dict[str, object]]:
    """Why each fusable primitive (`FUSABLE_PRIMITIVES`) left as its own stage is not fused: per such
    stage in program order, `{stage, op_name, location, rule, guard}` — `rule` the first rule of
    `table` (default: the shared table in `shim`'s order) whose match takes it, and `guard` the
    precondition or `fits` reason that stopped that match; `rule` None and `guard` what the op reads and
    what reads it where no rule matches. `stage`: the number after fusion (`fwd.stage_numbers`).

    The closing part of the fusion coverage (`--explain`, `--report-json`'s `unfused`): issue 14."""
    if not hasattr(shim, "rules") or not hasattr(shim, "supports"):
        raise TypeError(f"shim: a Shim (e.g. shim.contract.forward_shim('dequant')), not {type(shim).__name__}")
    off = disabled_rules(module)
    full = compose(shim.rules()) if table is None else table
    table = tuple(r for r in full if r.name not in off)
    would = _would_fuse(module, shim, table)
    left_out = _would_fuse(module, shim, full) - would if off else set()
    ctx = FuseContext.of(module, shim)
    rows: list[dict[str, object]] = []
    for op, stage in stage_numbers(module).items():
        if isinstance(op, FUSABLE_PRIMITIVES):
            if op in left_out:  # a disabled rule would take it: say so, not "would fuse" nor "no rule"
                rule = _guard(op, ctx, tuple(r for r in full if r.name in off))[0]
                rows.append({"stage": stage, "op_name": op.name, "location": where(op), "rule": rule,
                             "guard": f"not run: fwd-fuse{{disable={','.join(off)}}}"})  # fmt: skip
                continue
            rule, guard = (None, WOULD_FUSE) if op in would else _guard(op, ctx, table)
            rows.append({"stage": stage, "op_name": op.name, "location": where(op), "rule": rule, "guard": guard})
    return rows


WOULD_FUSE = "nothing: fwd-fuse would fuse it (it has not run on this IR, or not since the IR changed)"


def _would_fuse(module: Operation, shim: Shim, table: tuple[ChipRule, ...]) -> set[Operation]:
    """The ops of `module` that fwd-fuse, run now on a copy, takes into a fused op (a rule may need
    another to fire first: norm_quant takes the norm that norm_weight forms)."""
    copy = module.clone()
    pairs = list(zip(module.walk(), copy.walk(), strict=True))
    try:
        fuse_module(copy, shim, table)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - IR fwd-fuse cannot take: each op's own guard says why
        return set()
    return {o for o, c in pairs if c.parent_block() is None}


@dataclass(frozen=True)
class FusePass(NumericsPass):
    """Fuse stages into fwd.fused kernels by the shared rule table, in the forward's order."""

    name = "fwd-fuse"

    numerics: str = "dequant"
    """The forward's numerics: `dequant`, `int8-act` (the quant epilogue rules fire) or `two-pass-int8`."""

    order: str = "shim"
    """`shim`: the shared table with the forward's positions (regions and chains before `add_norm`);
    `shared`: the shared table's own order (as a lane that moves no rule sees it)."""

    disable: tuple[str, ...] = ()
    """Rules not run, by name (`fwd-fuse{disable=add_norm,elementwise_chains}`): to bisect a fusion
    by hand. The others run in their order; `fwdshim-opt --print-capabilities` lists the rules."""

    def __post_init__(self) -> None:
        super().__post_init__()  # the numerics: ValueError, a one-line error from the driver
        if self.order not in ("shim", "shared"):
            raise ValueError(f"option `order` of `fwd-fuse` takes shim or shared, not `{self.order}`")
        check_rule_names(self.name, self.disable)

    def table(self) -> tuple[ChipRule, ...]:
        """The rules this pass runs, in order: the shared table in the shim's order (or its own,
        `order=shared`), less the disabled ones."""
        table = RULES if self.order == "shared" else compose(self.shim.rules())
        return tuple(r for r in table if r.name not in self.disable)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_not_quantized_otherwise(op)
        self.run(op)

    def run(self, op: ModuleOp) -> None:
        """The pass on `op` without `apply`'s check of the numerics it was quantized for (`forward-shim`
        leaves that to its legality pass, which locates each op those numerics cannot read)."""
        forget_plan(op)
        if self.disable:  # the report then says which stages the left-out rules would have taken
            op.attributes[FUSE_DISABLED_ATTR] = ArrayAttr([StringAttr(n) for n in self.disable])
        else:
            op.attributes.pop(FUSE_DISABLED_ATTR, None)
        fuse_module(op, self.shim, self.table())


def check_rule_names(pass_name: str, names: tuple[str, ...]) -> None:
    """ValueError (a one-line error from the driver) naming the first of `names` that is no rule of
    the shared table, and the rules there are."""
    known = [r.name for r in RULES]
    for n in names:
        if n not in known:
            raise ValueError(f"option `disable` of `{pass_name}` takes rule names ({', '.join(known)}), not `{n}`")
