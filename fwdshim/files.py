"""Files written whole: one mechanism for every file fwdshim writes (converted weights, a fetched model,
the IR and the logits a command writes).

- `written(path)`: a temporary name beside `path` unique to this call, `.<name>.<pid>-<random>.tmp`
  (`.part` for a fetched model), removed when the body fails (Ctrl-C, SIGTERM, a full disk); the
  caller moves it into place (`os.replace`), so readers see the old file or the whole new one.
- `sweep(directory)`: what a writer killed before it could clean up (kill -9, a power cut) left
  there: temporary files and download directories (`.download-<pid>-<random>`) whose writer's pid
  is no longer a running process (`os.kill(pid, 0)`). A live process's files are never touched, so
  two runs may share one cache. (A pid is checked on this host's pid namespace: a cache shared by
  containers of other pid namespaces may lose a live writer's temporary file; that writer then
  fails with a one-line error.) `written` sweeps its target's own leftovers; the model cache sweeps
  the whole `models/` directory (`frontend.cache.sweep_cache`).
- `why_not_written(error, path, needed)`: the cause of a failed write in words that name the
  directory: a full disk (numpy's `tofile` says only "N requested and M written", with no errno),
  a read-only file system or directory, a quota.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>[0-9]+)-[0-9a-f]{8}\.(?:tmp|part)$")
"""A temporary file `temp_path` names: `.<name>.<pid>-<8 hex digits>.tmp` (or `.part`)."""

_DOWNLOAD = re.compile(r"^\.download-(?P<pid>[0-9]+)-")
"""A download directory `temp_directory` makes: `.download-<pid>-<random>`."""

_SHORT_WRITE = re.compile(r"([0-9]+) requested and ([0-9]+) written")
"""numpy's `tofile` on a short write (a full disk): an OSError without errno or strerror."""


def temp_path(target: Path, kind: str = "tmp") -> Path:
    """A fresh temporary name beside `target` holding this process's pid: `.<name>.<pid>-<random>.<kind>`."""
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.{kind}")


def alive(pid: int) -> bool:
    """Whether `pid` is a running process (another user's included; a zombie counts as running)."""
    if pid == os.getpid():
        return True
    if pid <= 0:  # os.kill(0, 0) would ask about this process group: no writer has such a pid
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return True
    except (ProcessLookupError, OverflowError):  # gone, or a pid no process can have
        return False
    return True


def sweep(directory: str | Path, name: str | None = None) -> list[Path]:
    """Remove the temporary files (and download directories) in `directory` whose writer no longer
    runs; with `name`, only the temporary files of the file `name`. Returns what was removed. A file
    another sweeper removed first, or one that cannot be removed (a read-only directory), is left to
    the write that follows to fail on, and is not an error here."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        m = _TEMP.match(entry.name)
        is_dir = False
        if m is None or (name is not None and m["name"] != name):
            m = _DOWNLOAD.match(entry.name) if name is None else None
            is_dir = True
        if m is None or alive(int(m["pid"])):
            continue
        path = Path(entry.path)
        try:
            if is_dir and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path)
            elif not is_dir and not entry.is_dir(follow_symlinks=False):
                path.unlink()
            else:
                continue
        except OSError:
            continue
        removed.append(path)
    return removed


@contextmanager
def written(path: Path, kind: str = "tmp") -> Iterator[Path]:
    """A temporary name beside `path` to write the file into (`temp_path`), after sweeping the dead
    writers' temporary files of `path`; removed when the body raises (any exception, Ctrl-C and
    SIGTERM included). The caller moves it over `path` with `os.replace` inside the body."""
    sweep(path.parent, path.name)
    tmp = temp_path(path, kind)
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def temp_directory(parent: Path, prefix: str = "download") -> tempfile.TemporaryDirectory:
    """A temporary directory `.<prefix>-<pid>-<random>` in `parent` (removed when its `with` ends;
    `sweep` removes one a dead process left)."""
    return tempfile.TemporaryDirectory(dir=parent, prefix=f".{prefix}-{os.getpid()}-")


def size_text(n: int) -> str:
    """A byte count for people: `84 GB`, `145 MB`, `1.4 MB`, `60 kB`, `512 bytes` (powers of 1000)."""
    if n >= 10**10:
        return f"{n / 1e9:.0f} GB"
    if n >= 10**7:
        return f"{n / 1e6:.0f} MB"
    if n >= 10**6:
        return f"{n / 1e6:.1f} MB"
    if n >= 10**4:
        return f"{n / 1e3:.0f} kB"
    return f"{n} bytes"


class WriteFailed(OSError):
    """A write that failed, its cause already said (`why_not_written` with what the writer knew, such
    as the bytes the file needs): `e.why`, and `e.errno` and `e.filename` as the OSError had them."""

    def __init__(self, e: OSError, path: str | Path, needed: int | None = None):
        super().__init__(e.errno, e.strerror or str(e), os.fspath(path))
        self.why = why_not_written(e, path, needed)

    def __str__(self) -> str:
        return self.why


def why_not_written(e: OSError, path: str | Path, needed: int | None = None) -> str:
    """Why writing `path` failed, in words naming its directory (the tail of a one-line error):
    `no space left on the device holding DIR: 145 MB needed, 52 MB free`, `DIR is read-only: a
    read-only file system`, `DIR is read-only: permission denied`, else the system's own words.
    `needed`: the bytes the whole file takes, when known."""
    if isinstance(e, WriteFailed):
        return e.why
    directory = Path(path).parent
    code = e.errno
    short = _SHORT_WRITE.search(str(e)) if code is None else None
    if short is not None or code == errno.ENOSPC:
        space = ""
        try:
            free = shutil.disk_usage(directory).free
        except OSError:
            free = None
        if needed is not None:
            space = f": {size_text(needed)} needed" + (f", {size_text(free)} free" if free is not None else "")
        elif free is not None:
            space = f": {size_text(free)} free"
        return f"no space left on the device holding {directory}{space}"
    if code == errno.EDQUOT:
        return f"the disk quota of {directory} is exceeded"
    if code == errno.EROFS:
        return f"{directory} is read-only: a read-only file system"
    if code in (errno.EACCES, errno.EPERM):
        return f"{directory} is read-only: permission denied"
    text = e.strerror or str(e) or type(e).__name__
    return " ".join(text.split())


CACHE_ENV = "FWDSHIM_CACHE"
"""The environment variable naming fwdshim's cache directory (models and kernels)."""


def cache_root() -> Path:
    """`$FWDSHIM_CACHE`, or `~/.cache/fwdshim`: the models live under `models/`, the generated kernel
    modules under `kernels/` (the one place either cache reads the environment)."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "fwdshim"
