//! One update and one evaluation of a session: the batch the host draws
//! (shuffle, augmentation), the arguments it packs for the rendered step, the
//! state, running-BN estimate and counters it takes back from the step's
//! outputs, and the accuracy of the eval and train-logits forwards.

use super::metrics::{EpochRecord, StepRecord};
use super::{terr, Session};
use crate::data::{augment, Augment};
use crate::error::TrainError;
use crate::schedule::{bias_corrections, bn_momentum, lr_at};
use engines::host::{HostData, HostTensor};
use engines::select::EngineKind;
use ir::rng::{Rng, TRAIN_SALT};
use layers::droppath::draw_keep_scales;
use layers::trainstep::{SlotKind, StepSignature};

/// The stream tag of the drop-path masks (xor-ed with the global step).
const DROP_PATH_TAG: u64 = 0xD209_0000_0000_0000;

fn host(ty: &ir::TensorType, data: Vec<f32>) -> HostTensor {
    HostTensor::f32(ty.shape.clone(), data)
}

fn scalar(x: f64) -> HostTensor {
    HostTensor::f32(vec![], vec![x as f32])
}

fn f32_data(t: HostTensor, what: &str) -> Result<Vec<f32>, TrainError> {
    match t.data {
        HostData::F32(v) => Ok(v),
        other => terr(format!(
            "{what}: expected f32 data, found {:?}",
            other.elem()
        )),
    }
}

fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// The schedule scalars of one step (docs/conventions.md §16).
struct HostScalars {
    lr: f64,
    bc: (f64, f64),
    /// `(emad, oemad)`.
    ema: (f64, f64),
    /// `(aup, akeep)`.
    acc: (f64, f64),
    /// Per drop-path site, the keep scales of the global batch (empty
    /// without `--drop-path`).
    drop_path: Vec<Vec<f32>>,
}

/// `(d, 1 − d)` with `d = min(decay, (1+t')/(10+t'))`, t' the 0-based update
/// (TF's warmup); (0, 1) without an EMA (the slots are absent then).
fn ema_decay(decay: Option<f64>, update: u64) -> (f64, f64) {
    match decay {
        Some(decay) => {
            let t = (update - 1) as f64;
            let d = decay.min((1.0 + t) / (10.0 + t));
            (d, 1.0 - d)
        }
        None => (0.0, 1.0),
    }
}

impl Session {
    /// The training-set order of epoch `epoch`: a permutation drawn from
    /// `(seed, epoch)` alone, so it does not depend on how the run got there.
    fn permutation(&mut self, epoch: u64) -> &[usize] {
        if self.perm.as_ref().map(|p| p.0) != Some(epoch) {
            let mut r = Rng::derived(self.cfg.seed, TRAIN_SALT, 0x5EED_0000 + epoch);
            self.perm = Some((epoch, r.permutation(self.data.train.len())));
        }
        &self.perm.as_ref().unwrap().1
    }

    /// Inputs of an eval-signature function (`x, θ…, running stats`) with
    /// the weights `weights` (θ, or the EMA shadow).
    fn eval_inputs(
        &self,
        sig: &StepSignature,
        x: Vec<f32>,
        weights: &[Vec<f32>],
    ) -> Vec<HostTensor> {
        let mut params = weights.iter();
        let mut rm = self.state.running.iter().map(|p| &p.0);
        let mut rv = self.state.running.iter().map(|p| &p.1);
        sig.inputs
            .iter()
            .map(|s| match s.kind {
                SlotKind::Images => host(&s.ty, x.clone()),
                SlotKind::Param => host(&s.ty, params.next().unwrap().clone()),
                SlotKind::RunningMean => host(&s.ty, rm.next().unwrap().clone()),
                SlotKind::RunningVar => host(&s.ty, rv.next().unwrap().clone()),
                _ => unreachable!("eval signature slot {:?}", s.kind),
            })
            .collect()
    }

    /// Logits of the eval forward on a batch of `cfg.batch` images.
    /// Eval scores the EMA shadow when the recipe keeps one (docs/conventions.md §16).
    fn eval_logits(&mut self, x: Vec<f32>) -> Result<Vec<f32>, TrainError> {
        let weights = if self.state.shadow.is_empty() {
            &self.state.params
        } else {
            &self.state.shadow
        };
        let inputs = self.eval_inputs(&self.eval.signature, x, weights);
        let func = self.eval.signature.func.clone();
        let out = self
            .eval_exec()?
            .run_one(inputs)
            .map_err(|e| TrainError::Run(format!("running @{func}: {e}")))?;
        f32_data(out.into_iter().next().expect("logits"), &func)
    }

    /// Correct predictions of the batch-BN logits forward on each replica's
    /// shard (the forward the step itself takes), when train accuracy is on.
    fn train_correct(&mut self, x: &[f32], labels: &[usize]) -> Result<Option<u64>, TrainError> {
        let Some(logits_forward) = &self.train_logits else {
            return Ok(None);
        };
        let func = logits_forward.signature.func.clone();
        let k = self.net.classes as usize;
        let shard = self.shard_batch();
        let per = x.len() / labels.len().max(1);
        let mut correct = 0u64;
        for r in 0..self.cfg.replicas {
            let rows = r * shard..(r + 1) * shard;
            let forward = self.train_logits.as_ref().expect("train logits enabled");
            let inputs = self.eval_inputs(
                &forward.signature,
                x[rows.start * per..rows.end * per].to_vec(),
                &self.state.params,
            );
            let out = self
                .logits_exec()?
                .expect("train logits enabled")
                .run_one(inputs)
                .map_err(|e| TrainError::Run(format!("running @{func}: {e}")))?;
            let logits = f32_data(out.into_iter().next().expect("logits"), &func)?;
            correct += rows
                .enumerate()
                .filter(|&(i, row)| argmax(&logits[i * k..(i + 1) * k]) == labels[row])
                .count() as u64;
        }
        Ok(Some(correct))
    }

    /// Step `t`'s keep scales per drop-path site over the global batch: each
    /// example 1/keep with probability keep (the site's, on the net's ramp),
    /// else 0, from a stream derived from the seed and the global step only
    /// (a resumed run draws the same masks). Empty without `--drop-path`.
    fn drop_path_scales(&self, t: u64) -> Result<Vec<Vec<f32>>, TrainError> {
        let Some(rate) = self.recipe.drop_path else {
            return Ok(Vec::new());
        };
        let sites = self
            .net
            .drop_path_sites(rate)
            .map_err(|e| TrainError::Run(e.to_string()))?;
        let mut rng = Rng::derived(self.cfg.seed, TRAIN_SALT, DROP_PATH_TAG ^ t);
        Ok(sites
            .iter()
            .map(|s| draw_keep_scales(s.keep, self.cfg.batch, &mut rng))
            .collect())
    }

    /// One replica's step inputs: its shard of images and targets, the shared
    /// state and schedule scalars.
    fn step_inputs(
        &self,
        x: &[f32],
        onehot: &[f32],
        h: &HostScalars,
        rows: std::ops::Range<usize>,
    ) -> Vec<HostTensor> {
        let st = &self.state;
        let mut dp = h.drop_path.iter();
        let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
        let (mut sh, mut acc) = (st.shadow.iter(), st.accum.iter());
        let mut rm = st.running.iter().map(|p| &p.0);
        let mut rv = st.running.iter().map(|p| &p.1);
        self.step
            .signature
            .inputs
            .iter()
            .map(|s| match s.kind {
                SlotKind::Images => host(&s.ty, x.to_vec()),
                SlotKind::Param => host(&s.ty, th.next().unwrap().clone()),
                SlotKind::M => host(&s.ty, mm.next().unwrap().clone()),
                SlotKind::V => host(&s.ty, vv.next().unwrap().clone()),
                SlotKind::Shadow => host(&s.ty, sh.next().unwrap().clone()),
                SlotKind::Accum => host(&s.ty, acc.next().unwrap().clone()),
                SlotKind::Lr => scalar(h.lr),
                SlotKind::Bc1 => scalar(h.bc.0),
                SlotKind::Bc2 => scalar(h.bc.1),
                SlotKind::EmaDecay => scalar(h.ema.0),
                SlotKind::EmaOneMinus => scalar(h.ema.1),
                SlotKind::AccApply => scalar(h.acc.0),
                SlotKind::AccKeep => scalar(h.acc.1),
                SlotKind::RunningMean => host(&s.ty, rm.next().unwrap().clone()),
                SlotKind::RunningVar => host(&s.ty, rv.next().unwrap().clone()),
                SlotKind::OneHot => host(&s.ty, onehot.to_vec()),
                SlotKind::DropPath => host(&s.ty, dp.next().unwrap()[rows.clone()].to_vec()),
                other => unreachable!("step input slot {other:?}"),
            })
            .collect()
    }

    /// One update on the next batch of the current epoch.
    pub fn train_step(&mut self) -> Result<StepRecord, TrainError> {
        let b = self.cfg.batch;
        let (c, h, w) = self.data.shape;
        let per = c * h * w;
        let classes = self.net.classes as usize;
        let epoch = self.state.epoch;
        let start = self.state.batch_in_epoch as usize * b;
        let idx: Vec<usize> = self.permutation(epoch)[start..start + b].to_vec();
        let labels: Vec<usize> = idx
            .iter()
            .map(|&i| self.data.train.labels[i] as usize)
            .collect();
        let mut x = Vec::with_capacity(b * per);
        let mut onehot = vec![0f32; b * classes];
        for (row, &i) in idx.iter().enumerate() {
            x.extend_from_slice(&self.data.train.images[i * per..(i + 1) * per]);
            onehot[row * classes + labels[row]] = 1.0;
        }
        let aug = Augment {
            crop_pad: self.cfg.crop_pad,
            flip: self.cfg.flip && self.data.flip_ok,
        };
        augment(&mut x, self.data.shape, aug, &mut self.state.rng);

        let t = self.state.step + 1;
        // Under accumulation over k micro-batches, the schedule counts
        // optimizer updates: micro-batch t belongs to update ⌈t/k⌉.
        let k = self.micro_batches();
        let (update, pos) = ((t - 1) / k + 1, (t - 1) % k);
        let lr = lr_at(
            self.cfg.lr,
            update,
            self.warmup_steps() / k,
            self.total_steps() / k,
        );
        let bc = bias_corrections(update);
        let scalars = HostScalars {
            lr,
            bc,
            ema: ema_decay(self.recipe.ema, update),
            acc: (
                (pos + 1 == k) as u8 as f64, // aup: the cycle's last micro-batch
                (pos != 0) as u8 as f64,     // akeep: 0 on its first
            ),
            drop_path: self.drop_path_scales(t)?,
        };

        let correct = self.train_correct(&x, &labels)?;

        let replicas = self.cfg.replicas;
        let shard = self.shard_batch();
        let args: Vec<Vec<HostTensor>> = (0..replicas)
            .map(|r| {
                let rows = r * shard..(r + 1) * shard;
                self.step_inputs(
                    &x[rows.start * per..rows.end * per],
                    &onehot[rows.start * classes..rows.end * classes],
                    &scalars,
                    rows,
                )
            })
            .collect();
        let func = self.step.signature.func.clone();
        let outs = self
            .step_exec()?
            .run(&args)
            .map_err(|e| TrainError::Run(format!("running @{func}: {e}")))?;
        let outs = outs
            .into_iter()
            .map(|o| {
                o.into_iter()
                    .map(|t| f32_data(t, &func))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let sig = &self.step.signature;
        // θ', m', v' are one value on every replica: the gradients were
        // averaged across replicas before the tail.
        let mut divergence = 0f64;
        for kind in [
            SlotKind::Param,
            SlotKind::M,
            SlotKind::V,
            SlotKind::Shadow,
            SlotKind::Accum,
        ] {
            for i in sig.output_positions(kind) {
                for o in &outs[1..] {
                    for (a, b) in o[i].iter().zip(&outs[0][i]) {
                        divergence = divergence.max((a - b).abs() as f64);
                    }
                }
            }
        }
        if divergence != 0.0 && self.engine_options.kind == EngineKind::Native {
            return terr(format!(
                "update {t}: the {replicas} native replicas disagree on the new state by up to {divergence:e} \
                 (the cross-replica mean must give every replica the same bits)"
            ));
        }
        self.replica_divergence = self.replica_divergence.max(divergence);
        let take = |kind| -> Vec<Vec<f32>> {
            sig.output_positions(kind)
                .into_iter()
                .map(|i| outs[0][i].clone())
                .collect()
        };
        // BN statistics are per replica; the running estimate takes their mean.
        let mean_over_replicas = |kind| -> Vec<Vec<f32>> {
            sig.output_positions(kind)
                .into_iter()
                .map(|i| {
                    let mut acc = vec![0f64; outs[0][i].len()];
                    for o in &outs {
                        for (a, &x) in acc.iter_mut().zip(&o[i]) {
                            *a += x as f64;
                        }
                    }
                    acc.iter().map(|a| (a / replicas as f64) as f32).collect()
                })
                .collect()
        };
        let loss_at = sig.output_positions(SlotKind::Loss)[0];
        let loss = outs.iter().map(|o| o[loss_at][0] as f64).sum::<f64>() / replicas as f64;
        if !loss.is_finite() {
            return terr(format!(
                "the loss is {loss} at update {t} (lr {lr:.3e}); lower --lr"
            ));
        }
        let new_params = take(SlotKind::Param);
        let new_m = take(SlotKind::M);
        let new_v = take(SlotKind::V);
        let new_shadow = take(SlotKind::Shadow);
        let new_accum = take(SlotKind::Accum);
        let bmean = mean_over_replicas(SlotKind::BatchMean);
        let bvar = mean_over_replicas(SlotKind::BatchVar);
        let mom = bn_momentum(t);
        let st = &mut self.state;
        for ((run, bm), bv) in st.running.iter_mut().zip(&bmean).zip(&bvar) {
            for (r, &x) in run.0.iter_mut().zip(bm) {
                *r = (1.0 - mom) * *r + mom * x;
            }
            for (r, &x) in run.1.iter_mut().zip(bv) {
                *r = (1.0 - mom) * *r + mom * x;
            }
        }
        st.params = new_params;
        st.m = new_m;
        st.v = new_v;
        st.shadow = new_shadow;
        st.accum = new_accum;
        st.step = t;
        st.batch_in_epoch += 1;
        st.loss_sum += loss;
        st.correct += correct.unwrap_or(0);
        st.seen += b as u64;
        Ok(StepRecord {
            step: t,
            epoch,
            lr,
            loss,
            correct,
        })
    }

    /// Accuracy of the rendered eval forward (running statistics) on the test
    /// split; the last partial batch is zero-padded and its padding ignored.
    pub fn evaluate(&mut self) -> Result<f64, TrainError> {
        let b = self.cfg.batch;
        let (c, h, w) = self.data.shape;
        let per = c * h * w;
        let k = self.net.classes as usize;
        let total = self.data.test.len();
        let mut correct = 0usize;
        for start in (0..total).step_by(b) {
            let n = b.min(total - start);
            let mut x = vec![0f32; b * per];
            x[..n * per].copy_from_slice(&self.data.test.images[start * per..(start + n) * per]);
            let logits = self.eval_logits(x)?;
            let test = &self.data.test;
            correct += (0..n)
                .filter(|&r| argmax(&logits[r * k..(r + 1) * k]) == test.labels[start + r] as usize)
                .count();
        }
        Ok(correct as f64 / total.max(1) as f64)
    }

    /// Closes the current epoch: its record, then the counters move on.
    pub fn finish_epoch(&mut self, seconds: f64) -> Result<EpochRecord, TrainError> {
        let test_acc = self.evaluate()?;
        let st = &mut self.state;
        let steps = st.batch_in_epoch;
        let rec = EpochRecord {
            epoch: st.epoch,
            steps,
            train_loss: st.loss_sum / steps.max(1) as f64,
            train_acc: self
                .train_logits
                .as_ref()
                .map(|_| st.correct as f64 / st.seen.max(1) as f64),
            test_acc,
            seconds,
        };
        st.epoch += 1;
        st.batch_in_epoch = 0;
        st.loss_sum = 0.0;
        st.correct = 0;
        st.seen = 0;
        Ok(rec)
    }
}
