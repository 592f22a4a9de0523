"""`fwdshim-opt` on bad input, run as a user runs it (a subprocess): one located error line on stderr,
exit status 1, never a Python traceback. Also `--help` and the main job on the bundled examples."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fwdshim.passes import available_passes
from fwdshim.tools import write_whole

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _tool(name: str) -> list[str]:
    """The console script installed beside this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return [str(here)]
    found = shutil.which(name)
    assert found is not None, f"`{name}` is not installed: pip install -e ."
    return [found]


def opt(*args: str, stdin: str | None = None, tool: str = "fwdshim-opt") -> subprocess.CompletedProcess:
    return subprocess.run([*_tool(tool), *args], input=stdin, capture_output=True, text=True, timeout=120)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


FUNC = "func.func @f(%x: tensor<576xf32>, %y: tensor<192xf32>) -> tensor<576xf32> {{\n{body}\n  func.return %s : tensor<576xf32>\n}}\n"

BAD = {
    # name: (body of @f, line, column, message)
    "malformed": ("  %s = fwd.silu %x tensor<576xf32> -> tensor<576xf32>", 2, 20, "Expected ':'"),
    "unknown op": ("  %s = fwd.bogus %x : tensor<576xf32> -> tensor<576xf32>", 2, 8, "Operation fwd.bogus is not registered"),
    "unknown op generic": ('  %s = "fwd.bogus"(%x) : (tensor<576xf32>) -> tensor<576xf32>', 2, 8, "Operation fwd.bogus is not registered"),
    "wrong property value": (
        "  %s = fwd.elementwise bogus %x, %x : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>",
        2, 24, "unknown kind `bogus` (expected one of: add, sub, mul, div, max, min)",
    ),
    "wrong property type": (
        "  %a = fwd.rope %x, %x hd 1.5 half 32 rows 1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>\n  %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>",
        2, 27, "Expected integer literal",
    ),
    "missing property": (
        "  %a = fwd.rope %x, %x hd 64 rows 1 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>\n  %s = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>",
        2, 30, "Expected 'half'",
    ),
    "missing property generic": (
        '  %s = "fwd.elementwise"(%x, %x) : (tensor<576xf32>, tensor<576xf32>) -> tensor<576xf32>',
        2, 3, "property 'kind' expected in operation 'fwd.elementwise'",
    ),
    "shape mismatch": (
        "  %s = fwd.elementwise add %x, %y : tensor<576xf32>, tensor<192xf32> -> tensor<576xf32>",
        2, 3, "elementwise operands and result agree in shape unless `row`",
    ),
    "bad weights type": (
        '  %w = fwd.weight "blk.0.attn_q.weight" : !fwd.weights<576, q8_0>\n  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>',
        2, 56, "weights have rank 2 or 3",
    ),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_one_located_error(tmp_path, case):
    body, line, col, message = BAD[case]
    path = write(tmp_path, "bad.mlir", FUNC.format(body=body))
    r = opt(str(path))
    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    first = r.stderr.splitlines()[0]
    assert first == f"{path}:{line}:{col}: error: {message}"


REFUSED_GELU = "  %z = fwd.gelu %x, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>"
UNVERIFIED_ADD = "  %y = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<32xf32> -> tensor<64xf32>"


def test_a_refusal_prints_its_source_line_and_a_caret(tmp_path):
    """A refused op prints as a parse error does: the located reason (the seed's words, which name
    no op), then the source line and a `^` under the op's column (it was the first line alone)."""
    path = write(tmp_path, "g.mlir", "func.func @f(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {\n"
                 f"{REFUSED_GELU}\n  func.return %z : tensor<64xf32>\n}}\n")  # fmt: skip
    r = opt(str(path), "-p", "fwd-legalize")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"{path}:2:3: error: this lane has no kernel for the op (fwd.gelu)\n{REFUSED_GELU}\n  ^\n"
    piped = opt("-", "-p", "fwd-legalize", stdin=path.read_text())  # stdin: its lines are kept as read
    assert piped.stderr == r.stderr.replace(str(path), "stdin")


def test_a_verify_error_prints_its_source_line_and_a_caret(tmp_path):
    """A parsed op that fails to verify: the same three lines, the column counted in the whole file
    under `--split-input-file` (the line is the chunk's own)."""
    text = f"func.func @f(%a: tensor<64xf32>, %b: tensor<32xf32>) -> tensor<64xf32> {{\n{UNVERIFIED_ADD}\n  func.return %y : tensor<64xf32>\n}}\n"
    path = write(tmp_path, "v.mlir", text)
    r = opt(str(path))
    assert r.returncode == 1 and r.stdout == ""
    reason = "error: elementwise operands and result agree in shape unless `row`"
    assert r.stderr == f"{path}:2:3: {reason}\n{UNVERIFIED_ADD}\n  ^\n"
    split = write(tmp_path, "s.mlir", "// first chunk\n// -----\n" + text)
    r = opt(str(split), "--split-input-file")
    assert r.returncode == 1 and r.stderr == f"{split}:4:3: {reason}\n{UNVERIFIED_ADD}\n  ^\n"


def test_an_error_at_a_location_of_another_file_stays_one_line(tmp_path):
    """A location spelled in the input (`loc("elsewhere.mlir":1:1)`) names a file this run did not
    read: no source line is made up for it."""
    line = UNVERIFIED_ADD + ' loc("elsewhere.mlir":9:5)'
    path = write(tmp_path, "e.mlir", f"func.func @f(%a: tensor<64xf32>, %b: tensor<32xf32>) -> tensor<64xf32> {{\n{line}\n"
                 "  func.return %y : tensor<64xf32>\n}\n")  # fmt: skip
    r = opt(str(path))
    assert r.returncode == 1
    assert r.stderr == "elsewhere.mlir:9:5: error: elementwise operands and result agree in shape unless `row`\n"


def test_located_verify_error_in_a_later_split_chunk(tmp_path):
    ok = FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>")
    bad = FUNC.format(body="  %s = fwd.silu %y : tensor<192xf32> -> tensor<576xf32>")
    path = write(tmp_path, "split.mlir", ok + "\n// -----\n" + bad)
    r = opt(str(path), "--split-input-file")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    bad_line = (ok + "\n// -----\n").count("\n") + 2
    assert r.stderr.splitlines()[0] == f"{path}:{bad_line}:3: error: fwd.silu result has 576 values for 192 inputs"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["no/such/file.mlir"], "fwdshim-opt: error: no/such/file.mlir: no such file or directory"),
        (["."], "fwdshim-opt: error: .: is a directory"),
    ],
)
def test_unreadable_input_is_one_line(args, expected):
    r = opt(*args)
    assert r.returncode == 1
    assert r.stderr.strip() == expected


def test_an_output_path_ending_in_a_separator_names_a_directory(tmp_path):
    """`-o nodir/` (no such directory) had written a file named `nodir`; `--report-json rep/` said
    "is a directory" of a directory that is not there; `-o adir` (an existing directory) did not name
    the option. Each is one line naming the option, nothing written; `write_whole` itself refuses such
    a path."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    (tmp_path / "adir").mkdir()
    for flag in ("-o", "--report-json"):
        gone, there = f"{tmp_path / 'nodir'}/", f"{tmp_path / 'adir'}/"
        r = opt(str(path), flag, gone, *(("-o", str(tmp_path / "x.mlir")) if flag != "-o" else ()))
        assert r.returncode == 1 and r.stdout == ""
        assert r.stderr == f"fwdshim-opt: error: {flag} {gone}: names a directory (it ends in '/'); give a file name\n"
        r = opt(str(path), flag, there)
        assert r.stderr == f"fwdshim-opt: error: {flag} {there}: is a directory; give a file name\n"
        r = opt(str(path), flag, there.rstrip("/"))  # an existing directory without the separator names the option too
        assert r.returncode == 1 and r.stderr == f"fwdshim-opt: error: {flag} {there.rstrip('/')}: is a directory; give a file name\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "ok.mlir"]
    with pytest.raises(IsADirectoryError, match="names a directory"):
        write_whole(f"{tmp_path / 'nodir'}/", lambda f: f.write(b"x"))
    assert not (tmp_path / "nodir").exists()


def test_not_utf8_is_one_line(tmp_path):
    path = tmp_path / "binary.mlir"
    path.write_bytes(b"\x00\x01\xff garbage")
    r = opt(str(path))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"fwdshim-opt: error: {path}:1:3: not UTF-8 text (invalid start byte at byte 2)"
    path.write_bytes(b"func.func @f() {\n  // caf\xe9\n  func.return\n}\n")  # located: line 2, column 9
    r = opt(str(path))
    assert r.stderr.strip() == f"fwdshim-opt: error: {path}:2:9: not UTF-8 text (invalid continuation byte at byte 25)"
    gguf_file = tmp_path / "m.gguf"  # a model given as IR: says what it is and what reads it
    gguf_file.write_bytes(b"GGUF" + bytes(range(256)) * 4)
    r = opt(str(gguf_file))
    assert r.returncode == 1 and r.stderr.strip() == (
        f"fwdshim-opt: error: {gguf_file}: a GGUF model, not IR (`fwdshim import {gguf_file} -o step.mlir` writes its decode step as IR)"
    )


def test_unknown_pass_is_one_line(tmp_path):
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-p", "no-such-pass")
    assert r.returncode == 1
    assert r.stderr.strip() == "fwdshim-opt: error: -p: no pass `no-such-pass` (fwdshim-opt --help lists the passes)"
    r = opt(str(path), "-p", "forward-shim,nope{a=1},zz")  # was xDSL's Python list: ['nope', 'zz']
    assert r.stderr.strip() == "fwdshim-opt: error: -p: no passes `nope`, `zz` (fwdshim-opt --help lists the passes)"


@pytest.mark.parametrize(
    "args, flags, instead",
    [
        (["-p", "forward-shim", "-p", "fwd-fuse"], "-p/--passes", "one pipeline, its passes joined by commas (-p 'a,b')"),
        (["-t", "mlir", "--target", "numba"], "-t/--target", "one target"),
        (["-o", "{tmp}/a.mlir", "--output-file", "{tmp}/b.mlir"], "-o/--output-file", "one output file"),
        (["--report-json", "{tmp}/a.json", "--report-json", "-"], "--report-json", "one report file"),
    ],
)
def test_a_flag_given_twice_is_one_line(tmp_path, args, flags, instead):
    """-p, -t, -o and --report-json are taken once (argparse kept the last silently: `-p a -p b` ran b
    alone, `-o a -o b` wrote b); nothing is written."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), *[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"fwdshim-opt: error: {flags} given twice: {instead}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.mlir"]


@pytest.mark.parametrize(
    "pipeline, key, pass_text",
    [
        ("fwd-legalize{explain=true explain=false}", "explain", "fwd-legalize{explain=true explain=false}"),
        ("fwd-fuse,fwd-legalize{mode=mark numerics=int8-act mode=strict}", "mode", "fwd-legalize{mode=mark numerics=int8-act mode=strict}"),
    ],
)
def test_an_option_given_twice_is_one_line(tmp_path, pipeline, key, pass_text):
    """As mlir-opt: an option may occur once per pass (xDSL kept the last silently)."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-p", pipeline)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == f"fwdshim-opt: error: -p: option `{key}` given twice to `fwd-legalize` ({pass_text})"


@pytest.mark.parametrize(
    "pipeline, name, bad, known",
    [
        ("forward-shim{bogus=1}", "forward-shim", "`bogus`", "numerics, mode, explain, disable"),
        ("fwd-fuse,fwd-legalize{mode=mark colour=red}", "fwd-legalize", "`colour`", None),
    ],
)
def test_an_unknown_option_names_its_pass(tmp_path, pipeline, name, bad, known):
    """xDSL says which arguments it did not expect; the error names the pass they were given to."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-p", pipeline)
    assert r.returncode == 1 and r.stdout == ""
    line = r.stderr.strip()
    assert line.startswith(f"fwdshim-opt: error: -p: `{name}` has no option {bad} (its options: "), line
    assert known is None or line.endswith(f"(its options: {known})"), line


@pytest.mark.parametrize("flag", ["--parsing-diagnostics", "--verify-diagnostics"])
def test_a_diagnostics_flag_does_not_stop_the_chunks_at_the_other_kind(tmp_path, flag):
    """Under --split-input-file, `--parsing-diagnostics` prints parse errors on stdout and
    `--verify-diagnostics` verify errors; an error of the other kind goes to stderr, the chunks after
    it still run, and the run fails (it stopped at the first error of the other kind)."""
    verify = FUNC.format(body="  %s = fwd.silu %y : tensor<192xf32> -> tensor<576xf32>")
    parse = '%w = fwd.weight "blk" : !fwd.weights<576, q8_0>\n'
    ok = FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>")
    path = write(tmp_path, "split.mlir", "\n// -----\n".join([verify, parse, ok]))
    r = opt(str(path), "--split-input-file", flag)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "func.func @f(%x: tensor<576xf32>" in r.stdout  # the last chunk ran
    mine, other = ("weights have rank 2 or 3", "fwd.silu result has 576 values") if flag == "--parsing-diagnostics" else (
        "fwd.silu result has 576 values", "weights have rank 2 or 3")  # fmt: skip
    assert mine in r.stdout and mine not in r.stderr
    assert other in r.stderr and other not in r.stdout
    both = opt(str(path), "--split-input-file", "--parsing-diagnostics", "--verify-diagnostics")
    assert both.returncode == 0 and both.stderr == "" and mine in both.stdout and other in both.stdout


@pytest.mark.parametrize("split", [False, True])
def test_parsing_diagnostics_are_written_as_every_other_diagnostic(tmp_path, split):
    """`--parsing-diagnostics` prints a parse error as `file:line:col: error: reason`, the line and a
    caret, like every other diagnostic (xDSL's own form put the message last, on a line of its own)."""
    path = write(tmp_path, "bad.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32"))
    r = opt(str(path), "--parsing-diagnostics", *(["--split-input-file"] if split else []))
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+:\d+: error: Expected '>' after builtin parameter list", lines[0]), lines
    assert lines[2].strip().startswith("^")


@pytest.mark.parametrize(
    "args, expected",
    [
        (["-p", "fwd-legalize{explain=maybe}"], "-p: option `explain` of `fwd-legalize` takes true or false, not `maybe`"),
        # the option of the type xDSL could not take, not the first whose value reads the same (it blamed `mode`)
        (["-p", "fwd-legalize{mode=mark explain=mark}"], "-p: option `explain` of `fwd-legalize` takes true or false, not `mark`"),
        (["-p", "forward-shim{numerics=3}"], "-p: option `numerics` of `forward-shim` takes dequant, int8-act or two-pass-int8, not `3`"),
        (["-p", "fwd-fuse,fwd-fuse{order=1.5}"], "-p: option `order` of `fwd-fuse` takes shim or shared, not `1.5`"),
        (["-t", "numba{plan_only=maybe}"], "-t: option `plan_only` of `numba` takes true or false, not `maybe`"),
        (["-t", "numba{bogus=1}"], "-t: `numba` has no option `bogus` (its options: plan_only, the launch "
         "tuning's options (`fwdshim-opt --help` lists them))"),
        # a misspelled tuning option: the closest name
        (["-t", "numba{merg=false}"], "-t: `numba` has no option `merg` (its options: plan_only, the launch "
         "tuning's options (`fwdshim-opt --help` lists them); did you mean `merge`?)"),
        # a hyphenated name, as typed (xDSL reads it as `foo_bar` and said so in its own words)
        (["-p", "fwd-fuse{foo-bar=1}"], "-p: `fwd-fuse` has no option `foo-bar` (its options: numerics, order, disable)"),
        # a list of booleans (xDSL says `given (True, False)`): named as written; a target has no pipeline to split
        (["-t", "numba{plan_only=true,false}"], "-t: option `plan_only` of `numba` takes one value, not the list `true,false`"),
        # no pass name after the comma: no hint that the comma meant one
        (["-p", "fwd-fuse{numerics=1,2}"], "-p: option `numerics` of `fwd-fuse` takes one value, not the list `1,2`"),
        (["-p", "forward-shim{numerics=int8-act,fwd-fuse}"], "-p: option `numerics` of `forward-shim` takes one value, "
         "not the list `int8-act,fwd-fuse` (a comma inside the braces separates values; the pipeline's passes are "
         "separated by commas after the `}`: `forward-shim{numerics=int8-act},fwd-fuse`)"),
    ],
)
def test_an_option_of_the_wrong_type_names_its_pass_and_values(tmp_path, args, expected):
    """xDSL's `Incompatible types: given ('maybe',), expected bool | None` (and an unknown target
    option) name the pass or target, the option and what it takes."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), *args)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == f"fwdshim-opt: error: {expected}"


def test_a_malformed_target_names_the_target_flag(tmp_path):
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-t", "numba{plan_only=true")
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == "fwdshim-opt: error: -t: column 21: malformed pass arguments, expected either a space or `}` here"


@pytest.mark.parametrize("target, col", [("numba{plan_only=true}}", 22), ("numba{plan_only=true},mlir", 22)])
def test_text_after_the_target_is_one_line(tmp_path, target, col):
    """`-t` takes one target: xDSL printed the first and ignored the rest (`numba,mlir`, a stray `}`)."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-t", target)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"fwdshim-opt: error: -t: column {col}: one target, and nothing after it", f"  {target}", "  " + " " * (col - 1) + "^"
    ]


def test_an_empty_target_is_one_line(tmp_path):
    """`-t ''` names no target (xDSL spoke of a pass pipeline)."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-t", "")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("fwdshim-opt: error: -t: no target named (mlir, the default; numba;") and r.stderr.count("\n") == 1


def test_a_location_naming_a_file_with_a_newline_stays_one_line(tmp_path):
    """The input's own `loc("a\\nb":1:1)`: the file name's control characters are escaped in the error."""
    body = '  %s = fwd.silu %x : tensor<576xf32> -> tensor<192xf32> loc("a\\nb":1:1)'
    path = write(tmp_path, "bad.mlir", FUNC.format(body=body).replace("func.return %s : tensor<576xf32>", "func.return %x : tensor<576xf32>"))
    r = opt(str(path))
    assert r.returncode == 1
    assert r.stderr.splitlines()[0] == "a\\nb:1:1: error: fwd.silu result has 192 values for 576 inputs"


@pytest.mark.parametrize("spec", ["mlir{print_generic_format=true}", "mlir{print_generic_format}"])
def test_the_mlir_targets_options_are_its_flags(tmp_path, spec):
    """`-t 'mlir{print_generic_format=true}'` prints the generic form, as `--print-op-generic` (xDSL set
    the mlir target's options from the flags alone: the spec's were ignored, a bare one an error)."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-t", spec)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout == opt(str(path), "--print-op-generic").stdout
    assert '"fwd.silu"(%x)' in r.stdout


def test_a_bare_boolean_option_of_the_target_is_true(tmp_path):
    """`-t 'numba{plan_only}'` is `plan_only=true`, as a pass's bare flag (`fwd-legalize{explain}`);
    it was xDSL's `Incompatible types: given (), expected <class 'bool'>`."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    bare = opt(str(path), "-t", "numba{plan_only}")
    assert bare.returncode == 0 and bare.stderr == ""
    assert bare.stdout == opt(str(path), "-t", "numba{plan_only=true}").stdout
    assert bare.stdout.startswith("// launch plan @f: 1 stages") and "# ---- kernel" not in bare.stdout


@pytest.mark.parametrize(
    "data, where, message",
    [
        (b"\xef\xbb\xbf" + b"func.func @f() {\n  func.return\n}\n", "1:1",
         "unexpected character U+FEFF ZERO WIDTH NO-BREAK SPACE: a byte order mark (save the file as UTF-8 without one)"),
        (b"func.func @f() {\n  func.return\x00\n}\n", "2:14", "unexpected character U+0000, a control character"),
        (b"func.func @f() {\n  func.return\n}\n\x1a", "4:1", "unexpected character U+001A, a control character"),
    ],
)
def test_an_invisible_character_is_named_by_its_code_point(tmp_path, data, where, message):
    """A byte order mark or a control character where a token starts: xDSL's message printed the
    character itself (`Unexpected character: ` and nothing visible)."""
    path = tmp_path / "odd.mlir"
    path.write_bytes(data)
    r = opt(str(path))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines()[0] == f"{path}:{where}: error: {message}"


def test_empty_input_is_an_empty_module(tmp_path):
    path = write(tmp_path, "empty.mlir", "// nothing but a comment\n")
    r = opt(str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["builtin.module", "{", "}"]


@pytest.mark.parametrize("example", ["llama_layer.mlir", "mixtral_layer.mlir"])
def test_examples_parse_verify_and_print_stably(example):
    r = opt(str(EXAMPLES / example))
    assert r.returncode == 0, r.stderr
    again = opt("-f", "mlir", stdin=r.stdout)
    assert again.returncode == 0, again.stderr
    assert again.stdout == r.stdout
    assert r.stdout.count("fwd.attention") == 1
    assert r.stdout.count("fwd.weight ") == (9 if example.startswith("llama") else 10)


def test_help_lists_every_available_pass_once_and_xdsl_options():
    r = opt("--help")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "fwdshim passes (-p 'NAME{option=value ...}', options separated by spaces):" in out
    section = out.split("fwdshim passes", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    names = [ln.split("{")[0].strip() for ln in section if re.match(r"^  \S", ln)]
    assert names == list(available_passes())
    # each pass's options: the values each takes, its default marked
    assert "  fwd-legalize{numerics=… mode=… explain=…}" in section
    assert "      numerics  dequant (default) | int8-act | two-pass-int8" in section
    assert "      mode      strict (default) | mark" in section
    assert "      explain   true | false (default)" in section  # an unset flag is off (said "default unset")
    assert "      order     shim (default) | shared" in section
    assert section[section.index("  fwd-lower-numba{<tuning>=…}") + 1].startswith("      Plan the Numba CUDA kernel launches")
    # the launch tuning's options, each with its default and what it does
    assert "      merge true: Group the stages' launches into merged launches (`codegen.merge`); off: one launch a stage." in section
    # xDSL's own options follow; its passes after fwdshim's, in -p's help, without fwdshim's
    for flag in ("--split-input-file", "--verify-diagnostics", "--print-op-generic", "-p PASSES", "-t TARGET"):
        assert flag in out
    assert out.index("fwd-lower-numba") < out.index("usage:") < out.index("apply-individual-rewrite")
    assert "fwd-legalize" not in out.split("-p PASSES, --passes PASSES", 1)[1].split("--print-between-passes")[0]
    assert "--explain" in out and "--report-json" in out
    # the numba target and its option, and help for the xDSL flags that had none
    assert "fwdshim targets (-t 'NAME{option=value}'):\n  numba{plan_only=… <tuning>=…}\n" in out
    assert "      plan_only  true | false (default): the plan alone, no kernel source" in out
    flat = " ".join(out.split())
    assert "--disable-verify do not verify the parsed IR" in flat and "-v, --version print fwdshim-opt's version" in flat
    assert "-t TARGET, --target TARGET what to print: mlir (the IR, default), numba (the launch plan" in flat
    # xDSL's pass names whole, one ", " apart (argparse broke them at their hyphens: `convert-arith-to-` / `riscv`)
    passes = out.split("-p PASSES, --passes PASSES", 1)[1].split("--print-between-passes")[0]
    assert not re.search(r"-\n", passes) and re.search(r"\bconvert-arith-to-riscv, ", " ".join(passes.split()))


def test_help_without_any_pass_module(monkeypatch):
    """--help works before the other issues' passes exist (and with a pass module that fails to load)."""
    import fwdshim.passes as passes
    import fwdshim.tools.driver as driver

    def broken():
        raise ImportError("half-written module")

    monkeypatch.setattr(passes, "available_passes", lambda: {})
    assert driver._pass_help().splitlines()[1:] == ["  (none in this checkout yet)"]
    monkeypatch.setattr(passes, "available_passes", lambda: {"fwd-broken": broken})
    assert driver._pass_help().splitlines()[1] == (
        "  fwd-broken                   (does not load: ImportError: half-written module)"
    )


def test_unknown_fwd_op_suggests_a_close_name(tmp_path):
    body = "  %n = fwd.{} %x : tensor<4xf32> -> tensor<4xf32>"
    src = "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {{\n{}\n  func.return %n : tensor<4xf32>\n}}\n"
    r = opt(str(write(tmp_path, "t.mlir", src.format(body.format("rms_nrom")))))
    first = r.stderr.splitlines()[0]
    assert r.returncode == 1
    assert first.endswith(":2:8: error: Operation fwd.rms_nrom is not registered (did you mean fwd.rms_norm?)")
    r = opt(stdin='"fwd.silo"() : () -> ()\n')
    assert r.stderr.splitlines()[0].endswith("is not registered (did you mean fwd.silu?)")
    # nothing close: no guess
    r = opt(stdin='"fwd.frobnicate"() : () -> ()\n')
    assert r.stderr.splitlines()[0].endswith("error: Operation fwd.frobnicate is not registered")


@pytest.mark.parametrize(
    "var, value, expected",
    [
        ("FWDSHIM_MERGE", "0", "fwdshim-opt: warning: FWDSHIM_MERGE is read by `fwdshim run` and `fwdshim profile`, not here: give fwd-lower-numba or -t numba the option (`-t 'numba{merge=false}'`)"),
        ("FWDSHIM_PDL", "sometimes", "fwdshim-opt: warning: FWDSHIM_PDL is read by `fwdshim run` and `fwdshim profile`, not here: give fwd-lower-numba or -t numba the option (`-t 'numba{pdl=off}'`)"),
    ],
)
def test_the_tools_environment_is_not_read_by_the_opt_driver(monkeypatch, var, value, expected):
    """`fwdshim-opt` plans under its pipeline's options alone (the plan a FileCheck test sees never
    depends on the environment): a `FWDSHIM_MERGE` or `FWDSHIM_PDL` set says so in one line, and the
    plan is the default one."""
    path = str(Path(__file__).resolve().parents[2] / "examples" / "llama_layer.mlir")
    want = opt(path, "-p", "forward-shim", "-t", "numba{plan_only=true}")
    monkeypatch.setenv(var, value)
    r = opt(path, "-p", "forward-shim", "-t", "numba{plan_only=true}")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == expected and r.stdout == want.stdout


def test_tuning_options_change_the_plan(tmp_path):
    """`fwd-lower-numba{merge=false}` and `-t 'numba{merge=false}'` plan one launch a stage; `pdl=off`
    kernels open without a wait; a value the back end refuses is one line."""
    path = str(Path(__file__).resolve().parents[2] / "examples" / "llama_layer.mlir")
    merged = opt(path, "-p", "forward-shim", "-t", "numba{plan_only=true}").stdout
    for args in (("-p", "forward-shim,fwd-lower-numba{merge=false}", "-t", "numba{plan_only=true}"),
                 ("-p", "forward-shim", "-t", "numba{plan_only=true merge=false}")):  # fmt: skip
        r = opt(path, *args)
        assert r.returncode == 0, r.stderr
        assert "merged_" in merged and "merged_" not in r.stdout, args
    r = opt(path, "-p", "forward-shim", "-t", "numba{pdl=off}")
    assert r.returncode == 0 and "pdl_wait()" not in r.stdout and "pdl_wait()" in opt(path, "-p", "forward-shim", "-t", "numba").stdout
    r = opt(path, "-p", "forward-shim,fwd-lower-numba{pdl=sometimes}")
    assert r.returncode != 0 and "pdl='sometimes': one of off, wait, ahead, early" in r.stderr and "Traceback" not in r.stderr


def test_a_module_without_stages_says_it_has_no_plan(tmp_path):
    path = write(tmp_path, "arith.mlir", "func.func @f(%a: f32) -> f32 {\n  %b = arith.addf %a, %a : f32\n  func.return %b : f32\n}\n")
    for target in ("numba", "numba{plan_only=true}"):
        r = opt(str(path), "-t", target)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "// no launch plan: no function of the module holds a fwd stage\n"


def test_any_file_name_reads_as_mlir_and_dash_means_the_standard_streams(tmp_path):
    """As mlir-opt: the input is MLIR whatever its name (xDSL chose the parser by extension:
    `Unrecognized file extension ''`), `-` as the input is stdin and `-o -` is stdout (xDSL wrote a
    file named `-`)."""
    text = "func.func @f(%a: f32) -> f32 {\n  %b = arith.addf %a, %a : f32\n  func.return %b : f32\n}\n"
    plain = opt(str(write(tmp_path, "f.mlir", text)))
    assert plain.returncode == 0 and "arith.addf" in plain.stdout
    for args, stdin in (([str(write(tmp_path, "noext", text))], None), (["-"], text), (["-o", "-", "-"], text)):
        r = subprocess.run([*_tool("fwdshim-opt"), *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
        assert r.stdout == plain.stdout, args
    assert not (tmp_path / "-").exists()


def test_ctrl_c_is_one_line_and_status_130(monkeypatch, capsys):
    """Ctrl-C in a long pass: `fwdshim-opt: interrupted`, exit status 130 (as `fwdshim`), no traceback."""
    from fwdshim.tools import driver

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver.FwdOptMain, "run", interrupted)
    assert driver.main([str(ROOT / "examples" / "llama_layer.mlir"), "-p", "forward-shim"]) == 130
    assert capsys.readouterr().err == "fwdshim-opt: interrupted\n"


def _refused_source(tmp_path) -> Path:
    """A function of one op legality refuses (a soft cap, K11), on line 2."""
    src = tmp_path / "refused.mlir"
    src.write_text(
        "func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {\n"
        "  %y = fwd.softcap %x cap 30.0 : tensor<64xf32> -> tensor<64xf32>\n"
        "  func.return %y : tensor<64xf32>\n}\n"
    )
    return src


def _opt_process(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fwdshim.tools.driver", *args], capture_output=True, text=True)


def test_explain_option_of_a_failing_legalize_reports_on_stderr(tmp_path):
    """`fwd-legalize{explain=true}` is `--explain`: when the strict pass fails, the table goes to
    stderr with the errors (stdout stays empty); when it passes, the table follows on stdout."""
    src = _refused_source(tmp_path)
    r = _opt_process(str(src), "-p", "fwd-legalize{explain=true}")
    assert r.returncode == 1 and r.stdout == ""
    assert "// legality report:" in r.stderr and f"{src}:2:3: error: a soft-capped tensor" in r.stderr
    r = _opt_process(str(src), "-p", "fwd-legalize{explain=true mode=mark}")
    assert r.returncode == 0 and "// legality report:" in r.stdout and r.stderr == ""


@pytest.mark.parametrize("mode", ["strict", "mark"])
def test_explain_with_a_legalize_that_explains_prints_one_table(tmp_path, mode):
    """`--explain` and `fwd-legalize{explain=true}` together: one table (it was printed twice, the
    pass's and then the driver's), where `--explain` puts it — after the IR, or on stderr with the errors."""
    src = _refused_source(tmp_path)
    r = _opt_process(str(src), "-p", f"fwd-legalize{{explain=true mode={mode}}}", "--explain")
    both = r.stdout + r.stderr
    assert both.count("// legality report:") == 1 and "fwd.softcap" in both
    if mode == "mark":
        assert r.returncode == 0 and r.stdout.index("func.func") < r.stdout.index("// legality report:")
    else:
        assert r.returncode == 1 and r.stdout == "" and f"{src}:2:3: error: a soft-capped tensor" in r.stderr


def test_a_stale_report_is_removed_when_the_input_does_not_verify(tmp_path):
    """`--report-json FILE` holds this run's report or nothing: an input that fails to verify leaves
    no report, so a file from an earlier run must not survive (CI would read it as this run's)."""
    src = tmp_path / "bad.mlir"
    src.write_text(
        "func.func @f(%a: tensor<64xf32>, %b: tensor<32xf32>) -> tensor<64xf32> {\n"
        "  %y = fwd.elementwise add %a, %b : tensor<64xf32>, tensor<32xf32> -> tensor<64xf32>\n"
        "  func.return %y : tensor<64xf32>\n}\n"
    )
    report = tmp_path / "report.json"
    report.write_text('{"rows": [], "stale": true}')  # an earlier run's report
    opt = [sys.executable, "-m", "fwdshim.tools.driver"]
    r = subprocess.run([*opt, str(src), "-p", "forward-shim", "--report-json", str(report)], capture_output=True, text=True)
    assert r.returncode == 1 and f"{src}:2:3: error: elementwise operands" in r.stderr
    assert not report.exists()
    notes = tmp_path / "notes.txt"  # not a report: kept (it was deleted)
    notes.write_text("x\n")
    r = subprocess.run([*opt, str(src), "-p", "forward-shim", "--report-json", str(notes)], capture_output=True, text=True)
    assert r.returncode == 1 and notes.read_text() == "x\n"
    r = subprocess.run([*opt, str(ROOT / "examples" / "llama_layer.mlir"), "-p", "forward-shim", "--report-json", str(report)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0 and '"rows"' in report.read_text()


def test_an_unwritable_output_names_its_option(tmp_path):
    """`--report-json /nope/r.json` said `/nope/r.json: no such file or directory`, not which option's
    file it was, and only after the pipeline ran; it is checked before any work, as -o's is."""
    src = str(ROOT / "examples" / "llama_layer.mlir")
    gone = tmp_path / "nope"
    r = opt(src, "-p", "forward-shim", "-o", str(gone / "x.mlir"))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"fwdshim-opt: error: -o {gone / 'x.mlir'}: cannot write there (no such file or directory)\n"
    r = opt(src, "-p", "forward-shim", "--report-json", str(gone / "r.json"), "-o", str(tmp_path / "x.mlir"))
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"fwdshim-opt: error: --report-json {gone / 'r.json'}: cannot write there (no such file or directory)\n"
    assert list(tmp_path.iterdir()) == []
    if os.path.isfile("/proc/version"):  # a file that is there, in a directory that takes no new file
        r = opt(src, "-p", "forward-shim", "-o", "/proc/version")
        assert r.stderr == ("fwdshim-opt: error: -o /proc/version: cannot write there (no new file can be created "
                            "in /proc: no such file or directory)\n")  # it said only "no such file or directory"


def test_a_closed_stdout_is_quiet_and_keeps_the_other_outputs(tmp_path):
    """`fwdshim-opt ... --report-json - -o out.mlir | head` said `error: -: broken pipe` and did not
    write out.mlir. The reader leaving is no error to print: exit status 1 (Python's own on EPIPE),
    nothing on stderr, and -o's file, which does not go through stdout, still written."""
    src = str(ROOT / "examples" / "llama_layer.mlir")
    out = tmp_path / "out.mlir"
    for args in (["--report-json", "-", "-o", str(out)], ["--explain", "--report-json", "-", "-o", str(out)],
                 ["-t", "numba"], []):  # fmt: skip
        p = subprocess.Popen([*_tool("fwdshim-opt"), src, "-p", "forward-shim", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        p.stdout.close()  # `| head -0`
        err = p.stderr.read()
        assert (p.wait(timeout=120), err) == (1, b""), args
        if "-o" in args:
            assert "fwd." in out.read_text() and ("// " in out.read_text()) == ("--explain" in args)
            out.unlink()


def test_devices_are_not_read_as_ir(tmp_path):
    """`/dev/zero` as the input is one line (it hung: the read never ends); /dev/null is an empty
    module; a full output device names the output file (it said only "no space left on device")."""
    r = opt("/dev/zero")
    assert r.returncode == 1 and r.stderr == "fwdshim-opt: error: /dev/zero: a device, not a file of IR\n"
    r = opt("/dev/null")
    assert r.returncode == 0 and r.stdout.startswith("builtin.module")
    if Path("/dev/full").exists():
        r = opt(str(ROOT / "examples" / "llama_layer.mlir"), "-o", "/dev/full")
        assert r.returncode == 1 and r.stderr == "fwdshim-opt: error: -o /dev/full: no space left on device\n"
        r = opt(str(ROOT / "examples" / "llama_layer.mlir"), "--report-json", "/dev/full", "-o", "/dev/null")
        assert r.returncode == 1 and r.stderr == "fwdshim-opt: error: --report-json /dev/full: no space left on device\n"


def test_split_input_file_processes_every_chunk(tmp_path):
    """As mlir-opt: under `--split-input-file` a chunk that fails (a refused op, an unknown op) prints
    its located error and the chunks after it still run; the exit status is 1; `--report-json` is a
    list with one report per chunk that got one (the strict failure's included)."""
    fn = "func.func @{n}(%x: tensor<64xf32>) -> tensor<64xf32> {{\n  %y = {op} %x {extra}: tensor<64xf32> -> tensor<64xf32>\n  func.return %y : tensor<64xf32>\n}}\n"
    chunks = [
        fn.format(n="a", op="fwd.silu", extra=""),
        fn.format(n="b", op="fwd.softcap", extra="cap 30.0 "),
        fn.format(n="c", op="fwd.bogus", extra=""),
        fn.format(n="d", op="fwd.silu", extra=""),
    ]
    src = tmp_path / "split.mlir"
    src.write_text("// -----\n".join(chunks))
    report = tmp_path / "r.json"
    r = opt(str(src), "--split-input-file", "-p", "forward-shim", "--report-json", str(report))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{src}:7:3: error: a soft-capped tensor" in r.stderr
    assert f"{src}:12:8: error: Operation fwd.bogus is not registered" in r.stderr
    assert "@a" in r.stdout and "@d" in r.stdout  # the chunk after the failures ran
    import json

    docs = json.loads(report.read_text())
    assert [d["chunk"] for d in docs] == [0, 1, 3]  # chunk 2 did not parse: each report says its chunk
    assert [d["rows"][0]["location"] for d in docs] == [f"{src}:2:3", f"{src}:7:3", f"{src}:17:3"]


def test_version_names_fwdshim_opt_and_its_xdsl(capsys):
    """`fwdshim-opt --version` names itself with fwdshim's version, then the xDSL it runs on (it printed
    xDSL's own `xdsl-opt built from ...`)."""
    from importlib.metadata import version

    from fwdshim.tools import package_version
    from fwdshim.tools.driver import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code in (0, None)
    assert capsys.readouterr().out == f"fwdshim-opt {package_version()} (xDSL {version('xdsl')})\n"


def test_a_target_option_given_twice_is_one_line(tmp_path):
    """`-t 'numba{plan_only=true plan_only=false}'` is refused as `-p`'s repeats are (the last won)."""
    path = write(tmp_path, "ok.mlir", FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>"))
    r = opt(str(path), "-t", "numba{plan_only=true plan_only=false}")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "fwdshim-opt: error: -t: option `plan_only` given twice to `numba` (numba{plan_only=true plan_only=false})"


def test_planning_and_printing_kernels_write_nothing_into_the_cache(tmp_path, monkeypatch):
    """`-t 'numba{plan_only=true}'` (and `-t numba`, `fwd-lower-numba`) print the plan and source
    without writing kernel modules into `$FWDSHIM_CACHE/kernels` (planning wrote one per kernel);
    the first launch of a kernel writes its module."""
    import numpy as np

    from fwdshim.codegen import unary
    from fwdshim.codegen.kernel_cache import cache_dir

    cache = tmp_path / "cache"
    monkeypatch.setenv("FWDSHIM_CACHE", str(cache))
    layer = str(EXAMPLES / "llama_layer.mlir")
    pipeline = "forward-shim{numerics=int8-act},fwd-lower-numba"
    plan = opt(layer, "-p", pipeline, "-t", "numba{plan_only=true}")
    assert plan.returncode == 0 and plan.stdout.startswith("// launch plan @decode_step: 15 stages, 6 kernels,")
    assert "# ---- kernel " not in plan.stdout
    source = opt(layer, "-p", pipeline, "-t", "numba")
    assert source.returncode == 0 and source.stdout.count("\n# ---- kernel ") >= 6
    assert not cache.exists()
    k = unary.elementwise("add", 53)  # a size no other test builds: compile_kernel caches per process
    assert not cache.exists()
    out = k.run(a=np.arange(53, dtype=np.float32), b=np.ones(53, dtype=np.float32))
    assert np.array_equal(out["y"], np.arange(53, dtype=np.float32) + 1)
    assert [p.name.startswith("elementwise_add_53_") for p in cache_dir().glob("*.py")] == [True]


@pytest.mark.parametrize("flag", ["-o", "--report-json"])
def test_a_gguf_model_is_never_written_over(tmp_path, flag):
    """`-o` and `--report-json` naming a GGUF model refuse it (`fwdshim import -o` does too): a run
    that succeeded replaced the model with IR or JSON, exit status 0."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF\x03\x00\x00\x00" + bytes(16))
    opt = [sys.executable, "-m", "fwdshim.tools.driver"]
    r = subprocess.run([*opt, str(EXAMPLES / "llama_layer.mlir"), "-p", "forward-shim", flag, str(model)],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == f"fwdshim-opt: error: {flag} {model}: a GGUF model, which writing there would destroy (give another file name)\n"
    assert model.read_bytes() == b"GGUF\x03\x00\x00\x00" + bytes(16)


def test_timings_and_ir_between_passes_go_to_stderr():
    """`--time-passes` and `--print-between-passes` print on stderr (as mlir-opt's timing and
    print-ir-after-all do): stdout is the resulting IR alone, which parses again (xDSL printed the
    timings on stdout, ahead of the IR: `fwdshim-opt - ` then failed on "Pass ... took")."""
    src = str(ROOT / "examples/llama_layer.mlir")
    r = opt(src, "-p", "fwd-fuse,fwd-legalize", "--time-passes", "--print-between-passes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("builtin.module") and "took" not in r.stdout and "IR after" not in r.stdout
    assert "Pass fwd-fuse took " in r.stderr and "IR after fwd-fuse:" in r.stderr
    again = opt("-", stdin=r.stdout)
    assert again.returncode == 0 and again.stdout == r.stdout, again.stderr


def test_ir_a_pass_leaves_invalid_is_located_and_names_the_pass():
    """xDSL verifies between passes with `module.verify()`, whose error names no place: the driver
    reports it as `verify_located` does (file:line:col of the op), with the pass that left the IR —
    a bug of ours when that pass is one of fwdshim's."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin, DenseArrayBase, i64
    from xdsl.dialects.func import Func
    from xdsl.utils.exceptions import VerifyException

    from fwdshim.diagnostics import LocatingParser
    from fwdshim.dialects.fwd import FusedOp, Fwd
    from fwdshim.tools.driver import after_pass

    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    text = """func.func @f(%a: tensor<64xf32>) -> tensor<64xf32> {
  %r = fwd.fused elementwise_chains covers [0, 1] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x: tensor<64xf32>):
    %s = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
    %t = fwd.silu %s : tensor<64xf32> -> tensor<64xf32>
    fwd.yield %t : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
"""
    module = LocatingParser(ctx, text, "in.mlir").parse_module()
    module.verify()
    op = next(o for o in module.walk() if isinstance(o, FusedOp))
    op.covers = DenseArrayBase.from_list(i64, [0])  # as a faulty pass might leave it

    class Named:
        def __init__(self, name):
            self.name = name

    for name, suffix in (("cse", ")"), ("fwd-fuse", ": a bug, please report it)")):
        msg = str(after_pass(VerifyException("bare"), module, Named(name)))
        assert msg.startswith("in.mlir:2:3: error: fused covers list 1 stages for 2 parts"), msg
        assert msg.endswith(f"(in the IR that `{name}` produced{suffix}"), msg
    assert str(after_pass(VerifyException("bare"), module, None)).startswith("in.mlir:2:3: error: fused covers")


def test_generic_passes_after_fusion(tmp_path):
    """xDSL's own passes after forward-shim: `cse` merges identical parts of a fused op (which still
    verifies), `dce` and `canonicalize` leave it valid; each output parses back."""
    src = write(tmp_path, "cse.mlir", """func.func @f(%a: tensor<576xf32>, %b: tensor<576xf32>) -> tensor<576xf32> {
  %h = fwd.elementwise mul %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %h2 = fwd.elementwise mul %a, %b : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  %r = fwd.elementwise add %h, %h2 : tensor<576xf32>, tensor<576xf32> -> tensor<576xf32>
  func.return %r : tensor<576xf32>
}
""")
    for pipeline in ("forward-shim,cse", "forward-shim,cse,dce,canonicalize,forward-shim", "forward-shim,cse,fwd-lower-numba"):
        r = opt(str(src), "-p", pipeline)
        assert r.returncode == 0, (pipeline, r.stderr)
        assert "covers [0, 1, 2]" in r.stdout
        again = opt("-p", "forward-shim", stdin=r.stdout)
        assert again.returncode == 0, (pipeline, again.stderr)


def test_report_json_to_where_the_ir_goes_is_refused(tmp_path):
    """`--report-json` naming the file stdout writes (`/dev/stdout`, or the file the shell redirected
    stdout to) while the IR goes to stdout would interleave the two: refused as `--report-json -` is,
    before anything is written. With `-o FILE` for the IR it is the report's alone."""
    out = tmp_path / "out.txt"
    for report in ("/dev/stdout", str(out)):
        with out.open("w") as f:
            r = subprocess.run([*_tool("fwdshim-opt"), str(EXAMPLES / "llama_layer.mlir"), "--report-json", report],
                               stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 1, r.stderr
        assert r.stderr == (f"fwdshim-opt: error: --report-json {report}: is where the IR goes, stdout (give the IR "
                            "a file, -o FILE, or the report another name)\n")  # fmt: skip
        assert out.read_text() == ""
    with out.open("w") as f:
        r = subprocess.run([*_tool("fwdshim-opt"), str(EXAMPLES / "llama_layer.mlir"), "--report-json", "/dev/stdout",
                            "-o", str(tmp_path / "ir.mlir")], stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["shim"] and (tmp_path / "ir.mlir").read_text().startswith("builtin.module")


def test_a_long_source_line_is_cut_around_the_caret(tmp_path):
    """An error on a long line (a generated module on one line can be megabytes) shows about
    `SNIPPET_CHARS` of it around the caret, `...` where cut, the caret under its character."""
    from fwdshim.diagnostics import SNIPPET_CHARS

    body = "  %s = fwd.silu %x " + " " * 3000 + "bogus : tensor<576xf32> -> tensor<576xf32>"
    src = write(tmp_path, "long.mlir", FUNC.format(body=body))
    r = opt(str(src))
    assert r.returncode == 1
    head, line, carets = r.stderr.splitlines()
    assert head == f"{src}:2:3020: error: Expected ':'"
    assert line.startswith("...") and len(line) <= SNIPPET_CHARS + 6
    assert line[carets.index("^") : carets.index("^") + 5] == "bogus" and carets.strip() == "^^^^^"
    covers = ", ".join(map(str, range(20000))) + ", 3"  # a verify error: the op's line, cut
    text = ("func.func @f(%x: tensor<576xf32>) -> tensor<576xf32> {\n"
            f"  %s = fwd.fused elementwise_chains covers [{covers}] ins(%x) : (tensor<576xf32>) -> tensor<576xf32> {{\n"
            "  ^bb0(%a: tensor<576xf32>):\n    %t = fwd.silu %a : tensor<576xf32> -> tensor<576xf32>\n"
            "    fwd.yield %t : tensor<576xf32>\n  }\n  func.return %s : tensor<576xf32>\n}\n")  # fmt: skip
    r = opt(str(write(tmp_path, "long2.mlir", text)))
    assert r.returncode == 1 and len(r.stderr) < 400, r.stderr[:400]
    assert r.stderr.splitlines()[0].endswith("long2.mlir:2:3: error: fused covers are not strictly increasing")


def test_an_unregistered_op_in_a_fused_body_is_named(tmp_path):
    """With --allow-unregistered-dialect an unknown op inside a fused op is refused by its own name
    (it said `builtin.unregistered`, xDSL's stand-in)."""
    src = write(tmp_path, "u.mlir", """func.func @f(%a: tensor<64xf32>) -> tensor<64xf32> {
  %r = fwd.fused elementwise_chains covers [0] ins(%a) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%x: tensor<64xf32>):
    %s = "foo.bar"(%x) : (tensor<64xf32>) -> tensor<64xf32>
    fwd.yield %s : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
""")
    r = opt("--allow-unregistered-dialect", str(src))
    assert r.returncode == 1 and r.stderr.splitlines()[0] == f"{src}:2:3: error: fused part foo.bar is not a stage"


def test_a_plan_a_later_pass_made_stale_is_not_printed(tmp_path):
    """`fwd.plan` (and `fwd.kernels`) describe the IR `fwd-lower-numba` planned: after xDSL's `dce`
    removed a stage they are dropped from the printed IR (they said 2 stages of a function holding
    one); the lowered IR itself, and IR parsed with them, prints them back."""
    src = write(tmp_path, "two.mlir", """func.func @b(%x: tensor<64xf32>) -> tensor<64xf32> {
  %u = fwd.silu %x : tensor<64xf32> -> tensor<64xf32>
  %s = fwd.elementwise add %x, %u : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  %t = fwd.elementwise mul %x, %x : tensor<64xf32>, tensor<64xf32> -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}
""")
    lowered = opt(str(src), "-p", "fwd-lower-numba")
    assert lowered.returncode == 0 and "fwd.plan = {stages = 3" in lowered.stdout
    again = opt(stdin=lowered.stdout)
    assert again.returncode == 0 and "fwd.plan = {stages = 3" in again.stdout and "fwd.kernels" in again.stdout
    r = opt(str(src), "-p", "fwd-lower-numba,dce")
    assert r.returncode == 0 and "fwd.elementwise mul" not in r.stdout
    assert "fwd.plan" not in r.stdout and "fwd.kernels" not in r.stdout, r.stdout


def test_split_input_report_to_stdout_is_one_list(tmp_path):
    """`--split-input-file --report-json -` printed the growing list after every chunk (not JSON):
    now one list, one report per chunk that got one, after the last chunk."""
    chunks = [FUNC.format(body="  %s = fwd.silu %x : tensor<576xf32> -> tensor<576xf32>")] * 3
    src = write(tmp_path, "three.mlir", "\n// -----\n".join(chunks))
    r = opt(str(src), "--split-input-file", "-p", "forward-shim", "--report-json", "-", "-o", str(tmp_path / "o.mlir"))
    assert r.returncode == 0, r.stderr
    docs = json.loads(r.stdout)
    assert isinstance(docs, list) and len(docs) == 3 and all(d["shim"] for d in docs)


Q8_MATMUL = (
    "func.func @f(%x: tensor<64xf32>) -> tensor<32xf32> {\n"
    '  %w = fwd.weight "w" : !fwd.weights<32x64, q8_0>\n'
    "  %z = fwd.matmul %x, %w : tensor<64xf32>, !fwd.weights<32x64, q8_0> -> tensor<32xf32>\n"
    "  func.return %z : tensor<32xf32>\n}\n"
)
"""One Q8_0 matmul: the module the numerics-mismatch tests quantize for one numerics, then another."""


def test_legalizing_for_other_numerics_than_the_module_was_quantized_for_says_so(tmp_path):
    """`forward-shim{numerics=int8-act},fwd-legalize{numerics=dequant}`: legality's refusal (the matmul
    reads a quantized activation the dequantizing forward never reads) is followed by a note naming the
    numerics the module was quantized for and what to do; the first numerics alone pass."""
    path = write(tmp_path, "m.mlir", Q8_MATMUL)
    assert opt(str(path), "-p", "forward-shim{numerics=int8-act}").returncode == 0
    r = opt(str(path), "-p", "forward-shim{numerics=int8-act},fwd-legalize{numerics=dequant}")
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert lines[0] == f"{path}:3:3: error: the forward's precise numerics read no activation quantized"
    assert lines[-1] == ("note: the module's activations were quantized for int8-act (its one_word blocks); "
                         "for dequant run the pipeline on the IR from before that")  # fmt: skip


@pytest.mark.parametrize("first", ["forward-shim", "fwd-quantize-activations"])
@pytest.mark.parametrize("second", ["fwd-fuse{numerics=two-pass-int8}", "fwd-fuse", "fwd-quantize-activations{numerics=two-pass-int8}",
                                    "forward-shim", "forward-shim{numerics=two-pass-int8}"])
def test_fusing_or_quantizing_for_other_numerics_than_the_module_was_quantized_for_is_an_error(tmp_path, first, second):
    """`fwd-fuse`, `fwd-quantize-activations` and `forward-shim` (which runs both) on a module whose activations were quantized for other
    numerics (read from their formats: `one_word` blocks are int8-act's, whether `fwd-legalize`
    recorded `fwd.numerics` or not) fail with one line naming those numerics and what to do, instead of
    fusing or quantizing it under a contract it no longer keeps; the same numerics again pass."""
    path = write(tmp_path, "m.mlir", Q8_MATMUL)
    name = second.split("{")[0]
    assert opt(str(path), "-p", f"{first}{{numerics=int8-act}},{name}{{numerics=int8-act}}").returncode == 0
    r = opt(str(path), "-p", f"{first}{{numerics=int8-act}},{second}")
    assert r.returncode == 1 and r.stdout == ""
    numerics = second.split("=")[1].rstrip("}") if "{" in second else "dequant"
    lines = r.stderr.splitlines()
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+:\d+: error: {re.escape(name)}\{{numerics={numerics}\}}: .*", lines[0])
    assert lines[0].split(": error: ", 1)[1] == (
        f"{name}{{numerics={numerics}}}: the module's activations were quantized for int8-act (its one_word "
        "blocks, the first here); run the pipeline on the IR from before that, or give it numerics=int8-act"
    )
    assert len(lines) == 3 and lines[2].strip() == "^"  # located, at the first quantized activation's producer
