"""The forward shim: the `Shim` protocol, the seed's `ForwardShim` (supports, fits, kernel_refusal),
the refusal catalogue, the legality verdict of one stage, the numerics contract and the legality report."""
