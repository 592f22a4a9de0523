"""Source locations and located diagnostics.

xDSL gives an op no location unless the input spells `loc(...)`: `LocatingParser` records where each op
was parsed as a `FileLineColLoc`, so a verify error, a refusal or an explain row can name
`file:line:col`. Locations survive rewrites that clone ops (xDSL copies `location`).

`verify_located` also checks what xDSL's verifier does not: that every operand is defined before its
use (`%s = fwd.silu %s` verifies in xDSL, and would send a fusion pass round a cycle forever).
"""

from __future__ import annotations

import bisect
import functools
import re
import struct
import weakref
from collections.abc import Callable
from typing import NoReturn

from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    CallSiteLoc,
    FileLineColLoc,
    Float32Type,
    FloatAttr,
    FusedLoc,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    UnknownLoc,
    UnregisteredAttr,
    UnregisteredOp,
)
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from fwdshim.lexer import FwdLexer, number_literals
from fwdshim.text import printable


MAX_NESTING = 48
"""How deep operations, attributes, types, locations and tensor literals may nest in parsed IR (each
op, attribute, type, location or `[` of a literal inside another is one level; a decode step needs
about 8). xDSL parses, verifies and prints recursively: past ~90 levels of some of these, Python's
recursion limit was an "internal error: RecursionError". At 48, the deepest construct (nested fused
ops) takes ~600 of Python's 1000 frames through parse, forward-shim and print."""

_TOO_DEEP = f"nesting too deep: more than {MAX_NESTING} levels of operations, attributes and types"


def _nested(method):
    """`method` of `LocatingParser` counted as one level of nesting: past `MAX_NESTING`, a parse
    error at the current token."""

    @functools.wraps(method)
    def counted(self, *args, **kwargs):
        if self._depth >= MAX_NESTING:
            self.raise_error(_TOO_DEEP)
        self._depth += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._depth -= 1

    return counted


class LocatingParser(Parser):
    """A `Parser` that sets each parsed op's `location` to where its text starts.

    `line_offset` shifts line numbers (for `--split-input-file` chunks). The input is lexed by
    `FwdLexer` (string literals in linear time). Nesting deeper than `MAX_NESTING` is a parse error."""

    _depth: int = 0
    _unknown_written_to: int = -1
    """Where the last `loc(unknown)` written in the input ends (`parse_optional_location`)."""

    def __init__(self, ctx, input: str | bytes, name: str = "<unknown>", line_offset: int = 0):
        super().__init__(ctx, "", name)  # xDSL's lexer would lex the first token: it may hang
        text = input.decode("utf-8") if isinstance(input, bytes) else input
        self._parser_state = ParserState(FwdLexer(Input(text, name)))
        self._line_offset = line_offset
        self._first_use: dict[str, Span] = {}
        self._newlines: list[int] | None = None

    def _line_col(self, span: Span) -> tuple[int, int]:
        """The 1-based line (within the input, plus the span's own offset) and column where `span`
        starts, as xDSL's `Span.get_location` has them, from the input's newline positions found
        once (xDSL counts the newlines from the input's start for every op: quadratic in the ops)."""
        if self._newlines is None:
            content, newline = self.lexer.input.content, self.lexer.input.newline
            found, i = [], content.find(newline)
            while i >= 0:
                found.append(i)
                i = content.find(newline, i + 1)
            self._newlines = found
        before = bisect.bisect_left(self._newlines, span.start)
        line_start = self._newlines[before - 1] + 1 if before else 0
        return before + 1 + span.line_offset, span.start - line_start + 1

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """As xDSL's, but an input without ops (empty, comments only, an empty split chunk) is an
        empty module, as in `mlir-opt`, not "Could not parse entire input!"."""
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        try:
            return super().parse_module(allow_implicit_module)
        except RecursionError:  # a recursion `MAX_NESTING` does not count (an affine expression)
            self.raise_error(_TOO_DEEP.split(":")[0])
        except ParseError as e:
            # xDSL names undefined values at the end of the input: name the first one at its use.
            undefined = [n for n in self.forward_ssa_references if n in self._first_use]
            if not e.msg.startswith("values used but not defined") or not undefined:
                raise
            name = undefined[0]
            self.raise_error(f"use of undefined value %{name}", self._first_use[name])

    def resolve_operand(self, operand: UnresolvedOperand, type):
        """As xDSL's, remembering where a value not yet defined is first used."""
        if operand.operand_name not in self.ssa_values:
            self._first_use.setdefault(operand.operand_name, operand.span)
        return super().resolve_operand(operand, type)

    def _parse_block(self) -> Block:
        """As xDSL's, with a message where a region is not closed (xDSL says " in block definition")."""
        kind = self._current_token.kind
        if kind == MLIRTokenKind.EOF:
            self.raise_error("unexpected end of input: expected `}` to close the region")
        if kind != MLIRTokenKind.CARET_IDENT:
            self.raise_error("expected an operation, `}` or a block label (`^bb1:`)")
        self._check_block_name()
        return super()._parse_block()

    def parse_optional_successor(self):
        """As xDSL's, with a located error for a block name xDSL cannot hold (`cf.br ^1`)."""
        if self._current_token.kind == MLIRTokenKind.CARET_IDENT:
            self._check_block_name()
        return super().parse_optional_successor()

    def _check_block_name(self) -> None:
        """A block label (`^name`, the current token) xDSL can name a block by, else a located error
        (xDSL raised a bare ValueError: "fwdshim-opt: error: ('Invalid Block name format ...)")."""
        name = self._current_token.text[1:]
        if not Block.is_valid_name(name) and not Block.is_default_block_name(name):
            self.raise_error(
                f"block label ^{name}: a block name here starts with a letter, `_`, `$` or `.` and holds only "
                "those, digits and `-` (`^bb0`, `^entry`)",
                self._current_token.span,
            )

    @_nested
    def parse_optional_attribute(self):
        return super().parse_optional_attribute()

    @_nested
    def parse_optional_type(self):
        return super().parse_optional_type()

    @_nested
    def _parse_location(self):
        return super()._parse_location()

    def parse_optional_location(self):
        """As xDSL's, remembering where a written `loc(unknown)` ends: `parse_operation` keeps it
        unknown (it had put the parse position there, so printed IR did not parse back the same)."""
        loc = super().parse_optional_location()
        if isinstance(loc, UnknownLoc):
            self._unknown_written_to = self._current_token.span.start
        return loc

    @_nested
    def _parse_tensor_literal(self):
        return super()._parse_tensor_literal()

    _in_fwd_op: bool = False
    """Whether the op being parsed is a `fwd` op (its float properties are f32: `parse_optional_float`)."""

    def parse_optional_float(self, *, allow_negative: bool = True) -> float | None:
        """As xDSL's; inside a `fwd` op, whose float properties are f32, an integer literal in
        hexadecimal is the f32's bit pattern (`eps 0x3727C5AC` is 1e-05), as MLIR and the generic
        form (`<{eps = 0x3727C5AC : f32}>`) read it. One of more than 32 bits is an error at it."""
        token = self._current_token
        if self._in_fwd_op and token.kind == MLIRTokenKind.INTEGER_LIT and token.text[:2] in ("0x", "0X"):
            bits = int(token.text, 16)
            if bits >= 1 << 32:
                self.raise_error(f"{token.text} is no f32 bit pattern: a hexadecimal float literal of a fwd op has 8 digits at most", token.span)
            self._consume_token()
            return struct.unpack("<f", bits.to_bytes(4, "little"))[0]
        return super().parse_optional_float(allow_negative=allow_negative)

    @_nested
    def parse_operation(self) -> Operation:
        outer = self._in_fwd_op
        self._in_fwd_op = self._op_name_at(self._current_token.span).startswith("fwd.")
        try:
            return self._parse_located_operation()
        finally:
            self._in_fwd_op = outer

    def _parse_located_operation(self) -> Operation:
        span = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as e:
            # An attribute or type whose parameters do not verify (raised while it is built): a parse
            # error at the op (at the integer, when it is one out of its type's range), not an
            # unlocated message.
            message = str(e.args[0]) if e.args else str(e)
            m = _INTEGER_OUT_OF_RANGE.match(message)
            at = m and self._last_number(span.start, lambda v: str(v) == m[1])
            if m and self._op_name_at(span).startswith("fwd."):  # signed i64s (xDSL's range is a signless one's)
                message = f"{m[1]} is out of range of a signed 64-bit integer (the largest is 9223372036854775807)"
            b = _BYTES_NOT_STRING.match(message)
            if b and self._op_name_at(span).startswith("fwd."):  # `fwd.weight "blk\FF"`: no UTF-8 text
                self._not_utf8(b[1], span)
            self.raise_error(message, at or span)
        except (struct.error, OverflowError) as e:
            self._number_out_of_range(span, e)
        if op.name.startswith("fwd."):
            self._promote_inherent(op, span)
            self._check_fwd_numbers(op, span)
            for value in op.properties.values():
                if isinstance(value, BytesAttr):  # `into "k\C3"`: escapes that make no UTF-8 text
                    self._not_utf8(_bytes_literal(value.data), span)
        written = self._unknown_written_to == self._current_token.span.start  # op's own trailing loc(unknown)
        line, col = self._line_col(span)
        here = FileLineColLoc(StringAttr(span.input.name), IntAttr(line + self._line_offset), IntAttr(col))
        if isinstance(op.location, UnknownLoc) and not written:
            op.location = here
        elif file_location(op.location) is None:
            _PARSED_AT[op] = here  # a written loc("name") or loc(unknown) names no file: `where` says where it was parsed
        return op

    def _not_utf8(self, literal: str, op: Span) -> NoReturn:
        """A string literal of a `fwd` op whose escapes make bytes that are not UTF-8 text (xDSL kept
        them as bytes, which its verifier called `"blk\\FF" should be of base attribute string`): an
        error at the literal (at the op where its text is not found as written)."""
        found = self.lexer.input.content[op.start : self.pos].lower().find(literal.lower())  # `\c3` as `\C3`
        at = Span(op.start + found, op.start + found + len(literal), self.lexer.input) if found >= 0 else op
        self.raise_error(f"{literal} is not UTF-8 text: a fwd op's names (weights, caches) are UTF-8 strings", at)

    def _promote_inherent(self, op: Operation, span: Span) -> None:
        """A `fwd` op's property written in the generic form's attribute dictionary (`{into = "k"}`
        where `<{into = "k"}>` is meant) is its property, as MLIR reads inherent attributes there; xDSL
        kept it a discardable attribute, which the op did not read (a silu `into` a cache was pure)
        and which printed as `into "k"`, a property once parsed again. Given both ways: an error."""
        definition = getattr(type(op), "get_irdl_definition", None)
        if definition is None:
            return
        for name in definition().properties:
            if name not in op.attributes:
                continue
            if name in op.properties:
                self.raise_error(f"{op.name} is given `{name}` both as a property and as an attribute", span)
            op.properties[name] = op.attributes.pop(name)

    def _op_name_at(self, span: Span) -> str:
        """The name of the op written at `span` (`fwd.rope` of `%r = fwd.rope ...`, a generic form's
        quoted name unquoted), or ""."""
        content = self.lexer.input.content
        text = content[span.start : span.start + 4096]
        m = _OP_NAME.match(text.decode(errors="replace") if isinstance(text, bytes) else text)
        return m[1] if m else ""

    def _check_fwd_numbers(self, op: Operation, span: Span) -> None:
        """A `fwd` op's numbers are taken as written or refused at the number: an integer property
        written past `2^63 - 1` (xDSL stores it in the i64 as its two's complement: `l
        18446744073709551615` became `l -1` and a verify error about -1) and a nonzero float its f32
        property stores as zero (`eps 1.0e-50` became `eps 0.0` silently). Every `fwd` integer
        property is a signed i64 and every float one an f32; an attribute of the op's dictionary
        keeps xDSL's (and MLIR's) reading."""
        f32_zero = any(
            isinstance(a, FloatAttr) and isinstance(a.type, Float32Type) and a.value.data == 0.0
            for a in op.properties.values()
        )
        ints = [a for p in op.properties.values() for a in (p.data if isinstance(p, ArrayAttr) else (p,))]
        wrapped = {a.value.data + (1 << 64) for a in ints if isinstance(a, IntegerAttr) and a.value.data < 0}
        for at, v in number_literals(self.lexer.input, span.start, self.pos):
            if isinstance(v, int) and v in wrapped:
                self.raise_error(
                    f"{at.text} is out of range of a signed 64-bit integer (the largest is 9223372036854775807)", at
                )
            if f32_zero and isinstance(v, float) and v != 0.0 and struct.unpack("<f", struct.pack("<f", v))[0] == 0.0:
                self.raise_error(f"{at.text} is too small for an f32: it would be stored as 0.0", at)

    def _last_number(self, start: int, pick: Callable[[int | float], bool]) -> Span | None:
        """The last number literal from `start` to the current token that `pick` chooses."""
        spans = [s for s, v in number_literals(self.lexer.input, start, self.pos) if pick(v)]
        return spans[-1] if spans else None

    def _number_out_of_range(self, op: Span, e: Exception) -> NoReturn:
        """A number the attribute being built cannot store (xDSL packs it with `struct` and fails:
        `covers [9223372036854775808]`, `eps 1.0e39` for an f32): an error at the number."""
        m = _FLOAT_FORMAT.search(str(e)) if isinstance(e, OverflowError) else None
        if m is not None:
            fmt = m[1]
            at = self._last_number(op.start, lambda v: isinstance(v, float) and not _packs(fmt, v))
            if at is not None:
                type_name = _FLOAT_TYPES.get(fmt, "its float type")
                self.raise_error(f"{at.text} is out of range of {type_name}", at)
        if isinstance(e, struct.error):
            at = self._last_number(op.start, lambda v: isinstance(v, int) and not _packs("q", v))
            if at is not None:
                self.raise_error(f"{at.text} is out of range of a signed 64-bit integer", at)
        self.raise_error(f"a number out of range of its attribute ({e})", op)

    def _parse_optional_integer_or_float_type(self):
        """As xDSL's, but an integer type wider than MLIR's limit is an error at it (xDSL computed
        `1 << width`: `i100000000000000000000` ran out of memory or overflowed)."""
        token = self._current_token
        m = _INTEGER_TYPE.fullmatch(token.text) if token.kind == MLIRTokenKind.BARE_IDENT else None
        if m is not None and (len(m[1].lstrip("0")) > 8 or int(m[1]) > _MAX_INTEGER_WIDTH):
            self.raise_error(f"integer bitwidth is limited to {_MAX_INTEGER_WIDTH} bits", token.span)
        return super()._parse_optional_integer_or_float_type()

    def _get_op_by_name(self, name: str) -> type[Operation]:
        """As xDSL's, but an unknown op is reported at its name (xDSL points at the next token), and
        `--allow-unregistered-dialect` admits no unknown op of a registered dialect (mlir-opt's rule:
        the flag admits unregistered dialects, not unknown ops of registered ones)."""
        op_type = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if op_type is not None and not (issubclass(op_type, UnregisteredOp) and self._registered(name)):
            return op_type
        content = self.lexer.input.content
        needle = name.encode() if isinstance(content, bytes) else name
        start = content.rfind(needle, 0, self._current_token.span.start)
        if start < 0:
            self.raise_error(f"Operation {name} is not registered")
        end = start + len(needle)
        if content[start - 1 : start] in ('"', b'"'):  # the generic form's quoted name
            start, end = start - 1, end + 1
        self.raise_error(f"Operation {name} is not registered{self._why_not_unregistered(name)}", start, end)

    def _parse_dialect_type_or_attribute_body(self, attr_name: str, is_type: bool, *args):
        """As xDSL's, but an unknown attribute or type is an error at its name (xDSL points after
        it), and under `--allow-unregistered-dialect` one of a registered dialect is too (as an
        unknown op is)."""
        start = self._current_token.span.start
        sigil_and_dialect = ("!" if is_type else "#") + attr_name.split(".", 1)[0]
        at = max(self.lexer.input.content.rfind(sigil_and_dialect, 0, start), 0)
        try:
            attr = super()._parse_dialect_type_or_attribute_body(attr_name, is_type, *args)
        except ParseError as e:
            if e.msg.endswith("is not registered") and e.span.start >= start:
                self.raise_error(e.msg, at, start)
            raise
        if not isinstance(attr, UnregisteredAttr) or not self._registered(attr.attr_name.data):
            return attr
        name = attr.attr_name.data
        what = "type" if is_type else "attribute"
        self.raise_error(f"'{name}' is not registered{self._why_not_unregistered(name, what)}", at, start)

    def _registered(self, name: str) -> bool:
        """Whether the dialect `name` starts with (`fwd` of `fwd.bogus`) is registered."""
        return "." in name and name.split(".", 1)[0] in self.ctx.registered_dialect_names

    def _why_not_unregistered(self, name: str, what: str = "op") -> str:
        """Why `--allow-unregistered-dialect` did not admit `name` (nothing when it is not given)."""
        if not self.ctx.allow_unregistered:
            return ""
        dialect = name.split(".", 1)[0]
        return (
            f" (the `{dialect}` dialect is registered: --allow-unregistered-dialect admits {what}s of"
            " unregistered dialects only)"
        )


_INTEGER_OUT_OF_RANGE = re.compile(r"Integer value (-?\d+) is out of range")
_BYTES_NOT_STRING = re.compile(r'^(".*") should be of base attribute string$', re.DOTALL)
_OP_NAME = re.compile(r'\s*(?:%[^=]*=\s*)?"?([A-Za-z_][\w.$]*)')
_FLOAT_FORMAT = re.compile(r"with (\w) format")
_FLOAT_TYPES = {"f": "f32", "e": "f16"}
_INTEGER_TYPE = re.compile(r"[su]?i(\d+)")
_MAX_INTEGER_WIDTH = (1 << 24) - 1  # MLIR's IntegerType::kMaxWidth


def _packs(fmt: str, value: int | float) -> bool:
    try:
        struct.pack(f"<{fmt}", value)
    except (struct.error, OverflowError):
        return False
    return True


def op_label(op: Operation) -> str:
    """The op's name as written: an op of an unregistered dialect by its own name (`foo.bar`), not
    xDSL's `builtin.unregistered`."""
    name = getattr(op, "op_name", None)
    return name.data if name is not None and hasattr(name, "data") else op.name


_PARSED_AT: weakref.WeakKeyDictionary[Operation, FileLineColLoc] = weakref.WeakKeyDictionary()
"""Where `LocatingParser` parsed the ops whose written `loc(...)` names no file (`loc("q_proj")`)."""


def _bytes_literal(data: bytes) -> str:
    """`data` as MLIR writes a string literal of bytes (`"k\\C3"`: xDSL's printer)."""
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out).print_bytes_literal(data)
    return out.getvalue()


def file_location(loc: object) -> FileLineColLoc | None:
    """The file location a diagnostic shows for `loc`, as MLIR's source manager finds it: a
    `FileLineColLoc` itself, a name's (`loc("q_proj"("m.py":3:1))`) its child's, a call site's its
    callee's, a fused location's its first that has one; None for `loc(unknown)` and a bare name."""
    if isinstance(loc, FileLineColLoc):
        return loc
    if isinstance(loc, NameLoc):
        return file_location(loc.location)
    if isinstance(loc, CallSiteLoc):
        return file_location(loc.callee) or file_location(loc.caller)
    if isinstance(loc, FusedLoc):
        for part in loc.locations:
            found = file_location(part)
            if found is not None:
                return found
    return None


INSERTED_BY = "inserted by "
"""The prefix of the name location (`loc("inserted by fwd-quantize-activations"(f.mlir:3:3))`) a pass
gives an op it inserted: the child location is the value the op reads, so the op is reported there."""


def inserted_location(pass_name: str, at: object) -> NameLoc:
    """The location of an op `pass_name` inserted: a name location over `at` (the location of what it
    reads). `where` shows `at`'s `file:line:col`; `inserted_by` reads the pass back."""
    return NameLoc(StringAttr(INSERTED_BY + pass_name), at)


def inserted_by(op: Operation) -> str | None:
    """The pass that inserted `op` (its location is `inserted_location`'s), or None (the input's op)."""
    loc = op.location
    if isinstance(loc, NameLoc) and loc.desc.data.startswith(INSERTED_BY):
        return loc.desc.data.removeprefix(INSERTED_BY)
    return None


def where(op: Operation) -> str:
    """`file:line:col` of an op: its location's (`file_location`: a name's, a call site's callee's, a
    fused location's first) or, for a written location that names no file, where the op was parsed.
    Where it has neither (parsed by stock `xdsl-opt`, built in Python), `<unknown>`, naming its first
    result when that has a name (`<unknown> %t`), else the op and its place in its function
    (`<unknown> fwd.quantize, op 3 of @f`: ops built in Python have neither location nor names)."""
    loc = file_location(op.location) or _PARSED_AT.get(op)
    if loc is not None:  # a file name of the input's own `loc("a\nb":1:1)` stays on the error's line
        return f"{printable(loc.filename.data)}:{loc.line.data}:{loc.column.data}"
    hint = op.results[0].name_hint if op.results else None
    if hint:
        return f"<unknown> %{hint}"
    block = op.parent_block()
    if block is None:
        return f"<unknown> {op_label(op)}"
    index = next(i for i, o in enumerate(block.ops) if o is op)
    func = op.parent_op()
    while func is not None and not hasattr(func, "sym_name"):
        func = func.parent_op()
    name = getattr(getattr(func, "sym_name", None), "data", None)
    return f"<unknown> {op_label(op)}, op {index} of " + (f"@{name}" if name else "its block")


def error_at(op: Operation, message: str) -> str:
    """A one-line located error: `file:line:col: error: message`."""
    return f"{where(op)}: error: {message}"


def parse_error_line(e: ParseError) -> str:
    """A ParseError as `file:line:col: error: message` followed by the source line and carets (a
    long line cut to `SNIPPET_CHARS` around them: `clip_snippet`)."""
    context = e.span.print_with_context(e.msg)
    lines = context.splitlines()
    head = f"{e.span.get_location()}: error: {e.msg}"
    # print_with_context starts with the location line and ends with the message; keep the middle.
    body = [ln for ln in lines[1:] if ln.strip() != e.msg.strip()]
    out: list[str] = []
    i = 0
    while i < len(body):  # each source line with the caret line under it, cut together
        if i + 1 < len(body) and set(body[i + 1].strip()) == {"^"}:
            out.extend(clip_snippet(body[i], body[i + 1]))
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "\n".join([head, *out])


SNIPPET_CHARS = 160
"""The most characters of a source line an error shows (a generated file's one-line module can be
megabytes): the part around the caret, `...` where it is cut."""


def clip_snippet(source: str, carets: str) -> list[str]:
    """`source` and the caret line under it, cut to about `SNIPPET_CHARS` around the first caret
    (`...` marks a cut; the carets stay under their characters)."""
    if len(source) <= SNIPPET_CHARS:
        return [source, carets]
    at = max(0, len(carets) - len(carets.lstrip()))
    lo = max(0, min(at - SNIPPET_CHARS // 2, len(source) - SNIPPET_CHARS))
    hi = min(len(source), lo + SNIPPET_CHARS)
    head, tail = ("..." if lo > 0 else ""), ("..." if hi < len(source) else "")
    mark = carets[lo:hi].rstrip()
    return [head + source[lo:hi] + tail, " " * len(head) + mark[: hi - lo]]


_LOCATED_LINE = re.compile(r"(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): error: ")


def caret_under(source: str, col: int) -> str:
    """The source line `source` and, under it, a `^` at 1-based column `col` (MLIR's snippet; a tab
    before the column is kept, so that the caret lines up however tabs are shown; a long line cut
    around the caret, `clip_snippet`)."""
    pad = "".join(c if c == "\t" else " " for c in source[: col - 1])
    return "\n".join(clip_snippet(source, f"{pad}^"))


def with_source_lines(message: str, source_line: Callable[[str, int], str | None]) -> str:
    """`message` with each of its located error lines (`file:line:col: error: ...`) followed by the
    source line and a caret under the column, as a parse error prints (`parse_error_line`).

    `source_line(file, line)` is the text of that line as parsed, or None where it is not known (a
    location spelled in the input naming another file, an op built in Python): that error stays one
    line. The reasons are not touched."""
    out: list[str] = []
    for text in message.split("\n"):
        out.append(text)
        m = _LOCATED_LINE.match(text)
        source = m and source_line(m["file"], int(m["line"]))
        if source is None or not source.strip():
            continue
        col = int(m["col"])
        if 1 <= col <= len(source):
            out.append(caret_under(source, col))
    return "\n".join(out)


def _value_name(v: SSAValue) -> str:
    return f"%{v.name_hint}" if v.name_hint else "a value"


def _block_positions(root: Operation) -> dict[Operation, int]:
    """Each op nested under `root` mapped to its index in its block."""
    pos: dict[Operation, int] = {}
    for op in root.walk():
        for region in op.regions:
            for block in region.blocks:
                for i, o in enumerate(block.ops):
                    pos[o] = i
    return pos


def _ancestor_in(block: Block | None, op: Operation) -> Operation | None:
    """`op`, or the op enclosing it, that sits in `block` (None when `block` does not enclose `op`)."""
    a: Operation | None = op
    while a is not None and a.parent_block() is not block:
        a = a.parent_op()
    return a


def _dominance_problem(v: SSAValue, user: Operation, pos: dict[Operation, int]) -> str | None:
    """Why `v` cannot be read by `user` (xDSL checks no dominance), or None.

    Regions of one block only (a decode step has no control flow): `v` must be defined earlier in
    the user's block or in a block enclosing it. Multi-block regions are not judged."""
    if isinstance(v, OpResult):
        block = v.op.parent_block()
    elif isinstance(v, BlockArgument):
        block = v.block
    else:
        return None
    region = block.parent if block is not None else None
    if region is None or len(region.blocks) > 1:
        return None
    a = _ancestor_in(block, user)
    if a is None:
        return f"{user.name} reads {_value_name(v)}, defined in a region that does not enclose it"
    if isinstance(v, OpResult) and (a is v.op or pos.get(v.op, 0) > pos.get(a, 0)):
        return f"{user.name} reads {_value_name(v)} before it is defined"
    return None


def check_dominance(root: Operation) -> None:
    """Every operand is defined before its use (in program order, in an enclosing block).

    Raises: VerifyException("file:line:col: error: fwd.silu reads %t before it is defined")."""
    pos = _block_positions(root)
    for op in root.walk():
        for v in op.operands:
            why = _dominance_problem(v, op, pos)
            if why is not None:
                raise VerifyException(error_at(op, why))


_REDEFINED = re.compile(r'Redefinition of symbol "(.*)"')


def _located_culprit(culprit: Operation, message: str) -> Operation:
    """A better op to name than an unlocated `culprit` (the implicit module of a symbol clash:
    the second definition of the symbol)."""
    m = _REDEFINED.fullmatch(message)
    if m is None or not isinstance(culprit.location, UnknownLoc):
        return culprit
    seen = 0
    for op in culprit.walk():
        name = op.properties.get("sym_name") or op.attributes.get("sym_name")
        if op is not culprit and op.parent_op() is culprit and isinstance(name, StringAttr) and name.data == m[1]:
            seen += 1
            if seen == 2:
                return op
    return culprit


def _check_sizes(root: Operation) -> None:
    """Every tensor an op yields holds at most 2^63 - 1 values (MLIR's limit: xDSL parses larger
    shapes, which then planned kernels of absurd grids). Raises the located VerifyException."""
    from xdsl.dialects.builtin import TensorType

    from fwdshim.dialects.attributes import MAX_ELEMENTS

    for op in root.walk():
        for res in op.results:
            t = res.type
            if isinstance(t, TensorType):
                dims = [d.data for d in t.shape.data]
                if any(d < 0 for d in dims):
                    continue  # dynamic: the op's own verifier says what it takes
                n = 1
                for d in dims:
                    n *= d
                if n > MAX_ELEMENTS:
                    message = f"a tensor of {'x'.join(map(str, dims))} holds {n} values, past {MAX_ELEMENTS} (2^63 - 1, a shape's limit)"
                    raise VerifyException(error_at(_located_culprit(op, message), message)) from None


def verify_located(root: Operation) -> None:
    """Verify `root`, and that every operand is defined before its use; on failure raise a
    VerifyException naming the failing op's `file:line:col`.

    Raises: VerifyException("file:line:col: error: <the verifier's message>")."""
    _check_sizes(root)
    try:
        root.verify()
    except VerifyException as e:
        first = e
    else:
        check_dominance(root)
        return
    # The culprit: the first op, in program order, that fails on its own (a fused op whose part is bad
    # verifies on its own, so the part is named, not the op around it).
    culprit = None
    for op in root.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            culprit, first = op, e
            break
    message = _without_class_reprs(str(first.args[0]) if first.args else str(first))
    if culprit is not None:
        message = _property_words(culprit, message)
    if culprit is None:
        raise VerifyException(f"error: {message}") from None
    raise VerifyException(error_at(_located_culprit(culprit, message), message)) from None


_NOT_OF_BASE = re.compile(r"^(.+) should be of base attribute ([\w.]+)$")
_TAKES = {
    "f32": "an f32 number (`1.0 : f32`)",
    "float": "an f32 number (`1.0 : f32`)",
    "integer": "an integer (`3 : i64`)",
    "string": 'a string (`"name"`)',
    "array": "a list `[...]`",
}


def _property_words(op: Operation, message: str) -> str:
    """xDSL's `X should be of base attribute Y` for a property of `op` whose value is not of the kind
    its definition takes, in the IR's words: which property, what it was given, what it takes
    (`fwd.softcap` property `cap` is `3.0 : f64`; it takes an f32 number). Other messages as they are."""
    m = _NOT_OF_BASE.match(message)
    definition = getattr(type(op), "get_irdl_definition", None)
    if m is None or definition is None:
        return message
    from xdsl.irdl import ConstraintContext

    defs = definition().properties
    for name, value in op.properties.items():
        prop = defs.get(name)
        if prop is None:
            continue
        try:
            prop.constr.verify(value, ConstraintContext())
        except VerifyException:
            takes = _TAKES.get(m[2], f"a `{m[2]}` attribute")
            return f"{op.name} property `{name}` is `{printable(_attribute_text(value))}`; it takes {takes}"
    return message


def _attribute_text(attr) -> str:
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


_CLASS_REPR = re.compile(r"'?<class '([\w.]+)'>'?")
_GOT_ONE_FOR_A_LIST = re.compile(r"expected ArrayAttr attribute, but got (#?[\w.]+)$")


def _without_class_reprs(message: str) -> str:
    """xDSL's verifier message with a Python class repr (`'<class 'fwdshim.dialects.attributes.AccessAttr'>'`)
    as the attribute's IR name (`#fwd.access`), and `expected ArrayAttr attribute, but got X` said as
    a list expected where one attribute was given (a generic form's `access = #fwd.access<whole>`)."""

    def name(m: re.Match) -> str:
        module, _, cls = m[1].rpartition(".")
        try:
            import importlib

            ir_name = getattr(getattr(importlib.import_module(module), cls), "name", None)
        except (ImportError, AttributeError, ValueError):
            ir_name = None
        return f"#{ir_name}" if isinstance(ir_name, str) else cls

    message = _CLASS_REPR.sub(name, message)
    m = _GOT_ONE_FOR_A_LIST.search(message)
    if m is not None:
        message = message[: m.start()] + f"expected a list of attributes `[...]`, but got one {m[1]} attribute"
    return message
