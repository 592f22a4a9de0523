r"""`FwdLexer`: xDSL 0.74's MLIR lexer with its string literals lexed in linear time, and read back
as strings when the printer wrote them with escapes.

xDSL's `MLIRLexer._lex_string_literal` matches `"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`:
a `+` nested in a `*`. On a string with no closing quote the regex engine tries every way of
splitting the rest of the line before it gives up, so the time doubles with each character (a line
of 40 never ends). Every string-like token goes through it: a string attribute, a quoted op name,
a `@"symbol"`, a `loc("file")`, a dictionary key, a resource blob. Here the body is matched one
character or one escape per step, possessively (never re-tried), and a failure says why: the line
ends first (located at the opening quote) or an escape is not one (located at the backslash).

xDSL's printer writes every byte of a string outside printable ASCII as an escape (`blk.0.é` as
`"blk.0.\C3\A9"`, MLIR's form), and its lexer called any literal whose escapes made non-ASCII bytes
`BYTES_LIT`, which no string attribute, property or keyword accepts: printed IR did not parse back.
Here a literal is `STRING_LIT` when its bytes are UTF-8 (as xDSL's own docstring says it should be),
`BYTES_LIT` only when they are not.

A character outside MLIR's grammar where a token starts is named by its code point (`U+00A0
NO-BREAK SPACE`): xDSL printed it raw (`Unexpected character:  `), invisible for a no-break space, a
zero-width space, a byte order mark or a control character; and a digit other than `0`-`9` (`６`,
`٣`, `²`) started a number, which Python's `int` then read as its value (`tensor<６4xf32>` was
`tensor<64xf32>`).

A decimal integer literal longer than Python converts (`sys.get_int_max_str_digits()`, 4300 digits)
is an error at the literal (it was a ValueError where xDSL converts it). `number_literals` lists the
numbers of a stretch of input, for errors that must name one (`LocatingParser`: an integer or float
that does not fit the attribute being built).
"""

from __future__ import annotations

import re
import sys
import unicodedata

from xdsl.utils.exceptions import ParseError
from xdsl.utils.lexer import Input, Position, Span, Token
from xdsl.utils.mlir_lexer import MLIRLexer, MLIRToken, MLIRTokenKind, StringLiteral

_STRING_BODY = re.compile(r'(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+')
r"""What may stand between the quotes: a character other than a quote, a backslash or a line break,
or an escape (`\n`, `\t`, `\\`, `\"`, two hex digits)."""

_ESCAPES = '\\n \\t \\\\ \\" or two hex digits'


class FwdLexer(MLIRLexer):
    def lex(self) -> MLIRToken:
        """As xDSL's; a token starting with a character that is not printable ASCII and not a letter
        is an error naming the character by its code point.

        Raises: ParseError at the character."""
        self._consume_whitespace()
        c = self.input.at(self.pos)
        if c is not None and not (c.isascii() and c.isprintable()) and not c.isalpha():
            raise ParseError(Span(self.pos, self.pos + 1, self.input), _unexpected(c, self.pos))
        return super().lex()

    def _lex_string_literal(self, start_pos: Position) -> MLIRToken:
        """The string literal whose opening quote is at `start_pos`: `STRING_LIT`, or `BYTES_LIT`
        when its escapes make bytes that are not UTF-8.

        Raises: ParseError at the opening quote when the line or the input ends first, at the
        backslash of an escape that is not one."""
        content = self.input.content
        end = _STRING_BODY.match(content, start_pos + 1).end()  # type: ignore[union-attr]  # `*+` matches
        stop = content[end : end + 1]
        if stop == "\\":
            escape = content[end : end + 2].rstrip("\n\v\f")
            raise ParseError(
                Span(end, end + len(escape), self.input),
                f"invalid escape `{escape}` in a string literal (escapes: {_ESCAPES})",
            )
        if stop != '"':
            where = "the end of the input" if stop == "" else "the end of the line"
            raise ParseError(
                Span(start_pos, start_pos + 1, self.input),
                f'string literal not terminated: no closing `"` before {where}',
            )
        self.pos = end + 1
        literal = StringLiteral(start_pos, self.pos, self.input)
        if "\\" in literal.text and not _is_utf8(literal.bytes_contents):
            return Token(MLIRTokenKind.BYTES_LIT, literal)
        return Token(MLIRTokenKind.STRING_LIT, literal)

    def _lex_number(self, start_pos: Position) -> MLIRToken:
        """As xDSL's; a decimal integer too long to convert is an error at it."""
        token = super()._lex_number(start_pos)
        limit = sys.get_int_max_str_digits()
        digits = len(token.text)
        hexadecimal = token.text[:2] in ("0x", "0X")
        if token.kind == MLIRTokenKind.INTEGER_LIT and 0 < limit < digits and not hexadecimal:
            raise ParseError(token.span, f"integer literal too long: {digits} digits (at most {limit})")
        return token


def _unexpected(c: str, pos: int) -> str:
    """The message for character `c` where a token should start (at offset `pos` of the input)."""
    code = f"U+{ord(c):04X}"
    name = unicodedata.name(c, "")
    what = f"{code} {name}" if name else f"{code}, a control character"
    if c == "\ufeff" and pos == 0:
        return f"unexpected character {what}: a byte order mark (save the file as UTF-8 without one)"
    if c.isnumeric():
        return f"unexpected character {what}: a number is written with the digits 0-9"
    if c.isspace() or c == "\u200b":
        return f"unexpected character {what}: only ASCII spaces, tabs and line breaks separate tokens"
    return f"unexpected character {what}"


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def number_literals(input: Input, start: Position, end: Position) -> list[tuple[Span, int | float]]:
    """The integer and float literals of `input` from `start` up to `end` with their values, a minus
    sign just before one included (up to text that does not lex)."""
    lexer = FwdLexer(input)
    lexer.pos = start
    found: list[tuple[Span, int | float]] = []
    previous: MLIRToken | None = None
    try:
        while (token := lexer.lex()).kind != MLIRTokenKind.EOF and token.span.start < end:
            if token.kind in (MLIRTokenKind.INTEGER_LIT, MLIRTokenKind.FLOAT_LIT):
                value = (
                    token.kind.get_int_value(token.span)
                    if token.kind == MLIRTokenKind.INTEGER_LIT
                    else token.kind.get_float_value(token.span)
                )
                span = token.span
                negative = previous is not None and previous.kind == MLIRTokenKind.MINUS
                if negative and previous.span.end == span.start:  # type: ignore[union-attr]
                    value, span = -value, Span(previous.span.start, span.end, input)
                found.append((span, value))
            previous = token
    except ParseError:
        pass
    return found
