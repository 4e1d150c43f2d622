//! Dense row-major tensors over any scalar: the evaluator's storage.

/// A row-major tensor. `data.len() == shape.iter().product()` (1 for a scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<S> {
    pub shape: Vec<usize>,
    pub data: Vec<S>,
}

impl<S: Clone> Tensor<S> {
    pub fn new(shape: Vec<usize>, data: Vec<S>) -> Self {
        assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "tensor data length does not match shape {shape:?}"
        );
        Tensor { shape, data }
    }

    pub fn filled(shape: Vec<usize>, value: S) -> Self {
        let n = shape.iter().product();
        Tensor {
            shape,
            data: vec![value; n],
        }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Row-major strides of `shape`.
    pub fn strides(&self) -> Vec<usize> {
        row_major_strides(&self.shape)
    }

    pub fn map<T>(&self, f: impl FnMut(&S) -> T) -> Tensor<T> {
        Tensor {
            shape: self.shape.clone(),
            data: self.data.iter().map(f).collect(),
        }
    }
}

/// Row-major strides of `shape` (the last dimension has stride 1).
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}
