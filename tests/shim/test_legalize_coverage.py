"""Every refusing branch of the seed (and beyond it) is checked by a FileCheck case of
filecheck_tests/fwd-legalize: its reason appears in a CHECK line as an error or a `fwd.refused` mark."""

from __future__ import annotations

import re
from pathlib import Path

from fwdshim.shim.forward import ALL_BRANCHES, BEYOND_SEED, FITS, KERNEL_REFUSAL, SUPPORTS

ROOT = Path(__file__).resolve().parents[2] / "filecheck_tests" / "fwd-legalize"
CHECK = re.compile(r"^// [A-Z][A-Z0-9_-]*(-NEXT|-SAME)?: (.*)$")


def _escaped(text: str) -> str:
    """The printer's form of a string attribute: non-ASCII bytes as `\\XX`."""
    return "".join(c if ord(c) < 128 else "".join(f"\\{b:02X}" for b in c.encode()) for c in text)


def checked_reasons() -> list[str]:
    out = []
    for path in sorted(ROOT.glob("*.mlir")):
        for line in path.read_text().splitlines():
            m = CHECK.match(line)
            if m and ("error: " in m.group(2) or "fwd.refused" in m.group(2)):
                out.append(m.group(2))
    return out


def covered(branch) -> bool:
    parts = [p for p in branch.reason.split("{}") if p]
    return any(all(p in line or _escaped(p) in line for p in parts) for line in checked_reasons())


def test_every_branch_has_a_filecheck_case() -> None:
    missing = [b.id for b in ALL_BRANCHES if not covered(b)]
    assert missing == []
    assert (len(KERNEL_REFUSAL), len(FITS), len(SUPPORTS), len(BEYOND_SEED)) == (23, 8, 13, 11)


def test_every_no_kernel_op_and_refused_class_has_a_case() -> None:
    from fwdshim.dialects.fwd import REFUSED_PRIMITIVES
    from fwdshim.shim.forward import REFUSED_CLASSES

    text = "\n".join(p.read_text() for p in ROOT.glob("*.mlir"))
    for op in (*REFUSED_PRIMITIVES,):
        assert re.search(rf"= {re.escape(op.name)} ", text), op.name
    for cls in REFUSED_CLASSES:
        assert re.search(rf"fwd\.fused {cls.value} covers", text), cls.value
    assert len(REFUSED_CLASSES) == 22
