"""The generated parts of `docs/passes.md`: each pass with its options (from the pass classes, their
docstrings and their fields' docstrings), and the refusal catalogue — every refusing branch of the
shim with its id, the seed's line it mirrors, its reason and a FileCheck case that triggers it (the
first CHECK line of `filecheck_tests/fwd-legalize/` naming the reason, so every example runs in lit).

The hand-written parts of the file stay as they are: only the text between `<!-- generated: NAME -->`
and `<!-- end: NAME -->` is rewritten.

    python -m fwdshim.tools.passes_doc            # rewrites the generated parts of docs/passes.md
    python -m fwdshim.tools.passes_doc --check    # exit 1 when they are stale

`tests/tools/test_docs.py` fails when they are stale."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "passes.md"
CASES = ROOT / "filecheck_tests" / "fwd-legalize"

_FAMILIES = (
    ("KERNEL_REFUSAL", "`kernel_refusal`: a property of a primitive op that its kernel does not compute"),
    ("FITS", "`fits`: how a stage reads and writes, or how a fused op's parts fit its one kernel"),
    ("SUPPORTS", "`supports`: a fused kernel class the lane refuses outright"),
    ("BEYOND_SEED", "beyond the seed: where fwdshim's kernels compute less than the seed's lane"),
)


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring under each annotated field of `cls` (and its bases), by field name."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            tree = ast.parse(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for a, b in zip(body, body[1:]):
            if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
                docs[a.target.id] = " ".join(str(b.value.value).split())  # type: ignore[attr-defined]
    return docs


def _default(f: dataclasses.Field) -> str:
    value = f.default
    if value is None and "bool" in str(f.type):  # an unset flag is off (`fwd-legalize{explain}` sets it)
        return "false"
    if value is dataclasses.MISSING or value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return str(value)


def passes_section() -> str:
    """Each pass: its name, what it does (the class docstring, then its module's first paragraph) and
    a table of its options (the `Tuning` options of `fwd-lower-numba` in one row: `--help` lists them)."""
    from fwdshim.codegen.tuning import Tuning
    from fwdshim.passes import available_passes

    tuning = {f.name for f in dataclasses.fields(Tuning)}
    out = []
    for name, factory in available_passes().items():
        cls = factory()
        module = sys.modules[cls.__module__]
        summary = " ".join((cls.__doc__ or "").split())
        intro = " ".join((module.__doc__ or "").split("\n\n")[0].split())
        out += [f"### `{name}`", "", f"{summary}", "", f"{intro}", "", f"Python: `{cls.__module__}.{cls.__name__}`.", ""]
        fields = [f for f in dataclasses.fields(cls) if f.init]
        docs = attribute_docs(cls)
        own = [f for f in fields if f.name not in tuning]
        tuned = [f for f in fields if f.name in tuning]
        if not own and not tuned:
            out += ["No options.", ""]
            continue
        out += ["| option | default | what it does |", "|---|---|---|"]
        for f in own:
            out.append(f"| `{f.name}` | `{_default(f)}` | {docs.get(f.name, '')} |")
        if tuned:
            out.append(f"| `<tuning>` ({len(tuned)}) | the measured winners | the back end's launch choices (`codegen.tuning.Tuning`): `fwdshim-opt --help` lists each |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _first_case(reason: str) -> tuple[str, int, str] | None:
    """(file, line, the CHECK line's text) of the first FileCheck case whose CHECK names `reason`
    (its `{}` placeholders matching anything), or None."""
    parts = [re.escape(p) for p in reason.split("{}")]
    pattern = re.compile(".*?".join(parts))
    for path in sorted(CASES.glob("*.mlir")):
        for i, line in enumerate(path.read_text().splitlines(), start=1):
            if re.match(r"^// [A-Z][A-Z0-9_-]*(-NEXT|-SAME)?: ", line) and ("error: " in line or "fwd.refused" in line):
                if pattern.search(line):
                    return path.name, i, line
    return None


def catalogue_section() -> str:
    """The refusal catalogue: one table a family of branches, each row its id, the seed line, the
    reason (`{}`: filled per op) and the FileCheck case that triggers it."""
    from fwdshim.shim import forward

    out = []
    for family, meaning in _FAMILIES:
        branches = getattr(forward, family)
        out += [f"#### {meaning}", "", "| id | seed line | reason | a case |", "|---|---|---|---|"]
        for b in branches:
            found = _first_case(b.reason)
            case = f"[`{found[0]}:{found[1]}`](../filecheck_tests/fwd-legalize/{found[0]}#L{found[1]})" if found else "—"
            line = str(b.seed_line) if b.seed_line else "—"
            out.append(f"| {b.id} | {line} | {b.reason.replace('|', '/')} | {case} |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


SECTIONS = {"passes": passes_section, "refusals": catalogue_section}


def rendered(text: str) -> str:
    """`text` (docs/passes.md) with every generated section rewritten."""
    for name, make in SECTIONS.items():
        begin, end = f"<!-- generated: {name} -->\n", f"<!-- end: {name} -->"
        head, sep, rest = text.partition(begin)
        if not sep:
            raise SystemExit(f"{DOC}: no `{begin.strip()}` line")
        _, sep2, tail = rest.partition(end)
        if not sep2:
            raise SystemExit(f"{DOC}: no `{end}` line")
        text = head + begin + make() + end + tail
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fwdshim.tools.passes_doc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/passes.md's generated parts are stale")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    new = rendered(text)
    if args.check:
        if new != text:
            print(f"{DOC} is stale: run `python -m fwdshim.tools.passes_doc`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
