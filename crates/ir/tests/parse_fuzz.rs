//! Mutation fuzzing of the parser: sample and printed texts, randomly mutated
//! (byte and token deletions, duplications, swaps, insertions, truncations), must
//! never make `parse_module` panic — nor, for what still parses, `verify_module`
//! (type inference over hostile sizes) or the memory-limit walk. Bounded by
//! time and case count (`CERTGRAD_FUZZ_SECS` raises the 6 s budget and lifts
//! the case cap, for long local runs); the number of cases run is printed.

use ir::parse::parse_module;
use ir::print::print_module;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// xorshift64*: a small deterministic generator (seeded, so failures replay).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Fragments that steer mutations into the parser's interesting paths.
const TOKENS: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "<",
    ">",
    "[",
    "]",
    ",",
    ":",
    "=",
    "->",
    "\"",
    "%",
    "%0",
    "%0#7",
    "%arg0",
    "%cst:2",
    "@",
    "@main",
    "#",
    "#loc3",
    "^bb0",
    "^bb1:",
    "loc(",
    "dense<",
    "dense<>",
    "dense<\"0x00\">",
    "array<i64: ",
    "tensor<",
    "tensor<?x",
    "tensor<2x",
    "xf32>",
    "0x",
    "0xFFFFFFFFFFFFFFFFFF",
    "99999999999999999999",
    "-",
    "1.5e+400",
    "3037000499x3037000499x",
    "4000000000000",
    "9223372036854775807",
    "-9223372036854775808",
    "4611686018427387904x",
    "nan",
    "true",
    "//",
    "stablehlo.add",
    "stablehlo.reduce",
    "\"stablehlo.reduce_window\"",
    "applies",
    "reducer",
    "init:",
    "dims = [",
    "func.func",
    "module",
    "return",
    "stablehlo.return",
    "é",
    "\u{2028}",
    "\0",
    "{-#",
    "#-}",
    "<{",
    "}>",
    "({",
    "})",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut b: Vec<u8> = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        let i = rng.below(len + 1);
        let long = rng.below(4) == 0;
        let span = 1 + rng.below(if long { 200 } else { 8 });
        let j = (i + span).min(len);
        match rng.below(7) {
            0 => {
                b.drain(i..j);
            }
            1 => {
                let piece = b[i..j].to_vec();
                b.splice(i..i, piece);
            }
            2 => {
                let k = rng.below(len + 1);
                let k2 = (k + span).min(len);
                if j <= k {
                    let second = b[k..k2].to_vec();
                    let first = b[i..j].to_vec();
                    b.splice(k..k2, first);
                    b.splice(i..j, second);
                }
            }
            3 | 4 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes().to_vec();
                b.splice(i..i, t);
            }
            5 => {
                let byte = rng.below(256) as u8;
                b.insert(i.min(b.len()), byte);
            }
            _ => b.truncate(i),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn mutated_inputs_never_panic() {
    let dir = format!("{}/tests/ir_suite/data", env!("CARGO_MANIFEST_DIR"));
    let mut corpus: Vec<String> = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/ir_suite/data")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mlir"))
        .collect();
    names.sort();
    for path in names {
        let text = std::fs::read_to_string(&path).expect("sample");
        let m = parse_module(&text, "seed").expect("every sample parses");
        corpus.push(print_module(&m));
        corpus.push(text);
    }
    assert!(corpus.len() >= 8, "samples missing");

    let long: Option<u64> = std::env::var("CERTGRAD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = Duration::from_secs(long.unwrap_or(6));
    let max_cases = if long.is_some() { usize::MAX } else { 60_000 };
    let start = Instant::now();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut cases, mut accepted, mut verified) = (0usize, 0usize, 0usize);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    while cases < max_cases && start.elapsed() < budget {
        let base = &corpus[rng.below(corpus.len())];
        let input = mutate(&mut rng, base);
        cases += 1;
        match catch_unwind(AssertUnwindSafe(|| parse_module(&input, "fuzz.mlir"))) {
            Ok(Ok(m)) => {
                accepted += 1;
                let checked = catch_unwind(AssertUnwindSafe(|| {
                    let ok = ir::verify::verify_module(&m).is_ok();
                    let _ = ir::limits::check_module(&m, Some(16));
                    ok
                }));
                match checked {
                    Ok(ok) => verified += usize::from(ok),
                    Err(_) => {
                        failure = Some(format!("verify/limits panicked on:\n{input}"));
                        break;
                    }
                }
            }
            Ok(Err(e)) => {
                // Errors must point inside the text (or just past its end).
                let lines = input.split('\n').count() as u32;
                if e.line == 0 || e.line > lines || e.col == 0 {
                    failure = Some(format!("bad position {e} for input:\n{input}"));
                    break;
                }
            }
            Err(_) => {
                failure = Some(format!("parse_module panicked on:\n{input}"));
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    if let Some(f) = failure {
        panic!("after {cases} cases: {f}");
    }
    println!(
        "parse_fuzz: {cases} mutated inputs in {:.1} s, {accepted} still parsed, \
         {verified} verified, no panic",
        start.elapsed().as_secs_f64()
    );
    assert!(cases >= 1000, "only {cases} cases ran");
}
