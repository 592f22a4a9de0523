"""Source locations and located diagnostics.

xDSL gives an op no location unless the input spells `loc(...)`: `LocatingParser` records where each op
was parsed as a `FileLineColLoc`, so a verify error, a refusal or an explain row can name
`file:line:col`. Locations survive rewrites that clone ops (xDSL copies `location`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind


class LocatingParser(Parser):
    """A `Parser` that sets each parsed op's `location` to where its text starts.

    `line_offset` shifts line numbers (for `--split-input-file` chunks)."""

    def __init__(self, ctx, input: str | bytes, name: str = "<unknown>", line_offset: int = 0):
        super().__init__(ctx, input, name)
        self._line_offset = line_offset

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        """As xDSL's, but an input without ops (empty, comments only, an empty split chunk) is an
        empty module, as in `mlir-opt`, not "Could not parse entire input!"."""
        if allow_implicit_module and self._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return super().parse_module(allow_implicit_module)

    def parse_operation(self) -> Operation:
        span = self._current_token.span
        try:
            op = super().parse_operation()
        except VerifyException as e:
            # An attribute or type whose parameters do not verify (raised while it is built): a parse
            # error at the op, not an unlocated message.
            self.raise_error(str(e.args[0]) if e.args else str(e), span)
        if isinstance(op.location, UnknownLoc):
            loc = span.get_location()
            op.location = FileLineColLoc(
                StringAttr(loc.file), IntAttr(loc.line + self._line_offset), IntAttr(loc.col)
            )
        return op


    def _get_op_by_name(self, name: str) -> type[Operation]:
        """As xDSL's, but an unknown op is reported at its name (xDSL points at the next token)."""
        if op_type := self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack):
            return op_type
        content = self.lexer.input.content
        needle = name.encode() if isinstance(content, bytes) else name
        start = content.rfind(needle, 0, self._current_token.span.start)
        if start < 0:
            self.raise_error(f"Operation {name} is not registered")
        end = start + len(needle)
        if content[start - 1 : start] in ('"', b'"'):  # the generic form's quoted name
            start, end = start - 1, end + 1
        self.raise_error(f"Operation {name} is not registered", start, end)


def where(op: Operation) -> str:
    """`file:line:col` of an op, or `<unknown>` where it has no file location."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}"
    return "<unknown>"


def error_at(op: Operation, message: str) -> str:
    """A one-line located error: `file:line:col: error: message`."""
    return f"{where(op)}: error: {message}"


def parse_error_line(e: ParseError) -> str:
    """A ParseError as `file:line:col: error: message` followed by the source line and carets."""
    context = e.span.print_with_context(e.msg)
    lines = context.splitlines()
    head = f"{e.span.get_location()}: error: {e.msg}"
    # print_with_context starts with the location line and ends with the message; keep the middle.
    body = [ln for ln in lines[1:] if ln.strip() != e.msg.strip()]
    return "\n".join([head, *body])


def verify_located(root: Operation) -> None:
    """Verify `root`; on failure raise a VerifyException naming the failing op's `file:line:col`.

    Raises: VerifyException("file:line:col: error: <the verifier's message>")."""
    try:
        root.verify()
        return
    except VerifyException as e:
        first = e
    # The culprit: the first op, in program order, that fails on its own (a fused op whose part is bad
    # verifies on its own, so the part is named, not the op around it).
    culprit = None
    for op in root.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            culprit, first = op, e
            break
    message = str(first.args[0]) if first.args else str(first)
    if culprit is None:
        raise VerifyException(f"error: {message}") from None
    raise VerifyException(error_at(culprit, message)) from None
