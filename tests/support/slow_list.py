"""Write tests/slow_tests.txt from a pytest `--durations=0` log: every test whose setup, call and
teardown took `--over` seconds or more (default 1.5) is listed, as `<module file>::<test id>`.

    pytest -q -n 2 --durations=0 -p no:cacheprovider tests > durations.log
    python tests/support/slow_list.py durations.log          # rewrites tests/slow_tests.txt

The list is read by tests/conftest.py, which marks each listed test `slow`: the default run leaves them
out, CI's second command (`pytest -q -n auto -m slow`) runs them. A listed test that no longer exists
is an error when its module is collected."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LIST = Path(__file__).resolve().parents[1] / "slow_tests.txt"
HEADER = """\
# Tests marked `slow` (tests/conftest.py): left out of the default run, run by CI's second command.
# Each took {over} s or more (setup, call and teardown) in `pytest -n 2 --durations=0` on the 2-core
# machine ({note}). Written by `python tests/support/slow_list.py DURATIONS.log`; one
# `<module file>::<test id>` a line, the module's file without its folder.
"""


def key(nodeid: str) -> str:
    """`tests/codegen/test_merge.py::t[p]` -> `test_merge.py::t[p]` (a test keeps its entry when moved)."""
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).name}::{rest}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--over", type=float, default=1.5)
    ap.add_argument("--note", default="measured under load")
    args = ap.parse_args(argv)
    times: dict[str, float] = defaultdict(float)
    for line in args.log.read_text().splitlines():
        m = re.match(r"^([0-9.]+)s (?:call|setup|teardown)\s+(.+?)\s*$", line)
        if m:
            times[key(m[2])] += float(m[1])
    slow = sorted(k for k, t in times.items() if t >= args.over)
    LIST.write_text(HEADER.format(over=args.over, note=args.note) + "".join(f"{k}\n" for k in slow))
    print(f"{len(slow)} of {len(times)} timed tests listed in {LIST}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
