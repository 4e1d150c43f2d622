//! .npy files ↔ evaluator values, checked against a function signature.
//! Reading and writing the format is npyz's job; this module owns the mapping of
//! numpy dtypes onto StableHLO element types and the error messages a user sees.

use anyhow::{bail, Context, Result};
use den::value::Value;
use den::Tensor;
use ir::{ElemType, TensorType};
use npyz::WriterBuilder;
use std::path::Path;

/// The numpy dtype string certgrad writes for (and expects of) an element type.
/// bf16/f16 travel as float32 (numpy has no bf16); values are rounded on entry.
fn npy_dtype(elem: ElemType) -> &'static str {
    match elem {
        ElemType::F16 | ElemType::BF16 | ElemType::F32 => "<f4",
        ElemType::F64 => "<f8",
        ElemType::I1 => "|b1",
        ElemType::I8 => "|i1",
        ElemType::UI8 => "|u1",
        ElemType::I32 => "<i4",
        ElemType::UI32 => "<u4",
        ElemType::I64 => "<i8",
        ElemType::UI64 => "<u8",
    }
}

fn numpy_name(dtype: &str) -> &str {
    match dtype {
        "<f4" => "float32",
        "<f8" => "float64",
        "|b1" => "bool",
        "|i1" => "int8",
        "|u1" => "uint8",
        "<i4" => "int32",
        "<u4" => "uint32",
        "<i8" => "int64",
        "<u8" => "uint64",
        other => other,
    }
}

/// Read `path` as an input of type `ty` (argument `index` of the function).
pub fn read_input(path: &Path, index: usize, ty: &TensorType) -> Result<Value<f32>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .with_context(|| format!("{}: not a valid .npy file", path.display()))?;
    let dtype = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => bail!(
            "{}: structured dtype {:?} is not supported",
            path.display(),
            other
        ),
    };
    let shape: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    let want = npy_dtype(ty.elem);
    if dtype != want || shape != ty.shape {
        bail!(
            "{}: argument {index} expects {} {:?} ({ty}), found {} {:?}",
            path.display(),
            numpy_name(want),
            ty.shape,
            numpy_name(&dtype),
            shape
        );
    }
    if npy.order() != npyz::Order::C {
        bail!(
            "{}: Fortran-order arrays are not supported; save with np.ascontiguousarray",
            path.display()
        );
    }
    let ushape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
    let ctx = || format!("{}: truncated or malformed data", path.display());
    let value = match want {
        "<f4" => {
            let data: Vec<f32> = npy.into_vec().with_context(ctx)?;
            let t = Tensor::new(ushape, data);
            // bf16/f16 arguments: round once on entry, as a device would store them.
            let t = t.map(|x| den::scalar::Scalar::round_to(*x, ty.elem));
            Value::Float(t, ty.elem)
        }
        "<f8" => {
            let data: Vec<f64> = npy.into_vec().with_context(ctx)?;
            Value::Float(
                Tensor::new(ushape, data.iter().map(|&x| x as f32).collect()),
                ty.elem,
            )
        }
        "|b1" => {
            let data: Vec<bool> = npy.into_vec().with_context(ctx)?;
            Value::Int(
                Tensor::new(ushape, data.into_iter().map(i64::from).collect()),
                ty.elem,
            )
        }
        "|i1" => int_value::<i8>(npy, ushape, ty.elem, &ctx)?,
        "|u1" => int_value::<u8>(npy, ushape, ty.elem, &ctx)?,
        "<i4" => int_value::<i32>(npy, ushape, ty.elem, &ctx)?,
        "<u4" => int_value::<u32>(npy, ushape, ty.elem, &ctx)?,
        "<i8" => int_value::<i64>(npy, ushape, ty.elem, &ctx)?,
        _ => {
            let data: Vec<u64> = npy.into_vec().with_context(ctx)?;
            let data = data.into_iter().map(|x| x as i64).collect();
            Value::Int(Tensor::new(ushape, data), ty.elem)
        }
    };
    Ok(value)
}

fn int_value<T: npyz::Deserialize + Into<i64>>(
    npy: npyz::NpyFile<&[u8]>,
    shape: Vec<usize>,
    elem: ElemType,
    ctx: &dyn Fn() -> String,
) -> Result<Value<f32>> {
    let data: Vec<T> = npy.into_vec().with_context(ctx)?;
    let data = data.into_iter().map(Into::into).collect();
    Ok(Value::Int(Tensor::new(shape, data), elem))
}

/// Write one evaluator output as .npy (C order).
pub fn write_output(path: &Path, value: &Value<f32>) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    let (shape, elem) = match value {
        Value::Float(t, e) => (&t.shape, *e),
        Value::Int(t, e) => (&t.shape, *e),
    };
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let dtype = npy_dtype(elem);
    let ctx = || format!("writing {}", path.display());
    match value {
        Value::Float(t, _) if dtype == "<f8" => {
            write_all(&mut w, &shape, t.data.iter().map(|&x| x as f64)).with_context(ctx)?
        }
        Value::Float(t, _) => {
            write_all(&mut w, &shape, t.data.iter().copied()).with_context(ctx)?
        }
        Value::Int(t, _) => match dtype {
            "|b1" => write_all(&mut w, &shape, t.data.iter().map(|&x| x != 0)),
            "|i1" => write_all(&mut w, &shape, t.data.iter().map(|&x| x as i8)),
            "|u1" => write_all(&mut w, &shape, t.data.iter().map(|&x| x as u8)),
            "<i4" => write_all(&mut w, &shape, t.data.iter().map(|&x| x as i32)),
            "<u4" => write_all(&mut w, &shape, t.data.iter().map(|&x| x as u32)),
            "<u8" => write_all(&mut w, &shape, t.data.iter().map(|&x| x as u64)),
            _ => write_all(&mut w, &shape, t.data.iter().copied()),
        }
        .with_context(ctx)?,
    }
    Ok(())
}

fn write_all<T: npyz::AutoSerialize>(
    w: &mut impl std::io::Write,
    shape: &[u64],
    items: impl Iterator<Item = T>,
) -> std::io::Result<()> {
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(w)
        .begin_nd()?;
    writer.extend(items)?;
    writer.finish()
}
