"""The entry points: `fwdshim` (cli, runner), `fwdshim-opt` (driver, targets) and the `xdsl.universe` plug-in."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from fwdshim.files import temp_path, written


class StoreOnce(argparse._StoreAction):
    """argparse's `store`, refusing a second use of the option: argparse keeps the last silently
    (`-p a -p b` ran b alone, `--model a --model b` ran b). `hint` says what to give instead."""

    hint = "give it once"

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given_once", set())
        if self.dest in seen:
            parser.error(f"{'/'.join(self.option_strings)} given twice: {self.hint}")
        seen.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


def store_once(parser: argparse.ArgumentParser, hints: dict[str, str] | None = None) -> None:
    """Make every plain `store` option of `parser` and of its commands a `StoreOnce`; `hints`: what to
    say instead, by option string (`{"-p": "one pipeline, ..."}`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                store_once(sub, hints)
        elif type(action) is argparse._StoreAction and action.option_strings:
            action.__class__ = StoreOnce
            hint = next((h for o, h in (hints or {}).items() if o in action.option_strings), None)
            if hint is not None:
                action.hint = hint  # type: ignore[attr-defined]


def names_directory(path: str | os.PathLike) -> bool:
    """`path` ends in a separator (`out/`): it names a directory, whether or not one exists there
    (`Path` and `realpath` drop the separator: `out/` was written as a file named `out`)."""
    text = os.fspath(path)
    return isinstance(text, str) and text.endswith(tuple(s for s in (os.sep, os.altsep) if s))


def _refuse_directory(path: str | Path) -> None:
    if names_directory(path):
        raise IsADirectoryError(errno.EISDIR, "names a directory (the path ends in a separator)", os.fspath(path))


def probe_write(path: str | Path) -> None:
    """Raise the OSError `write_whole(path, ...)` would meet creating its temporary file (a missing or
    read-only directory, a path ending in a separator), before any work is done. In a directory that
    exists but holds no new file (`/proc`: "No such file or directory" for a file that is there), the
    error says so."""
    _refuse_directory(path)
    tmp = temp_path(Path(os.path.realpath(path)))
    try:
        tmp.touch()
    except OSError as e:
        if not tmp.parent.is_dir():
            raise
        raise OSError(e.errno, f"no new file can be created in {tmp.parent}: {e.strerror or e}", str(path)) from None
    tmp.unlink()


def write_whole(path: str | Path, write: Callable[[IO], object], binary: bool = True) -> None:
    """`write(f)` into a temporary file beside `path` (a symbolic link's target: the link stays a
    link), then moved over it in one step, keeping an existing file's permissions: the old file stays
    until the new one is whole (so the output may be the file just read), and a failed write leaves
    it as it was (`files.written`: an interrupted one leaves no temporary file, and a killed one's is
    removed by the next write). Raises OSError (IsADirectoryError for a path ending in a separator)."""
    _refuse_directory(path)
    target = Path(os.path.realpath(path))
    with written(target) as tmp:
        with tmp.open("wb" if binary else "w") as f:
            write(f)
        if target.exists():
            os.chmod(tmp, stat.S_IMODE(target.stat().st_mode))
        os.replace(tmp, target)


def package_version() -> str:
    """The installed package's version (pyproject), or `unknown (not installed)` when run from a tree
    not installed: what `fwdshim --version` and `fwdshim-opt --version` print."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fwdshim")
    except PackageNotFoundError:
        return "unknown (not installed)"


EPIPE_STATUS = 1
"""The exit status of `fwdshim` and `fwdshim-opt` when stdout's reader left early (`| head`):
Python's own (its `signal` docs exit 1 on EPIPE), without an error line, as a tool killed by SIGPIPE
prints none."""


def quiet_stdout() -> None:
    """stdout's reader is gone (`| head`): what is still written there, and Python's flush at exit,
    goes to /dev/null instead of raising BrokenPipeError again (the `signal` module's note on SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


TERMINATED_STATUS = 128 + signal.SIGTERM
"""The exit status after SIGTERM (143, as a shell reports a process SIGTERM ended): the command
cleaned up first (`terminated_raises`)."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread as Ctrl-C raises KeyboardInterrupt (`terminated_raises`), so
    that every `finally` and cleanup runs: a temporary file is removed, a child `pip` is killed. A
    BaseException, as KeyboardInterrupt: `except Exception` does not swallow it."""


@contextlib.contextmanager
def terminated_raises() -> Iterator[None]:
    """While the body runs, SIGTERM raises `Terminated` (SIGTERM's default action ends the process
    before any cleanup: `timeout`, `docker stop` and CI cancellations left partial files behind).
    Outside the main thread, or where the signal cannot be handled, it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated

    old = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
