//! Compile and step times of a rendered train step on a PJRT plugin, with the
//! native `den` f32 step on the same inputs for comparison.
//!
//! ```sh
//! CERTGRAD_PJRT_PLUGIN=/tmp/pjrt/fastatomstruct_xla_cpu/libpjrt_cpu.so \
//!   cargo run --release -p engines --example pjrt_step -- [NET] [--batch 32,128] \
//!   [--optimizer sgd] [--steps 10] [--replicas 1] [--no-native]
//! ```
//!
//! Step time is one `Executable::execute`: host→device copies, the run and
//! device→host copies of every input and output (what a host loop pays).

use std::time::Instant;

use den::{eval_func, EvalOptions};
use engines::host::HostTensor;
use engines::pjrt::PjrtPlugin;
use layers::trainstep::{render_step, Optimizer, SlotKind, StepOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let mut net_name = "cifar8-bbn".to_string();
    let mut batches = vec![32i64, 128];
    let mut opt = Optimizer::Sgd;
    let mut steps = 10usize;
    let mut replicas = 1usize;
    let mut native = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--batch" => {
                batches = value("--batch")?
                    .split(',')
                    .map(|b| b.parse().map_err(|e| format!("--batch: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--optimizer" => {
                let v = value("--optimizer")?;
                opt = Optimizer::parse(&v).ok_or(format!("unknown optimizer {v}"))?
            }
            "--steps" => {
                steps = value("--steps")?
                    .parse()
                    .map_err(|e| format!("--steps: {e}"))?
            }
            "--replicas" => {
                replicas = value("--replicas")?
                    .parse()
                    .map_err(|e| format!("--replicas: {e}"))?
            }
            "--no-native" => native = false,
            s if !s.starts_with('-') => net_name = s.to_string(),
            s => return Err(format!("unknown option {s}")),
        }
    }
    let plugin = PjrtPlugin::locate(None).map_err(|e| e.to_string())?;
    let client = plugin.client().map_err(|e| e.to_string())?;
    let (major, minor) = plugin.api_version();
    println!(
        "plugin {} (PJRT C API {major}.{minor}), platform {}, {} device(s)",
        plugin.path().display(),
        client.platform_name().map_err(|e| e.to_string())?,
        client.devices().map_err(|e| e.to_string())?.len()
    );
    let net = layers::net::by_name(&net_name).ok_or(format!("no built-in net {net_name}"))?;
    for &batch in &batches {
        let r = render_step(&net, batch, &StepOptions::new(opt)).map_err(|e| e.to_string())?;
        let text = ir::print::print_module(&r.module);
        let t0 = Instant::now();
        let exe = client.compile(&text, replicas).map_err(|e| e.to_string())?;
        let compile_s = t0.elapsed().as_secs_f64();
        let inputs: Vec<HostTensor> = r
            .signature
            .inputs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n = s.ty.shape.iter().product::<i64>() as usize;
                let data = match s.kind {
                    SlotKind::Lr => vec![0.05; n],
                    SlotKind::Bc1 | SlotKind::Bc2 => vec![1.0; n],
                    SlotKind::OneHot => {
                        let c = *s.ty.shape.last().unwrap() as usize;
                        (0..n)
                            .map(|k| (k % c == (k / c) % c) as u8 as f32)
                            .collect()
                    }
                    _ => (0..n)
                        .map(|k| (((k * 7919 + i * 104729) % 2001) as f32 / 1000.0 - 1.0) * 0.3)
                        .map(|x| {
                            if s.kind == SlotKind::RunningVar {
                                x.abs() + 0.5
                            } else {
                                x
                            }
                        })
                        .collect(),
                };
                HostTensor::f32(s.ty.shape.clone(), data)
            })
            .collect();
        let lists = vec![inputs.clone(); replicas];
        let t1 = Instant::now();
        exe.execute(&lists).map_err(|e| e.to_string())?;
        let first_s = t1.elapsed().as_secs_f64();
        let mut times = Vec::with_capacity(steps);
        for _ in 0..steps {
            let t = Instant::now();
            exe.execute(&lists).map_err(|e| e.to_string())?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "{net_name} {} b{batch} R={replicas}: compile {compile_s:.2} s, first step {:.1} ms, step median {median:.1} ms (min {:.1}, max {:.1}, {steps} steps)",
            opt.name(),
            first_s * 1e3,
            times[0],
            times[times.len() - 1]
        );
        if native {
            let values = inputs
                .iter()
                .zip(&r.signature.inputs)
                .map(|(t, s)| t.to_value_f32(s.ty.elem))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let n_native = steps.clamp(1, 3);
            let mut nt = Vec::new();
            for _ in 0..n_native {
                let t = Instant::now();
                eval_func::<f32>(
                    &r.module,
                    &r.signature.func,
                    values.clone(),
                    &EvalOptions::default(),
                )
                .map_err(|e| e.message)?;
                nt.push(t.elapsed().as_secs_f64() * 1e3);
            }
            nt.sort_by(f64::total_cmp);
            println!(
                "{net_name} {} b{batch}: native den f32 step median {:.1} ms ({n_native} steps)",
                opt.name(),
                nt[nt.len() / 2]
            );
        }
    }
    Ok(())
}
