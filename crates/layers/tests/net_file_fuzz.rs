//! Mutation fuzzing of the net-file loader: every built-in net written out as
//! TOML and JSON, plus the shipped examples, mutated (bit flips, byte
//! insertions and deletions, truncations, numbers rewritten to huge, negative,
//! fractional or non-finite values), must never make `NetSpec::from_text`
//! panic; an error must name the file and, when it carries a line, a line
//! inside the text; and a mutant that loads must also build its layer chain
//! and count its parameters without panicking (the loader's checks are what
//! stand between a file and the allocators).
//! Bounded: 4 s by default, `CERTGRAD_FUZZ_SECS` for long runs.

use layers::net::{catalog, NetFormat, NetSpec};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

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

/// Values a careless or hostile file might hold where a number is expected.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "-4",
    "4000000000000",
    "1e300",
    "-1e-9",
    "nan",
    "inf",
    "0.5",
    "9223372036854775807",
    "18446744073709551616",
    "\"3\"",
    "[]",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut b = text.as_bytes().to_vec();
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            break;
        }
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b[at] ^= 1 << rng.below(8),
            1 => {
                let bytes = b"0123456789-.e\"[]{}=,:\n x";
                b.insert(at, bytes[rng.below(bytes.len())]);
            }
            2 => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                b.drain(at..end);
            }
            3 => b.truncate(at),
            _ => {
                // Rewrite the number nearest after `at`.
                if let Some(start) = (at..b.len()).find(|&i| b[i].is_ascii_digit()) {
                    let end = (start..b.len())
                        .find(|&i| !(b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'e'))
                        .unwrap_or(b.len());
                    let with = NUMBERS[rng.below(NUMBERS.len())].as_bytes();
                    b.splice(start..end, with.iter().copied());
                }
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn corpus() -> Vec<(String, &'static str)> {
    let mut out = Vec::new();
    for net in catalog() {
        for (format, origin) in [
            (NetFormat::Toml, "fuzz.toml"),
            (NetFormat::Json, "fuzz.json"),
        ] {
            let text = net.to_text(format).expect("every built-in writes");
            // The seed itself must load: a fuzzer that starts from rejected
            // text tests only the first error path.
            NetSpec::from_text(&text, origin)
                .unwrap_or_else(|e| panic!("{} does not read back: {e}", net.name));
            out.push((text, origin));
        }
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/nets");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("examples/nets")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    names.sort();
    for path in names {
        let origin = match path.extension().and_then(|x| x.to_str()) {
            Some("toml") => "fuzz.toml",
            Some("json") => "fuzz.json",
            _ => continue,
        };
        out.push((std::fs::read_to_string(&path).expect("example"), origin));
    }
    out
}

#[test]
fn mutated_net_files_never_panic_and_errors_point_inside_the_file() {
    let seeds = corpus();
    assert!(seeds.len() >= 20, "too few seeds: {}", seeds.len());
    let long: Option<u64> = std::env::var("CERTGRAD_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let budget = Duration::from_secs(long.unwrap_or(4));
    let start = Instant::now();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let (mut cases, mut loaded, mut built) = (0usize, 0usize, 0usize);
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut failure = None;
    while start.elapsed() < budget {
        let (base, origin) = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, base);
        cases += 1;
        match catch_unwind(AssertUnwindSafe(|| NetSpec::from_text(&input, origin))) {
            Ok(Ok(net)) => {
                loaded += 1;
                let ok = catch_unwind(AssertUnwindSafe(|| {
                    let counted = net.param_count().is_ok();
                    let _ = net.bn_sites();
                    counted && net.chain_with_loss().is_ok()
                }));
                match ok {
                    Ok(b) => built += usize::from(b),
                    Err(_) => {
                        failure = Some(format!("a loaded net panicked when built:\n{input}"));
                        break;
                    }
                }
            }
            Ok(Err(e)) => {
                let lines = input.split('\n').count();
                let line =
                    e.at.strip_prefix(origin)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .map(|rest| rest.split(':').next().unwrap_or("").parse::<usize>());
                let bad = !e.at.starts_with(origin)
                    || matches!(line, Some(Err(_)))
                    || matches!(line, Some(Ok(l)) if l == 0 || l > lines)
                    || e.message.trim().is_empty();
                if bad {
                    failure = Some(format!("bad error {e} for input:\n{input}"));
                    break;
                }
            }
            Err(_) => {
                failure = Some(format!("from_text panicked on:\n{input}"));
                break;
            }
        }
    }
    std::panic::set_hook(quiet);
    eprintln!(
        "net-file fuzz: {cases} cases in {:.1} s, {loaded} loaded, {built} built",
        start.elapsed().as_secs_f64()
    );
    if let Some(f) = failure {
        let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("net_file_fuzz.failure");
        let _ = std::fs::write(&keep, &f);
        panic!("{f}\n(kept in {})", keep.display());
    }
    assert!(cases > 100, "too few cases ran: {cases}");
}
