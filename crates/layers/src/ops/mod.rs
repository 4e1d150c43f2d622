//! The op set: one module per op family.

pub mod activation;
