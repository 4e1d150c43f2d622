//! Printing modules as the pretty StableHLO text MLIR (and JAX) writes.
