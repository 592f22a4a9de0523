"""IR in tests: a context with the dialects `fwdshim-opt` loads, and text parsed and verified with
locations (`file:line:col`), as the driver parses it."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func

from fwdshim.diagnostics import LocatingParser
from fwdshim.dialects.fwd import Fwd


def context() -> Context:
    """A context with builtin, func and fwd loaded."""
    ctx = Context()
    for d in (Builtin, Func, Fwd):
        ctx.load_dialect(d)
    return ctx


def parse(text: str, name: str = "t.mlir") -> ModuleOp:
    """`text` parsed (its ops located in file `name`) and verified."""
    module = LocatingParser(context(), text, name).parse_module()
    module.verify()
    return module
