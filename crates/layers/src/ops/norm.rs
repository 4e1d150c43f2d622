//! placeholder (being written)

pub fn catalog() -> Vec<super::OpCase> {
    Vec::new()
}
