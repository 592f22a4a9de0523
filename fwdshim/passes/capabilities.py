"""The lane's capability manifest: what the forward answers for every fused kernel class under every
numerics, why it refuses each class it refuses, and the fusion rules it runs.

Source: the seed's `supports` (`ForwardShim.supports`: 9 classes native, 3 more under int8-act, 22
refused with a reason, the rest Decompose — split into their parts, each judged by `fits`) and the
shared rule table in the forward's order (`rules.compose(shim.rules())`). Printed by
`fwdshim-opt --print-capabilities` (a table; with `--json`, JSON). The manifest holds the classes, not
the primitive ops: a primitive's verdict depends on its properties (`kernel_refusal`, docs/passes.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from fwdshim.classes import NUMERICS, ClassId
from fwdshim.passes.rules import RULES, compose
from fwdshim.shim.contract import forward_shim
from fwdshim.shim.forward import REFUSED_CLASSES


@dataclass(frozen=True)
class Capability:
    """The forward's answer for one class.

    `cls`: the class's name as `fwd.fused` spells it; `support`: numerics → `native`, `decompose` or
    `refuse`; `branch`: the `supports` branch that refuses it (`S01`–`S13`), else ""; `reason`: that
    branch's reason, else ""; `rule`: the fusion rule that forms the class, else "" (a class no rule
    forms is native only as the lowering's own kernel: the GEMV, the graph, the mixture's kernels)."""

    cls: str
    support: dict[str, str]
    branch: str = ""
    reason: str = ""
    rule: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"class": self.cls, "support": dict(self.support), "branch": self.branch, "reason": self.reason, "rule": self.rule}


def capabilities() -> list[Capability]:
    """Every class of the seed (86, in its order) with the forward's `supports` answer under each numerics
    (`classes.NUMERICS`), the refusing branch and reason, and the rule that forms it."""
    shims = {n: forward_shim(n) for n in NUMERICS}
    formed = {c: r.name for r in RULES for c in r.builds}
    out = []
    for cls in ClassId:
        support = {n: shim.supports(cls).kind.lower() for n, shim in shims.items()}
        branch = REFUSED_CLASSES.get(cls)
        out.append(Capability(
            cls.value, support, branch.id if branch else "", branch.reason if branch else "", formed.get(cls, ""),
        ))  # fmt: skip
    return out


def rule_order() -> dict[str, list[str]]:
    """Numerics → the fusion rules `fwd-fuse` runs, in order (each to a fixed point); every rule may be
    left out by name: `fwd-fuse{disable=…}`, `forward-shim{disable=…}`."""
    return {n: [r.name for r in compose(forward_shim(n).rules())] for n in NUMERICS}


def capabilities_json() -> dict[str, object]:
    """The manifest as JSON data: `{"shim", "numerics", "classes": [Capability.as_dict()…], "rules"}`."""
    return {
        "shim": forward_shim(NUMERICS[0]).name().split(":")[0],
        "numerics": list(NUMERICS),
        "classes": [c.as_dict() for c in capabilities()],
        "rules": rule_order(),
    }


def capabilities_table() -> str:
    """The manifest as `//` lines: one row a class (its answer under each numerics, the rule that forms
    it, the refusal's branch and reason), then the rules in order, then the counts."""
    caps = capabilities()
    width = max(len(c.cls) for c in caps)
    cols = [max(len(n), len("decompose")) for n in NUMERICS]
    rule_w = max(len(r.name) for r in RULES)
    head = f"{'class':<{width}}  " + "  ".join(f"{n:<{w}}" for n, w in zip(NUMERICS, cols)) + f"  {'rule':<{rule_w}}  refused because"
    lines = [f"// capabilities of {forward_shim(NUMERICS[0]).name().split(':')[0]}: the seed's supports() for every class",
             "// native: one kernel computes it; decompose: split into its parts, each judged by fits(); refuse: never",
             "// " + head]  # fmt: skip
    for c in caps:
        why = f"{c.branch} {c.reason}" if c.branch else ""
        row = f"{c.cls:<{width}}  " + "  ".join(f"{c.support[n]:<{w}}" for n, w in zip(NUMERICS, cols)) + f"  {c.rule or '-':<{rule_w}}  {why}"
        lines.append("// " + row.rstrip())
    lines.append("// fusion rules, in the order fwd-fuse runs them (fwd-fuse{disable=rule,...} leaves some out):")
    orders = rule_order()
    if len({tuple(o) for o in orders.values()}) == 1:  # one order under every numerics: one line
        orders = {"every numerics": next(iter(orders.values()))}
    for n, order in orders.items():
        lines.append(f"//   {n}: {', '.join(order)}")
    for n in NUMERICS:
        kinds = [c.support[n] for c in caps]
        lines.append(f"// {n}: {kinds.count('native')} native, {kinds.count('decompose')} decompose, {kinds.count('refuse')} refuse")
    return "\n".join(lines) + "\n"
