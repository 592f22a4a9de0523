"""The entry points: `fwdshim` (cli, runner), `fwdshim-opt` (driver, targets) and the `xdsl.universe` plug-in."""


def package_version() -> str:
    """The installed package's version (pyproject), or `unknown (not installed)` when run from a tree
    not installed: what `fwdshim --version` and `fwdshim-opt --version` print."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fwdshim")
    except PackageNotFoundError:
        return "unknown (not installed)"
