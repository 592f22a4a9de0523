"""The shared rule table: named fusion rules in the shared order, and a shim's positions.

Source: the seed's `ChipRule {name, builds, apply}` and `RULES` (the shared optimizer's table that
`forward_shim.rs` reorders with `rules()`), DESIGN.md §5. A rule's `apply` is its *match*: given a
root stage it returns the stages it would fuse (its parts, in program order) and the class it builds,
or None. Whether the match is fused (the shim's policy, the parts' legality, convexity) is decided by
`fwdshim.passes.fuse.precondition`; the rewrite is `fwdshim.passes.fuse.RulePattern`.

Rules match *maximal* runs and regions of any length and shape. Decisions:
- A *chain* (`elementwise_chains`) is a run p0, p1, ... of elementwise ops and silus where each step
  carries the previous step's result as exactly one operand (the seed's XOR), or is a silu of it;
  `y = x * x` after `x` is not a step.
- A *region* (`elementwise_regions`) is a maximal connected group of elementwise ops and silus of one
  size that a chain cannot take whole: it has a join (a member reading two different members) or a
  fork (a member read by two different members). A group that is a plain run is left to the chains.
- A part's result that some op outside the match reads (or that nothing reads) is yielded as a result
  of the fused op, so intermediates with outside users stay observable (add+norm writes the sum on).
- The quant rules fold the `fwd.quantize` that reads a producer's (norm) result into that producer:
  the fused op's parts are the producer (a nested `fwd.fused` where it is one) and the quantize.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import DenseArrayBase, i64
from xdsl.ir import Block, Operation, OpResult, SSAValue

from fwdshim.classes import ClassId
from fwdshim.dialects.fwd import (
    AttentionOp,
    ElementwiseOp,
    FusedOp,
    MatmulOp,
    QuantizeOp,
    ReluOp,
    RmsNormOp,
    RopeOp,
    SiluOp,
    WeightOp,
    YieldOp,
    numel,
    stages,
)
from fwdshim.passes.ir_order import in_program_order, is_top, producer
from fwdshim.shim.protocol import Position, Shim

C = ClassId


# ---------------------------------------------------------------------------------------------
# what the rules read


@dataclass(frozen=True)
class Match:
    """One match of a rule: the class it builds and its parts (top-level stages, program order)."""

    cls: ClassId
    parts: tuple[Operation, ...]


def number_stages(root: Operation, skip: Collection[Operation] = ()) -> dict[Operation, int]:
    """Stage numbers of the top-level stages under `root` (those in `skip` left out).

    As `fwd.stage_numbers` for IR without fused ops: program order from 0. A `fwd.fused` op already in
    the IR keeps the numbers of its `covers`, and the other stages take the numbers no fused op covers,
    in program order. So numbers and covers never clash, and IR that `fwd-fuse` wrote is numbered as
    the IR it was given: fusing moves a fused op to its last part and keeps the order of the stages it
    leaves, which take back the numbers they had (a stage left before a fused op of lower covers no
    longer takes one of them: `forward-shim` on its own output was not a fixed point)."""
    top = [op for op in stages(root) if op not in skip]
    used = {c for op in top if isinstance(op, FusedOp) for c in op.cover_list}
    numbers: dict[Operation, int] = {}
    counter = 0
    for op in top:
        if isinstance(op, FusedOp) and op.cover_list:
            continue
        while counter in used:
            counter += 1
        numbers[op] = counter
        counter += 1
    return numbers


def make_room(root: Operation, inserted: Collection[Operation]) -> None:
    """Give each stage of `inserted` (top-level stages just put into IR already fused) the number
    after the stage before it, and move on by one every number from there (the `covers` of every
    fused op under `root`, nested ones too; other stages follow by `number_stages`).

    `fwd-quantize-activations` after `fwd-fuse` puts a quantize between the attention [8] and the
    add+norm [9, 10, 11]: the quantize takes 9 and the add+norm [10, 11, 12], so a later `fwd-fuse`
    may fold the quantize into the attention. Nothing changes without inserted stages or fused ops."""
    pending = set(inserted)
    if not pending or not any(isinstance(op, FusedOp) and op.cover_list for op in stages(root)):
        return
    fused = [f for f in root.walk() if isinstance(f, FusedOp)]
    for q in [op for op in stages(root) if op in pending]:
        numbers = number_stages(root, pending)
        before = None
        for op in stages(root):
            if op is q:
                break
            if op not in pending:
                before = op
        if before is None:
            k = 0
        elif isinstance(before, FusedOp) and before.cover_list:
            k = max(before.cover_list) + 1
        else:
            k = numbers[before] + 1
        for f in fused:
            if f.cover_list and max(f.cover_list) >= k:
                f.covers = DenseArrayBase.from_list(i64, [c + (c >= k) for c in f.cover_list])
        pending.discard(q)


@dataclass
class FuseContext:
    """What the rules read besides the IR: the shim and the stage numbers of the IR fwd-fuse was given.

    It also keeps, for the IR as it stands, each op's position in its block (`pos`: kept up to date
    across a rewrite by `fused`, renumbered only when a gap runs out) and a memo of what the rules
    computed (`memo`, `computes`), cleared by `changed()` whenever fwd-fuse rewrites the IR. With them a
    convexity check costs the ops it reaches between the parts, not the block's length, and a chain or
    region of n ops is found once, not once per member (fusing 200 chained silus took 73 s)."""

    shim: Shim
    numbers: dict[Operation, int] = field(default_factory=dict)
    _pos: dict[Operation, int] = field(default_factory=dict, repr=False)
    memo: dict[object, object] = field(default_factory=dict, repr=False)
    _computes: dict[Operation, bool] = field(default_factory=dict, repr=False)

    @staticmethod
    def of(root: Operation, shim: Shim) -> "FuseContext":
        return FuseContext(shim, number_stages(root))

    def covers(self, op: Operation) -> tuple[int, ...] | None:
        """The stage numbers `op` stands for: a fused op's `covers`, a stage's own number."""
        if isinstance(op, FusedOp):
            return op.cover_list
        n = self.numbers.get(op)
        return None if n is None else (n,)

    def fits(self, op: Operation) -> str | None:
        """The shim's reason it does not run `op`, or None (None too for a shim without `fits`)."""
        fits = getattr(self.shim, "fits", None)
        if fits is None:
            return None
        why = fits(op)
        return getattr(why, "reason", why)

    def computes(self, op: Operation) -> bool:
        """Whether `op` is a top-level stage the shim runs (a rule never fuses one it refuses)."""
        known = self._computes.get(op)
        if known is None:
            known = self._computes[op] = is_top(op) and self.fits(op) is None
        return known

    # -- positions ------------------------------------------------------------------------------

    def pos(self, op: Operation) -> int:
        """`op`'s position in its block: increasing in program order (not contiguous)."""
        p = self._pos.get(op)
        if p is None:
            block = op.parent_block()
            assert block is not None, "a positioned op sits in a block"
            self._number(block)
            p = self._pos[op]
        return p

    def _number(self, block: Block) -> None:
        for i, o in enumerate(block.ops):
            self._pos[o] = (i + 1) * _GAP

    def changed(self) -> None:
        """The IR changed: forget what the rules computed (positions are kept by `placed`)."""
        self.memo.clear()
        self._computes.clear()

    def placed(self, fused: Operation, parts: Sequence[Operation], movers: Sequence[Operation]) -> None:
        """`fused` now sits where `parts[-1]` was, `movers` right after it (fwd-fuse's splice)."""
        last = self._pos.get(parts[-1])
        for p in parts:
            self._pos.pop(p, None)
        for m in movers:
            self._pos.pop(m, None)
        nxt = (movers[-1] if movers else fused).next_op
        hi = None if nxt is None else self._pos.get(nxt)
        if last is None or (hi is not None and hi - last <= len(movers) + 1):
            block = fused.parent_block()
            if block is not None:
                self._number(block)
            return
        self._pos[fused] = last
        step = _GAP if hi is None else (hi - last) // (len(movers) + 1)
        for i, m in enumerate(movers):
            self._pos[m] = last + (i + 1) * step

    def in_block(self, op: Operation, block: Block) -> Operation | None:
        """The op of `block` that holds `op` (itself, or an ancestor), or None."""
        while op is not None and op.parent_block() is not block:
            op = op.parent_op()
        return op

    # -- convexity ------------------------------------------------------------------------------

    def convex(self, parts: Collection[Operation]) -> bool:
        """Whether no path leaves `parts` and comes back: no outside op is both read by a part and
        reads a part (directly or through other outside ops). Parts share one block."""
        return self.between(parts) is not None

    def between(self, parts: Collection[Operation]) -> list[Operation] | None:
        """The outside ops before the last part that read a part (through any chain of uses, outside
        ops only), in program order; None when a part reads one of them (the parts are not convex)."""
        members = set(parts)
        blocks = {p.parent_block() for p in members}
        if len(blocks) != 1 or None in blocks:
            return None
        block = next(iter(blocks))
        hi = max(self.pos(p) for p in members)
        reached: set[Operation] = set()
        todo = list(members)
        while todo:
            op = todo.pop()
            for r in op.results:
                for use in r.uses:
                    u = self.in_block(use.operation, block)
                    if u is None or u is op:
                        continue
                    if u in members:
                        if op not in members:
                            return None
                    elif u not in reached and self.pos(u) < hi:
                        reached.add(u)
                        todo.append(u)
        return sorted(reached, key=self.pos)

    def convex_with(self, group: Collection[Operation], n: Operation, bounds: tuple[int, int] | None = None) -> bool:
        """Whether convex `group` (a set) stays convex with `n` added. Only paths through `n` can
        break it: `n` reading a member while some other input of `n` descends from a member, or a
        member reading `n` while some other user of `n` leads to a member. `bounds`: the first and
        last member's positions, where the caller keeps them; a caller keeping them grows `group`
        through this check alone, so its members share one block and only one is compared (the
        whole group every time made growing a group of n ops cost n²)."""
        block = n.parent_block()
        if block is None:
            return False
        if bounds is None and any(g.parent_block() is not block for g in group):
            return False
        if bounds is not None and group and next(iter(group)).parent_block() is not block:
            return False
        reads = {self.in_block(p, block) for o in n.walk() for v in o.operands if (p := producer(v)) is not None}
        reads.discard(None)
        users = {self.in_block(u.operation, block) for r in n.results for u in r.uses}
        users.discard(None)
        reads_member, read_by_member = bool(reads & group), bool(users & group)
        if not (reads_member or read_by_member):
            return self.convex([*group, n])
        if bounds is None:
            bounds = (min(self.pos(g) for g in group), max(self.pos(g) for g in group))
        lo, hi = bounds
        if reads_member and any(self._reaches_back(p, group, lo) for p in reads - group if p is not n):
            return False
        if read_by_member and any(self._reaches_on(u, group, hi) for u in users - group if u is not n):
            return False
        return True

    def _reaches_back(self, op: Operation, group: Collection[Operation], lo: int) -> bool:
        """Whether `op` (outside `group`) descends from a member: a search through the producers of
        what it reads, over ops at or after the first member."""
        block = op.parent_block()
        seen = {op}
        todo = [op]
        while todo:
            o = todo.pop()
            for inner in o.walk():
                for v in inner.operands:
                    p = producer(v)
                    p = None if p is None else self.in_block(p, block)
                    if p is None or p in seen:
                        continue
                    if p in group:
                        return True
                    if self.pos(p) > lo:
                        seen.add(p)
                        todo.append(p)
        return False

    def _reaches_on(self, op: Operation, group: Collection[Operation], hi: int) -> bool:
        """Whether a member descends from `op` (outside `group`): a search through users, over ops at
        or before the last member."""
        block = op.parent_block()
        seen = {op}
        todo = [op]
        while todo:
            o = todo.pop()
            for r in o.results:
                for use in r.uses:
                    u = self.in_block(use.operation, block)
                    if u is None or u in seen:
                        continue
                    if u in group:
                        return True
                    if self.pos(u) < hi:
                        seen.add(u)
                        todo.append(u)
        return False


_GAP = 1 << 32
"""The distance between neighbouring positions when a block is numbered (room for ops moved between)."""


def dependents_between(parts: Collection[Operation], ctx: FuseContext) -> list[Operation]:
    """The outside ops between the parts that read them: they move after the fused op."""
    out = ctx.between(parts)
    assert out is not None, "convex parts"
    return out


def _users(v: SSAValue, ctx: FuseContext | None = None) -> list[Operation]:
    """The ops reading `v`, each once, in program order."""
    ops = list(dict.fromkeys(u.operation for u in v.uses))
    block = ops[0].parent_block() if ops else None
    if len(ops) > 1 and block is not None and all(o.parent_block() is block for o in ops):
        return in_program_order(ops, ctx)
    return ops


def _one_result(op: Operation) -> SSAValue | None:
    return op.results[0] if len(op.results) == 1 else None


# ---------------------------------------------------------------------------------------------
# shapes the rules look for


def _is_kind(op: Operation, kind: str) -> bool:
    return isinstance(op, ElementwiseOp) and op.row is None and op.kind.data.value == kind


def _pointwise(op: Operation, ctx: FuseContext) -> bool:
    """An elementwise op (not over a row) or a silu, that the shim runs: a chain or region member."""
    ok = isinstance(op, SiluOp) or (isinstance(op, ElementwiseOp) and op.row is None)
    return ok and ctx.computes(op)


def _carries(prev: Operation, step: Operation) -> bool:
    """`step` carries `prev`'s result as exactly one operand (the seed's XOR), or is a silu of it."""
    r = prev.results[0]
    if numel(r.type) != numel(step.results[0].type):
        return False
    if isinstance(step, SiluOp):
        return step.x == r
    return isinstance(step, ElementwiseOp) and ((step.a == r) != (step.b == r))


def _yielded_by_last(fused: FusedOp, v: SSAValue) -> bool:
    """Whether `v`, a result of `fused`, is what its last part computes (a norm, not the sum)."""
    if not isinstance(v, OpResult) or v.op is not fused:
        return False
    y = fused.body.block.last_op
    assert isinstance(y, YieldOp)
    return producer(y.operands[v.index]) is fused.parts()[-1]


def _norm_result(op: Operation) -> SSAValue | None:
    """The normed value of an RMS norm or a fused weighted norm (`norm_weight`)."""
    if isinstance(op, RmsNormOp):
        return op.result
    if isinstance(op, FusedOp) and op.class_.data == C.NORM_WEIGHT.value:
        return next((r for r in op.results if _yielded_by_last(op, r)), None)
    return None


def _norms_as_x(op: Operation, v: SSAValue) -> bool:
    """Whether `op` RMS-norms `v` (an RMS norm with x = v, or a `norm_weight` whose norm's x is v)."""
    if isinstance(op, RmsNormOp):
        return op.x == v
    if isinstance(op, FusedOp) and op.class_.data == C.NORM_WEIGHT.value:
        norm = op.parts()[0]
        args = op.body.block.args
        return isinstance(norm, RmsNormOp) and any(a == v and norm.x == args[i] for i, a in enumerate(op.ins))
    return False


# ---------------------------------------------------------------------------------------------
# the rules' matches


def norm_weight(op: Operation, ctx: FuseContext) -> Match | None:
    """An RMS norm without a weight, then a multiply by a weight vector (a `fwd.weight`)."""
    if not (is_top(op) and isinstance(op, RmsNormOp) and op.weight is None):
        return None
    for u in _users(op.result, ctx):
        if not (_is_kind(u, "mul") and is_top(u)):
            continue
        other = u.b if u.a == op.result else u.a
        if (u.a == op.result) != (u.b == op.result) and isinstance(producer(other), WeightOp):
            return Match(C.NORM_WEIGHT, (op, u))
    return None


def add_norm(op: Operation, ctx: FuseContext) -> Match | None:
    """A sum, then an RMS norm (plain or weighted) of it: `s = a + b; n = rms_norm(s)`."""
    if not (is_top(op) and _is_kind(op, "add")):
        return None
    for u in _users(op.result, ctx):
        if is_top(u) and _norms_as_x(u, op.result):
            return Match(C.ADD_NORM, (op, u))
    return None


def _quantized(op: Operation) -> Operation | None:
    """The producer of the value a top-level `fwd.quantize` reads."""
    if not (is_top(op) and isinstance(op, QuantizeOp)):
        return None
    p = producer(op.x)
    return p if p is not None and is_top(p) else None


def add_norm_quant(op: Operation, ctx: FuseContext) -> Match | None:
    """A fused add+norm, then the quantize of its norm."""
    p = _quantized(op)
    if isinstance(p, FusedOp) and p.class_.data == C.ADD_NORM.value and _yielded_by_last(p, op.operands[0]):
        return Match(C.ADD_NORM_QUANT, (p, op))
    return None


def norm_quant(op: Operation, ctx: FuseContext) -> Match | None:
    """An RMS norm (plain or a fused weighted norm), then the quantize of its result."""
    p = _quantized(op)
    if p is not None and _norm_result(p) == op.operands[0]:
        return Match(C.NORM_QUANT, (p, op))
    return None


def attn_output_quant(op: Operation, ctx: FuseContext) -> Match | None:
    """An attention, then the quantize of its result."""
    p = _quantized(op)
    if isinstance(p, AttentionOp):
        return Match(C.ATTN_OUTPUT_QUANT, (p, op))
    return None


def _glu_mul(s: Operation, ctx: FuseContext | None = None) -> Operation | None:
    """The multiply reading silu `s`'s result as exactly one operand (silu(gate) · up)."""
    for u in _users(s.results[0], ctx):
        if _is_kind(u, "mul") and is_top(u) and (u.a == s.results[0]) != (u.b == s.results[0]):
            return u
    return None


def glu_act_mul(op: Operation, ctx: FuseContext) -> Match | None:
    """silu(gate) · up."""
    if not (is_top(op) and isinstance(op, SiluOp)):
        return None
    mul = _glu_mul(op, ctx)
    return None if mul is None else Match(C.GLU_ACT_MUL, (op, mul))


def merged_gate_up(op: Operation, ctx: FuseContext) -> Match | None:
    """Two projections of one input, the gate and the up of a GLU (`op` the gate)."""
    if not (is_top(op) and isinstance(op, MatmulOp)):
        return None
    # the up is found from the gate's GLU (a handful of users), not among every reader of the input:
    # N projections of one norm cost N^2 checks that way (4000 took 111 s); the first (program order)
    # of the input's readers that is an up of this gate, as before
    partners: list[SSAValue] = []
    for u in _users(op.result, ctx):
        if isinstance(u, SiluOp) and (mul := _glu_mul(u, ctx)) is not None:
            partners += mul.operands
        elif isinstance(u, FusedOp) and u.class_.data == C.GLU_ACT_MUL.value:
            partners += u.ins
    ups = {
        m for v in partners
        if isinstance(m := v.owner, MatmulOp) and m is not op and v == m.result and is_top(m) and m.x == op.x
    }  # fmt: skip
    if not ups:
        return None
    m = in_program_order(list(ups), ctx)[0]
    return Match(C.MERGED_GATE_UP, tuple(in_program_order((op, m), ctx)))


def qk_norm_rope(op: Operation, ctx: FuseContext) -> Match | None:
    """An RMS norm (of q or k, per head), then the rope of its result."""
    n = _norm_result(op) if is_top(op) else None
    if n is None:
        return None
    for u in _users(n, ctx):
        if isinstance(u, RopeOp) and is_top(u) and u.x == n:
            return Match(C.QK_NORM_ROPE, (op, u))
    return None


def relu_sqr(op: Operation, ctx: FuseContext) -> Match | None:
    """relu(x), then its square (`r * r`)."""
    r = _one_result(op) if is_top(op) and isinstance(op, ReluOp) else None
    if r is None:
        return None
    for u in _users(r, ctx):
        if _is_kind(u, "mul") and is_top(u) and u.a == r and u.b == r:
            return Match(C.RELU_SQR, (op, u))
    return None


def _successor(run: Sequence[Operation], ctx: FuseContext, members: set[Operation] | None = None) -> Operation | None:
    """The first op (program order) that carries the run's last result as a chain step and keeps the
    run convex: a user that cannot continue the run (an outside op lies between them) is passed over
    for the next, not the end of the run."""
    group = set(run) if members is None else members
    bounds = (ctx.pos(run[0]), ctx.pos(run[-1]))  # a run is in program order
    for u in _users(run[-1].results[0], ctx):
        if _pointwise(u, ctx) and _carries(run[-1], u) and ctx.convex_with(group, u, bounds):
            return u
    return None


def _predecessor(op: Operation, ctx: FuseContext) -> Operation | None:
    """The op whose chain step `op` is, if any (the first operand's producer on a tie)."""
    key = ("predecessor", op)
    if key not in ctx.memo:
        found = None
        for v in op.operands:
            p = producer(v)
            if p is not None and _pointwise(p, ctx) and _successor([p], ctx) is op:
                found = p
                break
        ctx.memo[key] = found
    return ctx.memo[key]  # type: ignore[return-value]


def _head(op: Operation, ctx: FuseContext) -> Operation:
    """The first op of the run that reaches `op` through predecessors (remembered for every op met)."""
    path = [op]
    while True:
        known = ctx.memo.get(("head", path[-1]))
        if known is not None:
            head = known
            break
        p = _predecessor(path[-1], ctx)
        if p is None:
            head = path[-1]
            break
        path.append(p)
    for o in path:
        ctx.memo[("head", o)] = head
    return head  # type: ignore[return-value]


def _run_from(head: Operation, ctx: FuseContext) -> list[Operation]:
    key = ("run", head)
    if key not in ctx.memo:
        run = [head]
        members = {head}
        while (n := _successor(run, ctx, members)) is not None:
            run.append(n)
            members.add(n)
        ctx.memo[key] = run
    return ctx.memo[key]  # type: ignore[return-value]


def elementwise_chains(op: Operation, ctx: FuseContext) -> Match | None:
    """The maximal run through `op`: each step carries the last one's result as exactly one operand,
    or is a silu of it."""
    if not _pointwise(op, ctx):
        return None
    run = _run_from(_head(op, ctx), ctx)
    if op not in run:
        run = _run_from(op, ctx)
    return Match(C.ELEMENTWISE_CHAINS, tuple(run)) if len(run) >= 2 else None


def _neighbours(m: Operation, size: int, ctx: FuseContext) -> list[Operation]:
    """Pointwise ops of `size` elements that read `m` or that `m` reads (producers first)."""
    near = [producer(v) for v in m.operands] + _users(m.results[0], ctx)
    return [n for n in dict.fromkeys(near) if n is not None and _pointwise(n, ctx) and numel(n.results[0].type) == size]


def _grown(op: Operation, ctx: FuseContext) -> tuple[list[Operation], bool]:
    """The convex group grown greedily from `op`: in rounds, each neighbour of the group (in the
    order of the members, then producers before users) joins when the group stays convex with it.
    Also whether it is the whole connected group (no neighbour was left out)."""
    size = numel(op.results[0].type)
    group = [op]
    members = {op}
    lo = hi = ctx.pos(op)
    candidates: dict[Operation, None] = dict.fromkeys(_neighbours(op, size, ctx))
    while True:
        added = []
        for n in list(candidates):
            if ctx.convex_with(members, n, (lo, hi)):
                group.append(n)
                members.add(n)
                added.append(n)
                lo, hi = min(lo, ctx.pos(n)), max(hi, ctx.pos(n))
        if not added:
            return group, not candidates
        for n in added:
            del candidates[n]
        for m in added:
            for n in _neighbours(m, size, ctx):
                if n not in members:
                    candidates.setdefault(n)


def _component(op: Operation, ctx: FuseContext) -> list[Operation]:
    """The connected, convex group of pointwise ops grown from `op`.

    Where growing takes the whole connected group (so it is convex), growing from any other member
    takes it too (a member outside the group that reads it — the first such in program order — or
    that it reads — the last — always joins): it is found once for all its members."""
    known = ctx.memo.get(("component", op))
    if known is not None:
        return known  # type: ignore[return-value]
    group, whole = _grown(op, ctx)
    for m in group if whole else (op,):
        ctx.memo[("component", m)] = group
    return group


def _joined(group: Collection[Operation], ctx: FuseContext | None = None) -> bool:
    """Whether a member reads two different members (a join) or two members read one (a fork)."""
    members = set(group)
    for m in group:
        if len({producer(v) for v in m.operands} & members) >= 2:
            return True
        if len({u.operation for u in m.results[0].uses} & members) >= 2:
            return True
    return False


def elementwise_regions(op: Operation, ctx: FuseContext) -> Match | None:
    """The maximal connected group of elementwise ops and silus through `op`, if it joins or forks."""
    if not _pointwise(op, ctx):
        return None
    group = _component(op, ctx)
    key = ("joined", id(group))
    if key not in ctx.memo:
        ctx.memo[key] = (group, len(group) >= 2 and _joined(group))  # the group kept: its id stays its own
    if not ctx.memo[key][1]:  # type: ignore[index]
        return None
    return Match(C.ELEMENTWISE_REGIONS, tuple(in_program_order(group, ctx)))


# ---------------------------------------------------------------------------------------------
# the table


@dataclass(frozen=True)
class ChipRule:
    """A named rule of the shared table (the seed's `ChipRule`).

    `builds`: the classes it forms; `apply(root, ctx)`: the stages it fuses with `root` (a `Match`),
    or None."""

    name: str
    builds: tuple[ClassId, ...]
    apply: Callable[[Operation, FuseContext], Match | None]


RULES: tuple[ChipRule, ...] = (
    ChipRule("norm_weight", (C.NORM_WEIGHT,), norm_weight),
    ChipRule("add_norm", (C.ADD_NORM,), add_norm),
    ChipRule("add_norm_quant", (C.ADD_NORM_QUANT,), add_norm_quant),
    ChipRule("norm_quant", (C.NORM_QUANT,), norm_quant),
    ChipRule("attn_output_quant", (C.ATTN_OUTPUT_QUANT,), attn_output_quant),
    ChipRule("glu_act_mul", (C.GLU_ACT_MUL,), glu_act_mul),
    ChipRule("merged_gate_up", (C.MERGED_GATE_UP,), merged_gate_up),
    ChipRule("qk_norm_rope", (C.QK_NORM_ROPE,), qk_norm_rope),
    ChipRule("relu_sqr", (C.RELU_SQR,), relu_sqr),
    ChipRule("elementwise_regions", (C.ELEMENTWISE_REGIONS,), elementwise_regions),
    ChipRule("elementwise_chains", (C.ELEMENTWISE_CHAINS,), elementwise_chains),
)
"""The shared table, in the shared order (DESIGN.md §5)."""


def rule_named(name: str, table: Sequence[ChipRule] = RULES) -> ChipRule:
    """The rule of `table` called `name`. Raises ValueError("the shared table runs no rule `x`")."""
    for r in table:
        if r.name == name:
            return r
    raise ValueError(f"the shared table runs no rule `{name}`")


def compose(positions: Sequence[tuple[Position, object]], table: Sequence[ChipRule] = RULES) -> tuple[ChipRule, ...]:
    """The table with each named rule moved to its position; every rule runs once.

    `positions`: a shim's `rules()`, `(Position.BEFORE/AFTER(anchor), rule)` with `rule` a name or a
    `ChipRule`, applied in the given order (two rules placed BEFORE or AFTER one anchor keep their
    order). Raises ValueError for an unknown rule or anchor, or a rule placed twice."""
    names = [r if isinstance(r, str) else r.name for _, r in positions]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        raise ValueError(f"a shim places a rule twice: {names} (each rule runs once)")
    moved = {n: rule_named(n, table) for n in names}
    order = [r for r in table if r.name not in moved]
    after_count: dict[str, int] = {}
    for (pos, _), name in zip(positions, names):
        idx = next((i for i, r in enumerate(order) if r.name == pos.anchor), None)
        if idx is None:
            raise ValueError(f"rule `{name}` is placed {pos.where} `{pos.anchor}`, which the table does not run")
        if pos.where == "after":
            idx += 1 + after_count.get(pos.anchor, 0)
            after_count[pos.anchor] = after_count.get(pos.anchor, 0) + 1
        order.insert(idx, moved[name])
    return tuple(order)
