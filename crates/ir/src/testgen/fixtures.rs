//! Small hand-built modules that tests of several crates share (the random
//! generator's fixed-shape counterparts): each is the one way its shape is
//! built, so two crates' tests of the same op run the same program.

use crate::builder::FuncBuilder;
use crate::module::{Func, Module, Visibility};
use crate::ops::{BinaryOp, OpKind};
use crate::types::{ElemType, TensorType};

/// A module holding the single function `f`, unnamed and without attributes.
pub fn single_func_module(f: Func) -> Module {
    Module {
        name: None,
        attrs: None,
        funcs: vec![f],
    }
}

/// `all_reduce` over `replica_groups` with no channel and replica (not
/// device) ids.
pub fn all_reduce_kind(replica_groups: Vec<Vec<i64>>) -> OpKind {
    OpKind::AllReduce {
        replica_groups,
        channel_id: None,
        use_global_device_ids: false,
    }
}

/// `main(x: f32[shape]) = all_reduce(x)` over `replica_groups`, its region the
/// plain binary `op`.
pub fn all_reduce_module(op: BinaryOp, replica_groups: Vec<Vec<i64>>, shape: &[i64]) -> Module {
    let mut fb = FuncBuilder::new("main", Visibility::Public);
    let x = fb.param(TensorType::f32(shape.to_vec()));
    let body = fb
        .binary_region(op, ElemType::F32)
        .expect("a binary region over f32 scalars builds");
    let y = fb
        .push(all_reduce_kind(replica_groups), &[x], vec![body], None)
        .expect("all_reduce of one f32 tensor type-checks")[0];
    single_func_module(fb.finish(&[y]).expect("one result"))
}
