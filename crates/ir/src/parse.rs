//! Parsing StableHLO text: pretty and generic op forms, JAX export decorations.
