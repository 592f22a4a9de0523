"""Text for one-line messages (the ground floor: no import of xDSL, so `fwdshim --help` stays quick)."""

from __future__ import annotations


def printable(line: str) -> str:
    """`line` with every character that is not printable escaped as Python writes it (`\\r`,
    `\\x1c`; a tab kept): a key, tensor or file name read from a file or written in the input that
    holds a carriage return or a separator (which `splitlines` breaks at) stays on the error's one
    line."""
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in line)
