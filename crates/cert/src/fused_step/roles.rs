//! The roles of a fused step's arguments and results, found from its
//! dataflow and, where the text carries them, its names: which result is the
//! loss, which arguments are parameters (the loss depends on them and an
//! output carries them elementwise, θ' = θ − …), optimizer state (carried,
//! the loss does not read it), data and labels (the loss reads them, nothing
//! carries them), hyper-parameters (neither). Ambiguity is an error that
//! lists the candidates, never a guess.

use super::graph::{Def, Graph};
use ir::TensorType;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum ArgRole {
    /// A trained parameter, updated by result `output`.
    Param { output: usize },
    /// Carried state the loss does not read (moments, running statistics,
    /// an EMA shadow, a counter), updated by result `output`.
    State { output: usize },
    /// Read by the loss, carried by no result (images, drop-path scales).
    Data,
    /// The data argument holding the targets: drawn as one-hot rows (float)
    /// or class indices (integer).
    Labels,
    /// Read by neither the loss nor carried (learning rate, bias
    /// corrections, keys).
    Hyper,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ResultRole {
    Loss,
    /// The updated value of argument `arg`.
    Update {
        arg: usize,
    },
    /// Anything else (metrics, bias-correction factors).
    Other,
}

#[derive(Clone, Debug)]
pub struct Slot<R> {
    pub name: String,
    pub ty: TensorType,
    pub role: R,
}

#[derive(Clone, Debug)]
pub struct Roles {
    pub args: Vec<Slot<ArgRole>>,
    pub results: Vec<Slot<ResultRole>>,
    pub loss: usize,
}

impl Roles {
    pub fn params(&self) -> Vec<usize> {
        self.with(|r| matches!(r, ArgRole::Param { .. }))
    }
    pub fn data(&self) -> Vec<usize> {
        self.with(|r| matches!(r, ArgRole::Data | ArgRole::Labels))
    }
    fn with(&self, f: impl Fn(&ArgRole) -> bool) -> Vec<usize> {
        (0..self.args.len())
            .filter(|&i| f(&self.args[i].role))
            .collect()
    }
    /// The result updating argument `i`.
    pub fn output_of(&self, i: usize) -> Option<usize> {
        match self.args[i].role {
            ArgRole::Param { output } | ArgRole::State { output } => Some(output),
            _ => None,
        }
    }
}

/// The step cannot be read as a train step as it stands: what is missing or
/// ambiguous, with the candidates (a usage error).
#[derive(Clone, Debug, PartialEq)]
pub struct RoleError(pub String);

impl fmt::Display for RoleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the user said: `--loss` (a result index or name) and `--params` (a
/// list of argument indices or names).
#[derive(Clone, Debug, Default)]
pub struct RoleHints {
    pub loss: Option<String>,
    pub params: Option<Vec<String>>,
}

/// Names from the text: `%W1: tensor<…>` arguments, `return %v1, %loss`
/// results; `jax.result_info` / `jax.arg_info` attributes win where present.
#[derive(Clone, Debug, Default)]
pub struct TextNames {
    pub args: Vec<String>,
    pub results: Vec<String>,
}

impl TextNames {
    /// Read the names of `func`'s arguments and results from `text`.
    pub fn read(text: &str, func: &ir::Func) -> Self {
        let info = |attrs: &Option<String>, key: &str| -> Option<String> {
            let a = attrs.as_deref()?;
            let at = a.find(key)? + key.len();
            let rest = a[at..].trim_start().strip_prefix('=')?.trim_start();
            let rest = rest.strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_string())
        };
        let mut args: Vec<String> = (0..func.params.len()).map(|i| format!("arg{i}")).collect();
        let mut results: Vec<String> = (0..func.results.len())
            .map(|i| format!("result{i}"))
            .collect();
        // The header: `func.func [public|private] @name(%a: …, %b: …)`.
        let head = format!("@{}(", func.name);
        if let Some(at) = text.find(&head) {
            let mut depth = 0i32;
            let mut names = Vec::new();
            let bytes = &text[at + head.len()..];
            let mut i = 0;
            let b = bytes.as_bytes();
            while i < b.len() {
                match b[i] {
                    b'(' | b'<' | b'{' | b'[' => depth += 1,
                    b')' | b'>' | b'}' | b']' if depth == 0 => break,
                    b')' | b'>' | b'}' | b']' => depth -= 1,
                    b'%' if depth == 0 => {
                        let end = bytes[i + 1..]
                            .find(|c: char| {
                                !(c.is_alphanumeric() || c == '_' || c == '.' || c == '$')
                            })
                            .map_or(bytes.len(), |e| i + 1 + e);
                        names.push(bytes[i + 1..end].to_string());
                        i = end;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            if names.len() == args.len() {
                args = names;
            }
        }
        if let Some(ret) = func.body.ops.last() {
            if let Some(line) = ret.loc.line() {
                let src = text.lines().nth(line as usize - 1).unwrap_or("");
                let ops = src.split(':').next().unwrap_or("");
                let names: Vec<String> = ops
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter_map(|t| t.strip_prefix('%'))
                    .map(|t| t.to_string())
                    .collect();
                if names.len() == results.len() {
                    results = names;
                }
            }
        }
        for (i, p) in func.params.iter().enumerate() {
            if let Some(n) = info(&p.attrs, "jax.arg_info") {
                args[i] = n;
            }
        }
        for (j, r) in func.results.iter().enumerate() {
            if let Some(n) = info(&r.attrs, "jax.result_info") {
                results[j] = n;
            }
        }
        TextNames { args, results }
    }
}

fn pick(spec: &str, names: &[String], what: &str) -> Result<usize, RoleError> {
    if let Ok(i) = spec.parse::<usize>() {
        if i < names.len() {
            return Ok(i);
        }
        return Err(RoleError(format!(
            "{what} {i} does not exist (there are {})",
            names.len()
        )));
    }
    let s = spec.trim_start_matches('%');
    names.iter().position(|n| n == s).ok_or_else(|| {
        RoleError(format!(
            "no {what} named {spec} (names: {})",
            names.join(", ")
        ))
    })
}

/// Find the roles of `g`'s function.
pub(crate) fn find_roles(
    g: &Graph,
    names: &TextNames,
    hints: &RoleHints,
) -> Result<Roles, RoleError> {
    let f = g.f;
    let n = f.params.len();
    let m = f.results.len();
    // Carried pairs (argument → the result updating it): nearest first, then
    // the same place among values of the type (JAX and hand-written steps
    // keep the order), greedily.
    let mut pairs = Vec::new();
    for (j, v) in g.returned.iter().enumerate() {
        if !f.results[j].ty.elem.is_float() {
            continue;
        }
        for (i, depth) in g.carried(*v) {
            if f.params[i].ty == f.results[j].ty {
                let rank_a = f.params[..i]
                    .iter()
                    .filter(|p| p.ty == f.params[i].ty)
                    .count();
                let rank_r = f.results[..j]
                    .iter()
                    .filter(|r| r.ty == f.results[j].ty)
                    .count();
                pairs.push((depth, rank_a.abs_diff(rank_r), i, j));
            }
        }
    }
    pairs.sort();
    let mut carried_by: Vec<Option<usize>> = vec![None; n];
    let mut carries: Vec<Option<usize>> = vec![None; m];
    for (_, _, i, j) in pairs {
        if carried_by[i].is_none() && carries[j].is_none() {
            carried_by[i] = Some(j);
            carries[j] = Some(i);
        }
    }
    let uncarried: Vec<usize> = (0..n).filter(|&i| carried_by[i].is_none()).collect();
    let carried: Vec<usize> = (0..n).filter(|&i| carried_by[i].is_some()).collect();
    // The loss: a one-element float result, carrying nothing, that reads a
    // carried argument along float values (an accuracy reads the parameters
    // only through an argmax or a comparison) and an uncarried one (the data).
    let loss = match &hints.loss {
        Some(spec) => pick(spec, &names.results, "result")?,
        None => {
            let cands: Vec<usize> = (0..m)
                .filter(|&j| {
                    let r = &f.results[j].ty;
                    let d = &g.deps[&g.returned[j]];
                    r.elem.is_float()
                        && r.num_elements() == 1
                        && carries[j].is_none()
                        && g.smooth_deps[&g.returned[j]].any_of(&carried)
                        && d.any_of(&uncarried)
                })
                .collect();
            let named: Vec<usize> = cands
                .iter()
                .copied()
                .filter(|&j| names.results[j].to_lowercase().contains("loss"))
                .collect();
            let list = |js: &[usize]| {
                js.iter()
                    .map(|&j| format!("{j} (%{}, {})", names.results[j], f.results[j].ty))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match (cands.len(), named.len()) {
                (1, _) => cands[0],
                (_, 1) => named[0],
                (0, _) => {
                    return Err(RoleError(format!(
                        "the step returns no loss: no one-element float result depends on both a parameter (through float values, not only through an argmax or a comparison) and the data (results: {}). Return the loss as a result, or name it with --loss",
                        list(&(0..m).collect::<Vec<_>>())
                    )))
                }
                _ => {
                    return Err(RoleError(format!(
                        "several results could be the loss: {}; name it with --loss (an index or a name)",
                        list(&cands)
                    )))
                }
            }
        }
    };
    if !f.results[loss].ty.elem.is_float() || f.results[loss].ty.num_elements() != 1 {
        return Err(RoleError(format!(
            "result {loss} (%{}) is {}, not a one-element float loss",
            names.results[loss], f.results[loss].ty
        )));
    }
    let reads = g.deps[&g.returned[loss]].clone();
    // An argument the loss does not read and a result returns unchanged (a
    // bias correction, an EMA decay, an accumulation gate handed back to
    // the host) is a hyper-parameter, not state: nothing updates it.
    for (carried, v) in carries.iter_mut().zip(&g.returned) {
        if let (Some(i), Some(Def::Arg(a))) = (*carried, g.def.get(v)) {
            if i == *a && !reads.contains(i) {
                *carried = None;
                carried_by[i] = None;
            }
        }
    }
    let params: Vec<usize> = match &hints.params {
        Some(list) => {
            let mut ps = Vec::new();
            for s in list {
                let i = pick(s, &names.args, "argument")?;
                if carried_by[i].is_none() {
                    return Err(RoleError(format!(
                        "argument {i} (%{}) is given as a parameter, but no result carries it (no output is {} minus an update)",
                        names.args[i], f.params[i].ty
                    )));
                }
                ps.push(i);
            }
            ps
        }
        None => carried
            .iter()
            .copied()
            .filter(|&i| reads.contains(i) && f.params[i].ty.elem.is_float())
            .collect(),
    };
    if params.is_empty() {
        return Err(RoleError(
            "no parameter found: no argument is both read by the loss and carried to a result (θ' = θ − …); name them with --params".into(),
        ));
    }
    let data: Vec<usize> = uncarried
        .iter()
        .copied()
        .filter(|&i| reads.contains(i))
        .collect();
    let labels = labels_of(f, &data, names);
    let args = (0..n)
        .map(|i| Slot {
            name: names.args[i].clone(),
            ty: f.params[i].ty.clone(),
            role: match carried_by[i] {
                Some(output) if params.contains(&i) => ArgRole::Param { output },
                Some(output) => ArgRole::State { output },
                None if Some(i) == labels => ArgRole::Labels,
                None if reads.contains(i) => ArgRole::Data,
                None => ArgRole::Hyper,
            },
        })
        .collect();
    let results = (0..m)
        .map(|j| Slot {
            name: names.results[j].clone(),
            ty: f.results[j].ty.clone(),
            role: if j == loss {
                ResultRole::Loss
            } else if let Some(arg) = carries[j] {
                ResultRole::Update { arg }
            } else {
                ResultRole::Other
            },
        })
        .collect();
    Ok(Roles {
        args,
        results,
        loss,
    })
}

/// The targets among the data arguments: an integer one, else one named
/// like a label, else the smallest rank-2 float one beside a larger input.
fn labels_of(f: &ir::Func, data: &[usize], names: &TextNames) -> Option<usize> {
    let ty = |i: usize| &f.params[i].ty;
    if let Some(&i) = data.iter().find(|&&i| !ty(i).elem.is_float()) {
        return Some(i);
    }
    let named = data.iter().copied().find(|&i| {
        let n = names.args[i].to_lowercase();
        ["label", "onehot", "one_hot", "target"]
            .iter()
            .any(|k| n.contains(k))
    });
    if named.is_some() {
        return named;
    }
    // The input is the largest, the first of equals (images before targets).
    let largest = data
        .iter()
        .copied()
        .min_by_key(|&i| (-ty(i).num_elements(), i))?;
    data.iter()
        .copied()
        .filter(|&i| i != largest && ty(i).rank() == 2)
        .min_by_key(|&i| ty(i).num_elements())
}
