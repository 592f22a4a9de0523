"""A refusal as data, and the verdict rows of the legality report.

One `Refusal` is printed four ways — the `strict` error (`file:line:col: error: <reason>`), the `mark`
attribute (`fwd.refused = "<reason>"`), a row of the `--explain` table and an entry of the
`--report-json` file — so the four never disagree.

`SeedBranch` names one refusing branch of the seed (`forward_shim.rs`): `K..` of `kernel_refusal`,
`F..` of `fits`, `S..` of `supports`, and `B..` for the branches beyond the seed. Tests assert that
every branch is hit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from xdsl.ir import Operation

from fwdshim.diagnostics import where


@dataclass(frozen=True)
class SeedBranch:
    """One refusing branch: `id` (`K08`), its reason, and the seed line it mirrors (0: beyond the seed).

    A reason may hold `{}` placeholders filled per op (`B02`'s GGML type, `F02`'s stage name)."""

    id: str
    reason: str
    seed_line: int = 0

    def why(self, *args: object) -> str:
        """The reason with its placeholders filled."""
        return self.reason.format(*args) if args else self.reason


@dataclass(frozen=True)
class Refusal:
    """Why the forward does not run one stage: `op_name` (`fwd.attention`), `location`
    (`file:line:col`, else `<unknown>` and the result's name), `reason` (the seed's words) and
    `branch` (a `SeedBranch.id`)."""

    op_name: str
    location: str
    reason: str
    branch: str

    @staticmethod
    def of(op: Operation, branch: SeedBranch, reason: str | None = None) -> "Refusal":
        """The refusal of `op` by `branch` (its reason, or `reason` where the branch's is formatted)."""
        return Refusal(op.name, where(op), branch.reason if reason is None else reason, branch.id)

    def error_line(self) -> str:
        """`file:line:col: error: <reason>` — what `strict` reports."""
        return f"{self.location}: error: {self.reason}"


NATIVE = "native kernel"
DECOMPOSED = "decomposed"
REFUSED = "refused"
REMARK = "remark"

REFUSED_ATTR = "fwd.refused"
"""The `mark` mode's attribute on a refused op: its reason."""
FUSE_DISABLED_ATTR = "fwd.fuse_disabled"
"""The module attribute `fwd-fuse{disable=…}` leaves: the rules it did not run (an array of names), so
the report says so of the stages they would have taken."""
REMARK_ATTR = "fwd.remark"
"""The fusion pass's attribute on an op whose rule matched a class the shim refuses: `<rule>: <reason>`."""


def disabled_rules(module: Operation) -> tuple[str, ...]:
    """The fusion rules `fwd-fuse` last ran without on `module` (its `fwd.fuse_disabled`), or ()."""
    from xdsl.dialects.builtin import ArrayAttr, StringAttr

    a = module.attributes.get(FUSE_DISABLED_ATTR)
    if not isinstance(a, ArrayAttr):
        return ()
    return tuple(x.data for x in a.data if isinstance(x, StringAttr))


def mark_text(op, name: str) -> str | None:
    """The text of `op`'s `name` mark (`REFUSED_ATTR`, `REMARK_ATTR`), or None (no mark, or one that is
    no string). xDSL prints a non-ASCII character of a string as escaped bytes (the seed's reasons
    hold `—`) and its stock parser reads them back as a `BytesAttr`: read as UTF-8 text too."""
    from xdsl.dialects.builtin import BytesAttr, StringAttr

    a = op.attributes.get(name)
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, BytesAttr):
        try:
            return a.data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


@dataclass(frozen=True)
class Verdict:
    """One row of the legality report.

    `stage`: the stage number (-1 for a remark row); `verdict`: one of NATIVE, DECOMPOSED, REFUSED,
    REMARK; `detail`: the fused class (`add_norm`), `primitive`, the class a part was decomposed
    from, the refusal's reason, or the fusion remark; `branch`: the refusal's `SeedBranch.id` or ""."""

    stage: int
    op_name: str
    location: str
    verdict: str
    detail: str
    branch: str = ""
    covers: tuple[int, ...] = ()
    """A fused op's `covers`: the stage numbers its parts had before fusion (`stage` is the number
    after fusion); empty for any other row."""

    @staticmethod
    def refused(stage: int, r: Refusal) -> "Verdict":
        return Verdict(stage, r.op_name, r.location, REFUSED, r.reason, r.branch)

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["covers"] = list(self.covers)
        return d
