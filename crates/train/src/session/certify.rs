//! What a run certifies before it trains, and why: by default the very module
//! object the session executes (the step at the training batch), unless that
//! tie would be too slow or too large for this machine, which a batch-2 twin
//! of the same renderer measures first. The user is always told which module
//! was certified ([`Certification::subject`]).
//!
//! The estimate assumes a cost linear in the batch, f + c·B, with f ≥ 0 (the
//! parameter-sized work: θ, m, v, the tail replay, the probes). If the twin
//! at batch 2 took t₂ (and grew the peak resident set by m₂), the tie at
//! batch B takes at most t₂·B/2 (and m₂·B/2), since f + c·B ≤ (f + 2c)·B/2
//! for B ≥ 2. When that bound is over budget, a batch-4 twin separates f
//! from c and the estimate becomes the line through the two twins,
//! t₂ + (t₄ − t₂)·(B − 2)/2 (the same for memory).

use super::Session;
use crate::error::TrainError;
use cert::step::StepTieReport;
use layers::trainstep::{render_step, StepOptions};

/// How `certgrad train` chooses what to certify (`--certify-batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertifyChoice {
    /// The trained module itself when its estimated cost fits the budget,
    /// else the batch-2 twin (with a message saying so).
    Default,
    /// Exactly this batch (the training batch: the trained module itself,
    /// whatever it costs; smaller: a twin of the same renderer).
    Batch(usize),
}

/// The default's budget for the trained module's tie.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CertifyBudget {
    pub seconds: f64,
    /// Largest growth of the resident set, in bytes (None: the default, half
    /// of the memory the kernel reports available; no limit where it reports
    /// none).
    pub bytes: Option<u64>,
}

impl Default for CertifyBudget {
    fn default() -> Self {
        CertifyBudget {
            seconds: 60.0,
            bytes: None,
        }
    }
}

/// Which module a certificate is of.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// The module object the run executes, at the training batch.
    TrainedModule,
    /// A render of the same net and recipe at another batch.
    Twin { batch: usize },
    /// The one-replica render at `batch` (the per-replica body of an
    /// R-replica step: a one-replica evaluation cannot tie the all_reduce).
    ReplicaBody { batch: usize, replicas: usize },
}

/// The estimate the default made from its twins.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The batch the estimate is for.
    pub batch: usize,
    /// The twins' batches it was made from ([2] or [2, 4]).
    pub from: &'static [usize],
    pub seconds: f64,
    /// None where the peak resident set cannot be read.
    pub bytes: Option<u64>,
    pub budget_seconds: f64,
    pub budget_bytes: Option<u64>,
}

impl Estimate {
    pub fn fits(&self) -> bool {
        let mem_ok = match (self.bytes, self.budget_bytes) {
            (Some(b), Some(limit)) => b <= limit,
            _ => true,
        };
        self.seconds <= self.budget_seconds && mem_ok
    }
}

/// The outcome of the pre-training certification.
#[derive(Clone, Debug)]
pub struct Certification {
    /// The certificate that decides whether the run trains.
    pub report: StepTieReport,
    pub subject: Subject,
    /// The twins the default measured the cost with, besides `report`
    /// (their verdicts count too: a refuted twin refuses the run).
    pub twins: Vec<StepTieReport>,
    pub estimate: Option<Estimate>,
}

impl Certification {
    /// Whether every certificate taken holds (the run may train).
    pub fn certified(&self) -> bool {
        self.report.certified() && self.twins.iter().all(|t| t.certified())
    }

    /// One sentence for the user: which module the certificate is of and
    /// why that one.
    pub fn subject_line(&self, train_batch: usize) -> String {
        let est = self.estimate.map(|e| {
            let mem = e
                .bytes
                .map(|b| format!(" and {}", gigabytes(b)))
                .unwrap_or_default();
            match e.from {
                [2] => format!("at most {:.1} s{mem} by the batch-2 twin", e.seconds),
                _ => format!(
                    "≈ {:.1} s{mem} on the line through the batch-2 and batch-4 twins",
                    e.seconds
                ),
            }
        });
        match &self.subject {
            Subject::TrainedModule => format!(
                "certified the trained module: the module object this run executes, at batch {train_batch}{}",
                est.map(|e| format!(" (estimated {e})")).unwrap_or_default()
            ),
            Subject::Twin { batch } => match self.estimate.filter(|e| !e.fits()) {
                Some(e) => format!(
                    "certified the batch-{batch} twin, NOT the trained module: the trained module's tie at batch {} would take {} (budget {:.0} s{}); `--certify-batch {}` certifies the trained module anyway",
                    e.batch,
                    est.unwrap_or_default(),
                    e.budget_seconds,
                    e.budget_bytes
                        .map(|b| format!(", {}", gigabytes(b)))
                        .unwrap_or_default(),
                    e.batch
                ),
                None if self.estimate.is_some() => format!(
                    "the batch-{batch} twin that times the trained module's tie is not certified: the trained module was not certified"
                ),
                None => format!(
                    "certified the batch-{batch} twin of the same renderer, NOT the trained module (--certify-batch {batch}); `--certify-batch {train_batch}` certifies the trained module itself"
                ),
            },
            Subject::ReplicaBody { batch, replicas } => format!(
                "certified the one-replica step at batch {batch}: the per-replica body of the {replicas}-replica step this run trains with (a one-replica evaluation cannot tie the all_reduce mean){}",
                est.map(|e| format!("; estimated {e}")).unwrap_or_default()
            ),
        }
    }
}

fn gigabytes(b: u64) -> String {
    format!("{:.2} GB", b as f64 / 1e9)
}

/// The batch of the twin that times the default's tie.
const TWIN_BATCH: usize = 2;

impl Session {
    /// The one-replica step at batch `b` rendered for this run's net and
    /// recipe (a twin of the trained module, or its per-replica body).
    fn one_replica_options(&self) -> StepOptions {
        StepOptions {
            bf16: self.cfg.bf16,
            recipe: self.recipe,
            ..StepOptions::new(self.optimizer)
        }
    }

    pub(super) fn certify_rendered(&self, b: usize) -> Result<StepTieReport, TrainError> {
        let so = self.one_replica_options();
        let m = render_step(&self.net, b as i64, &so)
            .map_err(|e| TrainError::Run(format!("{}: {e}", self.net.name)))?;
        Ok(self.certify_module(b, &m.module))
    }

    pub(super) fn certify_module(&self, b: usize, module: &ir::Module) -> StepTieReport {
        let opts = cert::step::StepTieOptions {
            seed: self.cfg.seed,
            ..Default::default()
        };
        cert::step::certify_recipe_step(
            &self.net,
            b as i64,
            &self.one_replica_options(),
            module,
            &opts,
        )
    }

    /// The pre-training certification `choice` asks for (see the module docs).
    pub fn certify_for_training(
        &self,
        choice: CertifyChoice,
        budget: CertifyBudget,
    ) -> Result<Certification, TrainError> {
        let (train_batch, r) = (self.cfg.batch, self.cfg.replicas);
        // The batch the full tie would be at, and what it would be of.
        let (full_batch, full_subject) = if r > 1 {
            let b = self.shard_batch();
            (
                b,
                Subject::ReplicaBody {
                    batch: b,
                    replicas: r,
                },
            )
        } else {
            (train_batch, Subject::TrainedModule)
        };
        let full = |s: &Session| -> Result<StepTieReport, TrainError> {
            if r == 1 {
                Ok(s.certify_module(train_batch, &s.step.module))
            } else {
                s.certify_rendered(full_batch)
            }
        };
        match choice {
            CertifyChoice::Batch(b) if b == full_batch => Ok(Certification {
                report: full(self)?,
                subject: full_subject,
                twins: Vec::new(),
                estimate: None,
            }),
            CertifyChoice::Batch(b) => Ok(Certification {
                report: self.certify_rendered(b)?,
                subject: if r > 1 {
                    Subject::ReplicaBody {
                        batch: b,
                        replicas: r,
                    }
                } else {
                    Subject::Twin { batch: b }
                },
                twins: Vec::new(),
                estimate: None,
            }),
            CertifyChoice::Default if full_batch <= TWIN_BATCH => Ok(Certification {
                report: full(self)?,
                subject: full_subject,
                twins: Vec::new(),
                estimate: None,
            }),
            CertifyChoice::Default => {
                let subject_at = |b: usize| {
                    if r > 1 {
                        Subject::ReplicaBody {
                            batch: b,
                            replicas: r,
                        }
                    } else {
                        Subject::Twin { batch: b }
                    }
                };
                let budget_bytes = budget.bytes.or_else(|| memory::available().map(|a| a / 2));
                let (t2, m2) = self.timed_twin(TWIN_BATCH)?;
                let b = full_batch as f64;
                let mut estimate = Estimate {
                    batch: full_batch,
                    from: &[2],
                    seconds: t2.seconds * b / 2.0,
                    bytes: m2.map(|m| (m as f64 * b / 2.0) as u64),
                    budget_seconds: budget.seconds,
                    budget_bytes,
                };
                let mut twins = vec![t2];
                if twins[0].certified() && !estimate.fits() && full_batch > 4 {
                    let (t4, m4) = self.timed_twin(4)?;
                    let line = |y2: f64, y4: f64| y2 + (y4 - y2).max(0.0) * (b - 2.0) / 2.0;
                    estimate.from = &[2, 4];
                    estimate.seconds = line(twins[0].seconds, t4.seconds);
                    // A batch-4 twin that did not grow the peak reused what
                    // the allocator kept from the batch-2 one: no slope to
                    // read, so the batch-2 bound stands.
                    estimate.bytes = m2.zip(m4).map(|(m2, m4)| {
                        if m4 > m2 {
                            line(m2 as f64, m4 as f64) as u64
                        } else {
                            (m2 as f64 * b / 2.0) as u64
                        }
                    });
                    twins.push(t4);
                }
                if !twins.iter().all(|t| t.certified()) || !estimate.fits() {
                    // The twin that decides is the largest one taken.
                    let report = twins.pop().expect("a twin");
                    return Ok(Certification {
                        subject: subject_at(report.batch as usize),
                        report,
                        twins,
                        estimate: Some(estimate),
                    });
                }
                Ok(Certification {
                    report: full(self)?,
                    subject: full_subject,
                    twins,
                    estimate: Some(estimate),
                })
            }
        }
    }

    /// The twin at batch `b`, and how much it grew the peak resident set.
    fn timed_twin(&self, b: usize) -> Result<(StepTieReport, Option<u64>), TrainError> {
        let rss0 = memory::reset_peak();
        let twin = self.certify_rendered(b)?;
        let grown = rss0.and_then(|r0| memory::peak().map(|p| p.saturating_sub(r0)));
        Ok((twin, grown))
    }
}

/// The process's resident set, from `/proc` (Linux; None elsewhere).
mod memory {
    fn status_kb(key: &str) -> Option<u64> {
        let s = std::fs::read_to_string("/proc/self/status").ok()?;
        kb_field(&s, key)
    }

    fn kb_field(text: &str, key: &str) -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let kb: u64 = line[key.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    }

    /// Resets the peak resident set to the current one (`clear_refs` 5) and
    /// returns the current one; None when either is unavailable.
    pub fn reset_peak() -> Option<u64> {
        std::fs::write("/proc/self/clear_refs", "5").ok()?;
        status_kb("VmRSS:")
    }

    pub fn peak() -> Option<u64> {
        status_kb("VmHWM:")
    }

    pub fn available() -> Option<u64> {
        let s = std::fs::read_to_string("/proc/meminfo").ok()?;
        kb_field(&s, "MemAvailable:")
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn reads_a_kb_field() {
            let t = "Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t 1 kB\n";
            assert_eq!(super::kb_field(t, "VmHWM:"), Some(123456 * 1024));
            assert_eq!(super::kb_field(t, "VmPeak:"), None);
        }
    }
}
