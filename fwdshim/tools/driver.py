"""`fwdshim-opt`: xDSL's opt driver with the `fwd` dialect, fwdshim's passes and targets.

Beyond `xdsl-opt`: every op records where it was parsed, so parse errors, verify errors and refusals
name `file:line:col`, each followed by its source line and a caret (`format_error`); user errors print
one located message and exit 1, never a traceback (an internal error prints one line too;
`FWDSHIM_TRACEBACK=1` lets its traceback through);
`--explain` and `--report-json FILE` report the legality verdict of every stage.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import io
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import IO, NoReturn

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from fwdshim.diagnostics import LocatingParser, parse_error_line, verify_located, with_source_lines
from fwdshim.tools import EPIPE_STATUS, names_directory, package_version, probe_write, quiet_stdout, store_once, write_whole


class ChunksFailed(Exception):
    """Chunks of a `--split-input-file` run failed; their errors are printed already."""


class _Held(io.StringIO):
    """`-o FILE`'s text, held until the run has succeeded (`FwdOptMain.run` then writes it in one
    move): xDSL closes its output stream whatever happens, which must not lose the text."""

    def close(self) -> None:
        pass


def _regular_output(name: str | None) -> bool:
    """`-o name` is a file to write whole at the end (not stdout, a device or a FIFO)."""
    if name is None or name == "-":
        return False
    target = os.path.realpath(name)
    return not (os.path.exists(target) and not os.path.isfile(target))


def _write_whole(name: str, text: str) -> None:
    """`text` into `name` whole (`tools.write_whole`: `-o` may name the input). Raises OSError named
    `-o name`."""
    try:
        write_whole(name, lambda f: f.write(text), binary=False)
    except OSError as e:
        e.filename = f"-o {name}"
        raise


def _probe(name: str, flag: str) -> None:
    """Raise OSError (named `flag name`: the error says which option's file it is) now when `name`
    could not be written at the end."""
    try:
        probe_write(name)
    except OSError as e:
        raise OSError(e.errno, f"cannot write there ({(e.strerror or str(e)).lower()})", f"{flag} {name}") from None
    target = os.path.realpath(name)
    if os.path.exists(target) and not os.access(target, os.W_OK):
        raise OSError(errno.EACCES, "not writable (permission denied)", f"{flag} {name}")


def _is_report(path: str) -> bool:
    """`path` holds a `--report-json` report (a run's own, safe to remove): a JSON object with
    `rows`, or a list of them."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return False
    docs = doc if isinstance(doc, list) else [doc]
    return bool(docs) and all(isinstance(d, dict) and "rows" in d for d in docs)


class PrintedNothing(Exception):
    """One of xDSL's targets (`-t wat`, `-t wgsl`, `-t csl`) printed nothing for the IR: an error, not
    an empty output and exit status 0."""

    def __init__(self, target: str):
        super().__init__(target)
        self.target = target


def format_error(e: ParseError | DiagnosticException, tool: FwdOptMain | None = None) -> str:
    """The message of a parse error or a pass/verify diagnostic; each located error line
    (`file:line:col: error: reason`) followed by its source line and a caret under the column, as a
    parse error is (the source lines are those `tool` parsed; without it, a diagnostic is printed as
    it is)."""
    if isinstance(e, ParseError):
        return _did_you_mean(parse_error_line(e))
    return with_source_lines(str(e), tool.source_line) if tool is not None else str(e)


class FwdOptMain(xDSLOptMain):
    version_format = f"fwdshim-opt {package_version()} (xDSL {{xdsl_version}})"
    """What `--version` prints: fwdshim's version, then the xDSL it runs on."""

    json_docs: list[dict[str, object]]
    """The `--report-json` reports of the chunks so far (`--split-input-file`)."""

    source_lines: dict[tuple[str, int], str]
    """The lines parsed so far, by (file, line) as the ops' locations name them (every chunk's under
    `--split-input-file`): the source line a located diagnostic prints under its message."""

    chunk: int | None = None
    """The index of the `--split-input-file` chunk being processed (its report's `chunk`)."""

    stdout_closed = False
    """stdout's reader left (`| head`) while the report was written there; the run goes on."""

    def __init__(self, *args, **kwargs):
        self.json_docs = []
        self.reported = False
        self.source_lines = {}
        super().__init__(*args, **kwargs)

    def run(self) -> None:
        """As xDSL's; under `--split-input-file` every chunk is processed (as mlir-opt): a chunk that
        fails to parse, verify or pass has its error printed on stderr and the next chunk runs, and
        the run then fails (`ChunksFailed`). `--parsing-diagnostics` and `--verify-diagnostics` print
        their kind of error on stdout instead, as xDSL's run does (a parse error as `format_error`
        writes it, with or without `--split-input-file`); an error of the other kind does not
        stop the chunks after it. When the run fails before any report is written (the input does
        not parse or verify), a `--report-json` file left by an earlier run is removed, as
        LLVM's tools remove an output they did not finish: what the path holds is this run's report
        or nothing."""
        try:
            if (self.args.split_input_file or self.args.parsing_diagnostics) and not self.args.shrink:
                self._run_chunks()  # (xDSL's run prints a parse diagnostic in a form of its own)
            else:
                super().run()
        except BaseException:
            report = self.args.report_json
            if report and report != "-" and not self.reported and _is_report(report):
                Path(report).unlink(missing_ok=True)
            raise
        if isinstance(self.held, _Held):  # the run succeeded: now -o's file, whole
            _write_whole(self.args.output_file, self.held.getvalue())

    held: IO[str] | None = None
    """The output stream of this run (`prepare_output`)."""

    def prepare_output(self) -> IO[str]:
        """stdout for no `-o` (or `-o -`); for a file, a buffer written at the end of a successful
        run (`_write_whole`): a failed run leaves the file as it was, and `-o` may name the input (the
        input is read before anything is written); a device or FIFO is written as it goes."""
        name = self.args.output_file
        if name is None or name == "-":
            self.held = sys.stdout
        elif _regular_output(name):
            _probe(name, "-o")
            self.held = _Held()
        else:
            self.held = open(name, "w")
        return self.held

    def setup_pipeline(self) -> None:
        """As xDSL's, but what its callback prints between passes (`--time-passes`' timings,
        `--print-between-passes`' IR) goes to stderr, as mlir-opt's `--mlir-timing` and
        `--mlir-print-ir-after-all` do: stdout holds only the resulting IR, so it can be piped on.
        The IR a pass leaves that does not verify (the callback verifies between passes) is reported
        as `verify_located` reports it, at its op's location, naming the pass (`after_pass`)."""
        super().setup_pipeline()
        inner = self.pipeline.callback
        if inner is not None:

            def callback(previous, module, following) -> None:
                try:
                    with contextlib.redirect_stdout(sys.stderr):
                        inner(previous, module, following)
                except VerifyException as e:
                    raise after_pass(e, module, previous) from None

            self.pipeline = dataclasses.replace(self.pipeline, callback=callback)

    def _run_chunks(self) -> None:
        chunks, file_extension = self.prepare_input()
        output_stream = self.prepare_output()
        failed = 0
        try:
            for i, (chunk, offset) in enumerate(chunks):
                self.chunk = i
                try:
                    if i > 0:
                        output_stream.write("// -----\n")
                    module = self.parse_chunk(chunk, file_extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        output_stream.write(self.output_resulting_program(module))
                    output_stream.flush()
                except (ParseError, DiagnosticException) as e:
                    if isinstance(e, ParseError):
                        e.span = dataclasses.replace(e.span, line_offset=offset)
                    if self.args.parsing_diagnostics if isinstance(e, ParseError) else self.args.verify_diagnostics:
                        # as xDSL's run, the diagnostic is the chunk's output; a parse error in the form
                        # of every other diagnostic (`file:line:col: error: reason`, the line, a caret)
                        print(format_error(e, self) if isinstance(e, ParseError) else e)
                        for note in getattr(e, "__notes__", ()):
                            print(note)
                        continue
                    output_stream.flush()
                    print(format_error(e, self), file=sys.stderr)
                    failed += 1
                finally:
                    chunk.close()
        finally:
            if output_stream is not sys.stdout:
                output_stream.close()
            if self.args.split_input_file and self.args.report_json == "-" and self.reported:
                self.write_docs()  # one list on stdout (a file's list is rewritten whole after each chunk)
        if failed:
            raise ChunksFailed(failed)

    def write_docs(self) -> None:
        """`--split-input-file --report-json -`: the list of the chunks' reports on stdout, once."""
        import json

        try:
            json.dump(self.json_docs, sys.stdout, indent=2, ensure_ascii=False)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except BrokenPipeError:
            quiet_stdout()
            self.stdout_closed = True

    def register_all_dialects(self):
        super().register_all_dialects()
        from fwdshim.dialects.fwd import Fwd

        if "fwd" not in self.ctx.registered_dialect_names:
            self.ctx.load_dialect(Fwd)

    def register_all_passes(self):
        super().register_all_passes()
        from fwdshim.passes import available_passes

        for name, factory in available_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        super().register_all_targets()
        from fwdshim.tools.targets import get_all_targets

        for name, factory in get_all_targets().items():
            self.available_targets[name] = factory

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        super().register_all_arguments(arg_parser)
        arg_parser.error = _usage_error  # type: ignore[method-assign]  # one line, exit status 1
        arg_parser.formatter_class = _WholeNames
        from fwdshim.passes import available_passes

        ours = set(available_passes())
        for action in arg_parser._actions:
            if "--passes" in action.option_strings:  # fwdshim's passes are listed above the usage
                rest = [p for p in self.available_passes if p not in ours]
                action.help = f"a pipeline of passes: fwdshim's (above), or xDSL's ({len(rest)}): {', '.join(sorted(rest))}"
            elif "--disable-verify" in action.option_strings:
                action.help = ("do not verify the parsed IR or what the passes leave (a pass may then fail "
                               "on IR it cannot read: an internal error, not a located one)")  # fmt: skip
            elif "--version" in action.option_strings:
                action.help = "print fwdshim-opt's version and the xDSL it runs on, and exit"
            elif "--target" in action.option_strings:
                action.help = ("what to print: mlir (the IR, default), numba (the launch plan and the generated "
                               "Numba source of every kernel; 'numba{plan_only=true}' the plan alone), or xDSL's: "
                               + ", ".join(t for t in self.available_targets if t not in ("numba", "mlir")))  # fmt: skip
        arg_parser.add_argument(
            "--explain",
            action="store_true",
            help="after the pipeline, print a table of every stage: op, location, verdict "
            "(native kernel / decomposed / refused), class or reason; stages are numbered after fusion, "
            "a fused row's `covers [..]` names the stages it took, numbered before fusion; then the fusion "
            "coverage: the rules that fired and how often, those that did not, and each fusable stage left "
            "unfused with why no rule took it (as `//` lines after the IR)",
        )
        arg_parser.add_argument(
            "--report-json",
            metavar="FILE",
            help="write the same report as --explain as JSON to FILE (- for stdout, with the IR in a file: -o FILE)",
        )
        arg_parser.add_argument(
            "--print-capabilities",
            action="store_true",
            help="print the lane's capability manifest and exit: every fused kernel class with its support "
            "(native / decompose / refuse) under each numerics, the reason of each refusal and the fusion rule "
            "that forms the class, then the rules in the order fwd-fuse runs them",
        )
        arg_parser.add_argument("--json", action="store_true", help="with --print-capabilities: the manifest as JSON")
        store_once(arg_parser, _ONCE)

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        if file_extension != "mlir":
            return super().parse_chunk(chunk, file_extension, start_offset)
        text = chunk.read().decode("utf-8")
        name = self.get_input_name()
        for i, line in enumerate(text.split("\n"), start=start_offset + 1):
            self.source_lines[(name, i)] = line.removesuffix("\r")
        parser = LocatingParser(self.ctx, text, name, start_offset)
        module = parser.parse_module(not self.args.no_implicit_module)
        if not self.args.disable_verify:
            verify_located(module)
        return module

    def source_line(self, file: str, line: int) -> str | None:
        """The text of line `line` of `file` as parsed, or None (not a file this run parsed)."""
        return self.source_lines.get((file, line))

    def apply_passes(self, prog: ModuleOp) -> None:
        """Run the pipeline; verify what it leaves (xDSL does not), and when it fails still write the
        report asked for (`--report-json`; `--explain` prints the table on stderr). Under `--explain`
        a `fwd-legalize{explain=true}` of the pipeline does not print its own table too (it printed
        the same table twice: the pass's, then the driver's after the IR)."""
        if self.args.explain:
            from dataclasses import replace

            from fwdshim.passes.legalize import LegalizePass

            once = tuple(replace(p, explain=None) if isinstance(p, LegalizePass) and p.explain else p for p in self.pipeline.passes)
            self.pipeline = replace(self.pipeline, passes=once)
        try:
            super().apply_passes(prog)
        except DiagnosticException:
            if self.args.explain or self.args.report_json is not None:
                print(self.report(prog), end="", file=sys.stderr)
            raise
        if self.pipeline.passes and not self.args.disable_verify:
            try:
                verify_located(prog)
            except VerifyException as e:
                raise after_pass(e, prog, self.pipeline.passes[-1]) from None

    def pipeline_numerics(self) -> str | None:
        """The `numerics` option of the last pass of the pipeline that has one (the report's shim
        where no `fwd.numerics` contract says it)."""
        for p in reversed(self.pipeline.passes):
            numerics = getattr(p, "numerics", None)
            if isinstance(numerics, str):
                return numerics
        return None

    def output_resulting_program(self, prog: ModuleOp) -> str:
        from fwdshim.passes.lower_numba import drop_stale_plans

        drop_stale_plans(prog)  # `fwd-lower-numba,dce`: the plan's counts describe the IR before dce
        self._mlir_target_options()
        text = super().output_resulting_program(prog)
        target = str(self.args.target or "mlir").split("{")[0]
        if target not in ("mlir", "numba") and not text.strip():
            raise PrintedNothing(target)  # `-t wat`: xDSL's printers print their own ops, none of fwd's
        if self.args.explain or self.args.report_json is not None:
            text += self.report(prog)  # the table follows the IR as `//` comment lines
        return text

    def _mlir_target_options(self) -> None:
        """`-t 'mlir{print_generic_format=true}'` as `--print-op-generic` (and its other options as
        their flags): xDSL sets the mlir target's options from the flags alone, so the spec's were
        ignored. An unknown option or value is xDSL's error, as for any target."""
        from xdsl.utils.arg_spec import parse_spec

        spec = parse_spec(str(self.args.target or "mlir"))
        if spec.name != "mlir" or not spec.parameters:
            return
        from fwdshim.passes.options import bare_flags

        cls = self.available_targets["mlir"]()
        target = cls.from_spec(bare_flags(cls, spec))  # `mlir{print_generic_format}`: true, as numba's flags
        for field, flag in (("print_generic_format", "print_op_generic"), ("print_properties_as_attributes", "print_no_properties"),
                            ("print_debuginfo", "print_debuginfo"), ("syntax_highlight", "syntax_highlight")):  # fmt: skip
            if getattr(target, field):
                setattr(self.args, flag, True)
        self.args.target = "mlir"  # its options are the flags now (xDSL reads the spec again)

    def report(self, prog: ModuleOp) -> str:
        """Write `--report-json` (a list, one report per chunk, under `--split-input-file`); return
        the `--explain` table."""
        from fwdshim.passes.fuse import unfused_guards
        from fwdshim.passes.rules import RULES
        from fwdshim.shim.report import explain_module

        self.reported = True
        docs = self.json_docs if self.args.split_input_file else None
        rules = [r.name for r in RULES]
        numerics = self.pipeline_numerics()
        path = self.args.report_json
        try:
            table = explain_module(prog, self.args.explain, path, numerics, docs, rules, unfused_guards, self.chunk)
            if path == "-":
                sys.stdout.flush()  # a closed pipe is met here, not at the exit's flush
            return table
        except BrokenPipeError:
            if path != "-":
                raise
            quiet_stdout()  # `--report-json - -o out.mlir | head`: the reader left; -o is still written
            self.stdout_closed = True
            return explain_module(prog, self.args.explain, None, numerics, None, rules, unfused_guards)
        except OSError as e:  # the error names the option, as -o's do
            if path is not None and e.filename == path:
                e.filename = f"--report-json {path}"
            raise


def after_pass(error: VerifyException, module: ModuleOp, previous) -> VerifyException:
    """The located form of `error`, raised verifying `module` after pass `previous` (None: the input):
    `verify_located`'s error (file:line:col of the failing op), then which pass left the IR — a bug of
    ours when it is one of fwdshim's passes."""
    try:
        verify_located(module)
        located = error
    except VerifyException as e:
        located = e
    if previous is None:
        return located
    ours = previous.name.startswith("fwd-") or previous.name == "forward-shim"
    return VerifyException(f"{located} (in the IR that `{previous.name}` produced{': a bug, please report it' if ours else ''})")


def _option_type(flag: str, name: str, option: str) -> str | None:
    """The type of option `option` of pass (flag `-p`) or target (`-t`) `name` as xDSL's `Incompatible
    types` message writes it (`<class 'bool'>`), or None where it is not known: the option xDSL could
    not take is the one of that type, not the first whose value reads the same (`mode=mark
    explain=mark` blamed `mode`)."""
    import typing

    try:
        if flag == "-t":
            from fwdshim.tools.targets import get_all_targets

            cls = get_all_targets()[name]()
        else:
            from fwdshim.passes import available_passes

            cls = available_passes()[name]()
        hint = typing.get_type_hints(cls).get(option.replace("-", "_"))
        fields = {f.name for f in dataclasses.fields(cls)}
    except Exception:  # not one of ours (xDSL's passes and targets), or it does not load
        return None
    return str(hint) if hint is not None and option.replace("-", "_") in fields else None


def _option_values(name: str, type_: object) -> list[str]:
    """The values a fwdshim pass option takes (empty: any value of its type)."""
    if name == "numerics":
        from fwdshim.classes import Q8MatKind

        return [k.value for k in Q8MatKind]
    if name == "mode":
        from fwdshim.passes.legalize import MODES

        return list(MODES)
    if name == "order":
        return ["shim", "shared"]
    if "bool" in str(type_):
        return ["true", "false"]
    return []


def _pass_help() -> str:
    """fwdshim's passes, each with its options: the values each takes and its default."""
    import dataclasses

    from fwdshim.passes import available_passes

    from fwdshim.codegen.tuning import Tuning, field_docs

    tuning_fields = {f.name for f in dataclasses.fields(Tuning)}
    lines = ["fwdshim passes (-p 'NAME{option=value ...}', options separated by spaces):"]
    for name, factory in available_passes().items():
        try:
            cls = factory()
            doc = (cls.__doc__ or "").strip().splitlines()
            fields = [f for f in dataclasses.fields(cls) if f.init]
        except Exception as e:  # a pass module that does not import must not take --help down
            lines.append(f"  {name:<28} (does not load: {type(e).__name__}: {e})")
            continue
        tuned = [f for f in fields if f.name in tuning_fields]
        fields = [f for f in fields if f.name not in tuning_fields]
        shown_fields = [f"{f.name}=…" for f in fields] + (["<tuning>=…"] if tuned else [])
        lines.append(f"  {name}" + ("{" + " ".join(shown_fields) + "}" if shown_fields else ""))
        lines.append(f"      {doc[0] if doc else ''}")
        if tuned:
            lines.append("      the back end's launch choices (`Tuning`, also options of -t numba), each KEY default: what it does")
            docs = field_docs()
            lines += [f"      {f.name} {_show(f.default)}: {docs.get(f.name, '')}" for f in tuned]
        for f in fields:
            default = f.default if f.default is not dataclasses.MISSING else None
            values = _option_values(f.name, f.type)
            if default is None and values == ["true", "false"]:  # an unset flag is off
                default = False
            shown = " | ".join(f"{v} (default)" if v == _show(default) else v for v in values) or str(f.type)
            if default is None or _show(default) not in values:
                shown += f"; default {_show(default)}"
            lines.append(f"      {f.name:<9} {shown}")
    if len(lines) == 1:
        lines.append("  (none in this checkout yet)")
    return "\n".join(lines)


def _show(value: object) -> str:
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _did_you_mean(text: str) -> str:
    """A parse error naming an unknown `fwd.` op: its first line ends with the closest op name of
    the dialect, when one is close (`fwd.rms_nrom` -> `fwd.rms_norm`)."""
    import difflib
    import re

    first, _, rest = text.partition("\n")
    m = re.search(r"Operation (fwd\.[\w.]+) is not registered$", first)
    if m is None:
        return text
    from fwdshim.dialects.fwd import Fwd

    names = [op.name for op in Fwd.operations]
    close = difflib.get_close_matches(m.group(1), names, n=1, cutoff=0.75)
    if not close:
        return text
    return f"{first} (did you mean {close[0]}?)" + (f"\n{rest}" if rest else "")


class _WholeNames(argparse.HelpFormatter):
    """argparse's help, its lines broken at spaces only: a pass name such as `convert-arith-to-riscv`
    stays whole (argparse broke it at its hyphens)."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width, break_on_hyphens=False)


class UsageError(Exception):
    """A bad command line (argparse's error, which would print the usage and exit 2)."""


_ONCE = {
    "-p": "one pipeline, its passes joined by commas (-p 'a,b')",
    "-t": "one target",
    "-o": "one output file",
    "-f": "one frontend",
    "--report-json": "one report file",
}
"""What to give instead of a second -p, -t, -o, -f or --report-json (`tools.store_once`)."""


def _usage_error(message: str) -> NoReturn:
    raise UsageError(message)


def _pipeline_error(text: str, args: list[str] | None = None) -> str:
    """xDSL's pipeline syntax error (a heading line, `pass-pipeline:1:C`, the text, a caret and the
    message) as `fwdshim-opt: error: -p: column C: message` (`-t:` when the text is the target's),
    then the text with its caret."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 5 or not lines[1].startswith("pass-pipeline:"):
        return f"fwdshim-opt: error: {' '.join(lines)}"
    col = lines[1].rsplit(":", 1)[-1]
    message = lines[4].strip()
    flag = "-t" if lines[2].strip() in _flag_values(args or [], ("-t", "--target")) else "-p"
    text, caret = lines[2], lines[3]
    comma = re.search(r"\{[^{}]*?(,)", text)
    if comma is not None:  # a comma inside a list value (`{a=[1,2]}`) separates its items, not options
        inside = text[text.rfind("{", 0, comma.start(1)) : comma.start(1)]
        comma = None if inside.count("[") > inside.count("]") else comma
    at = caret.find("^")
    head = re.search(r"([\w.-]+)\{[^{}]*?([A-Za-z_][\w-]*)=\s*$", text[:at]) if at >= 0 else None
    if head is not None and "argument value" in message and text[at:].startswith("["):  # `{a=[1,2]}`
        value = text[at : text.find("]", at) + 1 or None]
        message = f"option `{head[2]}` of `{head[1]}` takes one value, not the list `{value}`"
        comma = None
    if comma is not None and ("space" in message or "argument value" in message):  # `{a=1,b=2}`, `{a=1, b=2}`
        at = comma.start(1)
        col = str(at - (len(text) - len(text.lstrip())) + 1)
        caret = " " * at + "^"
        message = "pass options are separated by spaces, not commas: 'pass{a=1 b=2}'"
    return f"fwdshim-opt: error: {flag}: column {col}: {message[:1].lower()}{message[1:]}\n  {text}\n  {caret}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of `fwdshim-opt`. Returns the exit status (0 ok, 1 a user error, 130 interrupted)."""
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in args):
        print(
            "fwdshim-opt: parse, transform and print `fwd` IR (xDSL's opt driver with fwdshim's\n"
            "dialect, passes and targets).\n\n" + _pass_help() + "\n\n"
            "fwdshim targets (-t 'NAME{option=value}'):\n"
            "  numba{plan_only=… <tuning>=…}\n"
            "      The launch plan of each function of the IR (its decode step), then each kernel's Numba source.\n"
            "      plan_only  true | false (default): the plan alone, no kernel source\n"
            "      <tuning>   fwd-lower-numba's launch choices (above): the plan is built under them\n\n"
            "example: fwdshim-opt examples/llama_layer.mlir -p 'forward-shim{numerics=int8-act}'\n"
            "         fwdshim-opt examples/llama_layer.mlir -p 'forward-shim' -t 'numba{plan_only=true}'\n"
        )
    import warnings

    warnings.formatwarning = lambda message, *_args, **_kw: f"fwdshim-opt: warning: {message}\n"
    from fwdshim.tools.tuning_env import ENVIRONMENT

    for var in (v for v in ENVIRONMENT if v in os.environ):  # read by `fwdshim run` and `profile` only
        option = "merge=false" if var == "FWDSHIM_MERGE" else "pdl=off"
        warnings.warn(f"{var} is read by `fwdshim run` and `fwdshim profile`, not here: give fwd-lower-numba or -t numba "
                      f"the option (`-t 'numba{{{option}}}'`)", stacklevel=1)  # fmt: skip
    post_init = Attribute.__post_init__  # xDSL's --disable-verify replaces it for the whole process
    try:
        return _run(args)
    finally:
        Attribute.__post_init__ = post_init  # type: ignore[method-assign]


def _flag_values(args: list[str], flags: tuple[str, ...]) -> list[str]:
    """The values given to any of `flags` (`-p X`, `-p=X`, `--passes X`, ...)."""
    out = []
    for i, a in enumerate(args):
        if a in flags and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith(tuple(f + "=" for f in flags)):
            out.append(a.split("=", 1)[1])
    return out


def _pipelines(args: list[str]) -> list[str]:
    """The pipeline texts given with -p / --passes."""
    return _flag_values(args, ("-p", "--passes"))


def _specs(args: list[str]) -> list[tuple[str, str]]:
    """(flag, text) of every pass pipeline (`-p`) and target (`-t`) given."""
    return [("-p", t) for t in _pipelines(args)] + [("-t", t) for t in _flag_values(args, ("-t", "--target"))]


def _repeated_option(pipeline: str, flag: str = "-p") -> str | None:
    """An option given twice to one pass of `pipeline` (or to the target, `flag` -t) (as mlir-opt,
    an error: xDSL kept the last silently, so `{explain=true explain=false}` ran without the
    report), else None."""
    for name, keys, text in _pass_options(pipeline):
        seen: set[str] = set()
        for k in keys:
            if k in seen:
                return f"{flag}: option `{k}` given twice to `{name}` ({text})"
            seen.add(k)
    return None


def _pass_options(pipeline: str) -> list[tuple[str, list[str], str]]:
    """Each `pass{options}` of `pipeline`: the pass name, its option names in order, its text."""
    out = []
    for m in re.finditer(r"([\w.-]+)\{([^{}]*)\}", pipeline):
        body = re.sub(r'"[^"]*"', '""', m[2])
        out.append((m[1], re.findall(r"(?:^|\s)([A-Za-z_][\w-]*)(?==|\s|$)", body), m[0]))
    return out


def _known_options(bad: list[str], known: list[str]) -> str:
    """What an unknown-option error lists: `its options: a, b`, the launch tuning's fields (`Tuning`)
    summed up as one item when all of them are there, and the closest name to a misspelled one."""
    import difflib

    from fwdshim.codegen.tuning import Tuning

    tuning = [f.name for f in dataclasses.fields(Tuning)]
    listed = [k for k in known if k not in tuning] if set(tuning) <= set(known) else list(known)
    if len(listed) < len(known):
        listed.append("the launch tuning's options (`fwdshim-opt --help` lists them)")
    text = f"its options: {', '.join(listed) or 'none'}"
    close = [c for b in bad for c in difflib.get_close_matches(b.replace("-", "_"), known, n=1)]
    return text + (f"; did you mean `{close[0]}`?" if close else "")


def _unknown_option(message: str, specs: list[tuple[str, str]]) -> str:
    """xDSL's `Provided arguments ["x"] not found in expected arguments ["a", "b"]` with the pass (or
    target) that was given `x` named, as `-p: `pass` has no option `x` (its options: a, b)`; its
    `Incompatible types: given ('v',), expected T` as `-p: option `o` of `pass` takes ..., not `v``.
    `specs`: `_specs(args)`. Any other message is returned as it is."""
    m = re.match(r'Provided arguments \[(.*)\] not found in expected arguments \[(.*)\]$', message)
    if m is not None:
        bad = re.findall(r'"([^"]*)"', m[1])
        known = re.findall(r'"([^"]*)"', m[2])
        for flag, text in specs:
            for name, keys, _ in _pass_options(text):
                typed = {k.replace("-", "_"): k for k in keys}  # xDSL reads `max-iterations` as `max_iterations`
                if set(bad) <= set(typed) and set(typed) - set(bad) <= set(known):
                    opts = ", ".join(f"`{typed[b]}`" for b in bad)
                    return f"{flag}: `{name}` has no option {opts} ({_known_options(bad, known)})"
        return message
    m = re.match(r"Incompatible types: given \((.*)\), expected (.*)$", message)
    if m is not None and not m[1].endswith(","):  # several values: `numerics=int8-act,fwd-fuse`
        import ast

        try:
            given = [str(v) for v in ast.literal_eval(f"({m[1]},)")]
        except (ValueError, SyntaxError):
            return message
        for flag, text in specs:
            for pm in re.finditer(r"([\w.-]+)\{([^{}]*)\}", text):
                for om in re.finditer(r"(?:^|\s)([A-Za-z_][\w-]*)=(\"[^\"]*\"|\S+)", pm[2]):
                    written = [v.strip().strip('"') for v in om[2].split(",")]
                    if [v.lower() for v in written] != [g.lower() for g in given]:  # xDSL's `True` is `true`
                        continue
                    one = f"{flag}: option `{om[1]}` of `{pm[1]}` takes one value, not the list `{om[2]}`"
                    if flag == "-t" or not re.fullmatch(r"[A-Za-z][\w.-]*", written[1]):  # no pass after the comma
                        return one
                    return (f"{one} (a comma inside the braces separates values; the pipeline's passes are separated "
                            f"by commas after the `}}`: `{pm[1]}{{{om[1]}={written[0]}}},{written[1]}`)")  # fmt: skip
        return message
    m = re.match(r"Incompatible types: given \((.*),\), expected (.*)$", message)
    if m is not None:
        import ast

        try:
            given = str(ast.literal_eval(m[1]))
        except (ValueError, SyntaxError):
            return message
        for flag, text in specs:
            for pm in re.finditer(r"([\w.-]+)\{([^{}]*)\}", text):
                for om in re.finditer(r"(?:^|\s)([A-Za-z_][\w-]*)=(\"[^\"]*\"|\S+)", pm[2]):
                    if om[2].strip('"').lower() == given.lower() and _option_type(flag, pm[1], om[1]) in (None, m[2]):
                        values = _option_values(om[1], m[2])
                        takes = (", ".join(values[:-1]) + " or " + values[-1]) if len(values) > 1 else _type_words(m[2])
                        return f"{flag}: option `{om[1]}` of `{pm[1]}` takes {takes}, not `{om[2]}`"
    m = re.match(r"unknown numerics `(.*)` \(expected (.*)\)$", message)  # `fwd.numerics`' own words
    if m is not None:
        message = f"option `numerics` of `?` takes {m[2]}, not `{m[1]}`"
    m = re.match(r"option `([\w-]+)` of `([\w.?-]+)` takes (.*), not `(.*)`$", message)  # a pass's own check
    if m is not None:
        for flag, text in specs:
            for pm in re.finditer(r"([\w.-]+)\{([^{}]*)\}", text):
                item = rf"(?:[^\s\",]*,)*{re.escape(m[4])}(?:,[^\s\",]*)*"  # the value, or one of a list's
                if (m[2] in ("?", pm[1])) and re.search(rf"(?:^|\s){re.escape(m[1])}=\"?{item}\"?(?:\s|$)", pm[2]):
                    return f"{flag}: option `{m[1]}` of `{pm[1]}` takes {m[3]}, not `{m[4]}`"
        return message.replace("of `?` ", "")
    m = re.match(r"option `([\w-]+)` of `([\w.-]+)` needs a value", message)  # `bare_flags`: not a flag
    if m is not None:
        for flag, text in specs:
            if any(pm[1] == m[2] for pm in re.finditer(r"([\w.-]+)\{([^{}]*)\}", text)):
                return f"{flag}: {message}"
        return message
    m = re.match(r"Unrecognized passes: \[(.*)\]$", message)
    if m is not None:  # xDSL's Python list of the unknown names
        unknown = re.findall(r"'([^']*)'", m[1])
        names = ", ".join(f"`{n}`" for n in unknown)
        return f"-p: no pass{'es' if len(unknown) > 1 else ''} {names} (fwdshim-opt --help lists the passes)"
    return message


def _type_words(expected: str) -> str:
    """xDSL's expected type (`<class 'str'>`, `bool | None`) in words."""
    if "bool" in expected:
        return "true or false"
    if "int" in expected:
        return "a whole number"
    if "float" in expected:
        return "a number"
    return "a name"


_VALUED = ("-o", "--output-file", "-p", "--passes", "-t", "--target", "-f", "--report-json")


def _as_mlir(args: list[str]) -> list[str]:
    """`args` reading MLIR whatever the input's name (`-f mlir` unless a frontend is given: xDSL
    picks it by extension, `Unrecognized file extension ''`), and `-` as the input meaning stdin
    (as mlir-opt; xDSL reads stdin when no input is named), `-o -` stdout."""
    out: list[str] = []
    for i, a in enumerate(args):
        if a in ("-o", "--output-file") and i + 1 < len(args) and args[i + 1] == "-":
            continue  # `-o -`: stdout, the default (xDSL would write a file named `-`)
        if a == "-" and (i == 0 or args[i - 1] not in _VALUED or args[i - 1] in ("-o", "--output-file")):
            continue
        out.append(a)
    if not any(a == "-f" or a.startswith("-f=") for a in out):
        out = ["-f", "mlir", *out]
    return out


def _not_a_file(name: str | None) -> str | None:
    """Why input `name` cannot be read as IR: a character or block device other than /dev/null
    (`/dev/zero` never ends), else None (a missing file is left to the open; a pipe or stdin is read as a stream)."""
    if not name or name == "-":
        return None
    try:
        mode = os.stat(name).st_mode
    except OSError:
        return None
    if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) and not os.path.samefile(name, os.devnull):
        return "a device, not a file of IR"
    return None


def _same(a: str | None, b: str | None) -> bool:
    """`a` and `b` name one file (an existing one, or one path)."""
    if not a or not b or "-" in (a, b):
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _is_gguf(name: str) -> bool:
    """`name` is an existing file that starts with GGUF's magic (a model `-o` or `--report-json` would
    overwrite)."""
    try:
        with open(name, "rb") as f:
            return os.path.isfile(name) and f.read(4) == b"GGUF"
    except OSError:
        return False


def _report_clash(report: str | None, source: str | None, output: str | None) -> str | None:
    """Why `--report-json report` would overwrite the input or the IR's `-o` file, else None."""
    if _same(report, source):
        return "is the input file (give the report another name)"
    if _same(report, output):
        return f"is also -o {output} (give the report another name)"
    if report and report != "-" and output in (None, "-") and _is_stdout(report):
        return "is where the IR goes, stdout (give the IR a file, -o FILE, or the report another name)"
    return None


def _is_stdout(name: str) -> bool:
    """`name` is the file this process's stdout writes (`/dev/stdout`, `/proc/self/fd/1`, or the file
    the shell redirected stdout to)."""
    try:
        st, out = os.stat(name), os.fstat(sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def _after_target(text: str) -> int | None:
    """Where text follows the one target spec of `-t text`, or None: xDSL reads the first spec and
    ignores the rest (`numba{plan_only=true}}` and `numba,mlir` printed the numba target). A spec
    that does not parse is left to xDSL's own error."""
    from xdsl.utils.arg_spec import ArgSpecParseError, PipelineLexer, SpecTokenKind, _parse_spec

    lexer = PipelineLexer(text)
    try:
        _parse_spec(lexer)
        token = lexer.peek()
    except ArgSpecParseError:
        return None
    return None if token.kind is SpecTokenKind.EOF else token.span.start


def _run(args: list[str]) -> int:
    args = _as_mlir(args)
    tool: FwdOptMain | None = None
    for flag, pipeline in _specs(args):
        if re.search(r",\s*$", pipeline):  # xDSL reads `cse,` as `cse`
            at = pipeline.rindex(",")
            print(f"fwdshim-opt: error: {flag}: column {at + 1}: expected a {'pass' if flag == '-p' else 'target'} name after the last ','\n"
                  f"  {pipeline}\n  {' ' * at}^", file=sys.stderr)  # fmt: skip
            return 1
        if (why := _repeated_option(pipeline, flag)) is not None:
            print(f"fwdshim-opt: error: {why}", file=sys.stderr)
            return 1
        if flag == "-t" and not pipeline.strip():  # xDSL: `Error parsing pass pipeline specification`
            print("fwdshim-opt: error: -t: no target named (mlir, the default; numba; or one of xDSL's: fwdshim-opt --help)", file=sys.stderr)
            return 1
        if flag == "-t" and (at := _after_target(pipeline)) is not None:
            print(f"fwdshim-opt: error: -t: column {at + 1}: one target, and nothing after it\n"
                  f"  {pipeline}\n  {' ' * at}^", file=sys.stderr)  # fmt: skip
            return 1
    try:
        tool = FwdOptMain(description="Parse, transform and print fwd IR (the passes and the numba target are described above).", args=args)
        if tool.args.json and not tool.args.print_capabilities:
            print("fwdshim-opt: error: --json goes with --print-capabilities (the legality report as JSON: --report-json FILE)", file=sys.stderr)
            return 1
        if tool.args.print_capabilities:
            from fwdshim.passes.capabilities import capabilities_json, capabilities_table

            print(json.dumps(capabilities_json(), indent=1) if tool.args.json else capabilities_table(), end="\n" if tool.args.json else "")
            return 0
        if tool.args.report_json == "":
            print("fwdshim-opt: error: --report-json needs a file name", file=sys.stderr)
            return 1
        if tool.args.report_json == "-" and tool.args.output_file in (None, "-", "/dev/stdout"):
            print("fwdshim-opt: error: --report-json - writes the report to stdout, where the IR goes too: "
                  "give the IR a file (-o FILE)", file=sys.stderr)  # fmt: skip
            return 1
        for flag, name in (("-o", tool.args.output_file), ("--report-json", tool.args.report_json)):
            if name and (names_directory(name) or os.path.isdir(name)):
                what = "is a directory" if os.path.isdir(name) else f"names a directory (it ends in {name[-1]!r})"
                print(f"fwdshim-opt: error: {flag} {name}: {what}; give a file name", file=sys.stderr)
                return 1
        for flag, name in (("-o", tool.args.output_file), ("--report-json", tool.args.report_json)):
            if name and _is_gguf(name):
                print(f"fwdshim-opt: error: {flag} {name}: a GGUF model, which writing there would destroy "
                      "(give another file name)", file=sys.stderr)  # fmt: skip
                return 1
        if (why := _report_clash(tool.args.report_json, tool.args.input_file, tool.args.output_file)) is not None:
            print(f"fwdshim-opt: error: --report-json {tool.args.report_json}: {why}", file=sys.stderr)
            return 1
        if (why := _not_a_file(tool.args.input_file)) is not None:
            print(f"fwdshim-opt: error: {tool.args.input_file}: {why}", file=sys.stderr)
            return 1
        report = tool.args.report_json
        if report and report != "-" and _regular_output(report):  # before any work, as -o's
            _probe(report, "--report-json")
        tool.run()
        sys.stdout.flush()  # a closed pipe met here (below), not in Python's flush at exit
        if tool.stdout_closed:
            return EPIPE_STATUS
    except BrokenPipeError:  # `fwdshim-opt ... | head`: the IR's reader left; stop quietly
        quiet_stdout()
        return EPIPE_STATUS
    except UsageError as e:
        print(f"fwdshim-opt: error: {e} (fwdshim-opt --help lists the options)", file=sys.stderr)
        return 1
    except ArgSpecParseError as e:  # a BaseException in xDSL 0.74: `-p 'fwd-legalize{'`
        print(_pipeline_error(str(e), args), file=sys.stderr)
        return 1
    except ChunksFailed:
        return 1
    except PrintedNothing as e:
        print(f"fwdshim-opt: error: -t {e.target}: xDSL's `{e.target}` target printed nothing (it prints its own "
              "dialect's ops, and this IR holds none); fwd IR prints as mlir or numba", file=sys.stderr)  # fmt: skip
        return 1
    except (ParseError, DiagnosticException) as e:
        print(format_error(e, tool), file=sys.stderr)
        return 1
    except OSError as e:  # a missing input file, a directory, an unwritable output
        out = tool.args.output_file if tool is not None else None
        if e.filename is None and out and e.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO):
            e.filename = f"-o {out}"  # raised by the output's write or close, which name no file
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"fwdshim-opt: error: {where}{(e.strerror or str(e)).lower()}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as e:
        name = (tool.args.input_file if tool is not None else None) or "<stdin>"
        data = e.object if isinstance(e.object, bytes) else b""
        if data[:4] == b"GGUF":
            print(f"fwdshim-opt: error: {name}: a GGUF model, not IR (`fwdshim import {name} -o step.mlir` "
                  "writes its decode step as IR)", file=sys.stderr)  # fmt: skip
            return 1
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        where = f"{name}:{line}:{col}: " if data and name != "<stdin>" else f"{name}: "
        print(f"fwdshim-opt: error: {where}not UTF-8 text ({e.reason} at byte {e.start})", file=sys.stderr)
        return 1
    except ValueError as e:  # e.g. an unknown file extension or pass option
        print(f"fwdshim-opt: error: {_unknown_option(str(e), _specs(args))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fwdshim-opt: interrupted", file=sys.stderr)
        return 130
    except RecursionError:  # IR deeper than the parser counts (a 3000-term affine expression)
        if os.environ.get("FWDSHIM_TRACEBACK"):
            raise
        name = tool.get_input_name() if tool is not None else "stdin"
        print(f"fwdshim-opt: error: {name}: the IR nests too deep to process (FWDSHIM_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1
    except Exception as e:  # a bug, or IR that --disable-verify let through: one line unless asked
        if os.environ.get("FWDSHIM_TRACEBACK"):
            raise
        target = str(getattr(tool.args, "target", "") or "").split("{")[0] if tool is not None else ""
        if target and target not in ("mlir", "numba"):  # xDSL's own printers know none of fwd's ops
            lines = str(e).strip().splitlines()
            first = lines[0][:160] if len(lines) == 1 else ""  # not an op dumped over many lines
            print(f"fwdshim-opt: error: -t {target}: xDSL's `{target}` target cannot print this IR "
                  f"({type(e).__name__}{': ' + first if first else ''}); fwd IR prints as mlir or numba", file=sys.stderr)  # fmt: skip
            return 1
        unverified = tool is not None and tool.args.disable_verify
        why = "the input was not verified: --disable-verify" if unverified else "a bug in fwdshim: please report it"
        print(
            f"fwdshim-opt: internal error: {type(e).__name__}: {e} ({why}; FWDSHIM_TRACEBACK=1 shows where)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
