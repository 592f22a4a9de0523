"""The entry points: `fwdshim` (cli, runner), `fwdshim-opt` (driver, targets) and the `xdsl.universe` plug-in."""
