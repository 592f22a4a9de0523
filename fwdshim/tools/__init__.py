"""The entry points: `fwdshim` (cli, runner), `fwdshim-opt` (driver, targets) and the `xdsl.universe` plug-in."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO


def _beside(target: Path) -> Path:
    """The temporary file `write_whole` writes before moving it over `target`."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def probe_write(path: str | Path) -> None:
    """Raise the OSError `write_whole(path, ...)` would meet creating its temporary file (a missing or
    read-only directory), before any work is done."""
    tmp = _beside(Path(os.path.realpath(path)))
    tmp.touch()
    tmp.unlink()


def write_whole(path: str | Path, write: Callable[[IO], object], binary: bool = True) -> None:
    """`write(f)` into a temporary file beside `path` (a symbolic link's target: the link stays a
    link), then moved over it in one step, keeping an existing file's permissions: the old file stays
    until the new one is whole (so the output may be the file just read), and a failed write leaves
    it as it was. Raises OSError."""
    target = Path(os.path.realpath(path))
    tmp = _beside(target)
    try:
        with tmp.open("wb" if binary else "w") as f:
            write(f)
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def package_version() -> str:
    """The installed package's version (pyproject), or `unknown (not installed)` when run from a tree
    not installed: what `fwdshim --version` and `fwdshim-opt --version` print."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fwdshim")
    except PackageNotFoundError:
        return "unknown (not installed)"
