//! Whole-module verification: SSA scoping, terminators, call signatures, and
//! every op's types re-inferred.
