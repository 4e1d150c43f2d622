pub(crate) mod cse;
