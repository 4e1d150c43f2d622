//! A session to and from a checkpoint: every tensor the host carries keyed by
//! its signature slot, the counters and the run config as metadata, and the
//! checks that a checkpoint is this net's before it replaces the state.

use super::{dims, Session, TrainConfig};
use crate::checkpoint::{checkpoint_path, Checkpoint};
use crate::error::TrainError;
use engines::select::EngineOptions;
use ir::rng::Rng;
use layers::trainstep::SlotKind;
use std::path::Path;

impl Session {
    /// The checkpoint of the current state (`metrics_len`: the metrics log's
    /// length at this point, restored on resume).
    pub fn to_checkpoint(&self, metrics_len: u64) -> Result<Checkpoint, TrainError> {
        let mut ck = Checkpoint::default();
        let st = &self.state;
        let sig = &self.step.signature;
        let (mut th, mut mm, mut vv) = (st.params.iter(), st.m.iter(), st.v.iter());
        let (mut sh, mut acc) = (st.shadow.iter(), st.accum.iter());
        let mut rm = st.running.iter().map(|p| &p.0);
        let mut rv = st.running.iter().map(|p| &p.1);
        for s in &sig.inputs {
            let d = match s.kind {
                SlotKind::Param => th.next(),
                SlotKind::M => mm.next(),
                SlotKind::V => vv.next(),
                SlotKind::Shadow => sh.next(),
                SlotKind::Accum => acc.next(),
                SlotKind::RunningMean => rm.next(),
                SlotKind::RunningVar => rv.next(),
                _ => None,
            };
            if let Some(d) = d {
                ck.tensors.insert(s.name.clone(), (dims(&s.ty), d.clone()));
            }
        }
        let cfg = serde_json::to_string(&self.cfg).map_err(|e| TrainError::Run(e.to_string()))?;
        let (c, h, w) = self.net.input;
        for (k, v) in [
            ("config", cfg),
            ("net", self.net.name.clone()),
            ("net_input", format!("{c},{h},{w}")),
            ("step_func", sig.func.clone()),
            ("step", st.step.to_string()),
            ("epoch", st.epoch.to_string()),
            ("batch_in_epoch", st.batch_in_epoch.to_string()),
            ("rng_state", st.rng.state.to_string()),
            ("loss_sum_bits", st.loss_sum.to_bits().to_string()),
            ("correct", st.correct.to_string()),
            ("seen", st.seen.to_string()),
            ("metrics_len", metrics_len.to_string()),
        ] {
            ck.meta.insert(k.into(), v);
        }
        Ok(ck)
    }

    /// Rebuilds a session from a checkpoint: the config it stores, then every
    /// tensor and counter checked against the re-rendered signature.
    pub fn from_checkpoint(ck: &Checkpoint, what: &str) -> Result<Session, TrainError> {
        Session::from_checkpoint_with(ck, what, EngineOptions::native())
    }

    /// [`Session::from_checkpoint`] continuing on the engine `engine`.
    pub fn from_checkpoint_with(
        ck: &Checkpoint,
        what: &str,
        engine: EngineOptions,
    ) -> Result<Session, TrainError> {
        let cfg: TrainConfig = serde_json::from_str(ck.meta_field("config")?).map_err(|e| {
            TrainError::Checkpoint(format!("{what}: its run config does not parse: {e}"))
        })?;
        let mut s = Session::with_engine(cfg, engine)?;
        s.restore(ck, what)?;
        Ok(s)
    }

    /// Overwrites the state with the checkpoint's, after checking that it is
    /// this net's (name, input shape, every slot's name and shape).
    pub fn restore(&mut self, ck: &Checkpoint, what: &str) -> Result<(), TrainError> {
        let wrong = |m: String| TrainError::Checkpoint(format!("{what}: {m}"));
        let name = ck.meta_field("net")?;
        if name != self.net.name {
            return Err(wrong(format!(
                "it is a checkpoint of net `{name}`, not `{}`",
                self.net.name
            )));
        }
        let (c, h, w) = self.net.input;
        let input = ck.meta_field("net_input")?;
        if input != format!("{c},{h},{w}") {
            return Err(wrong(format!(
                "its net input is {input}, this run's is {c},{h},{w}"
            )));
        }
        let mut st = self.state.clone();
        let (mut params, mut m, mut v, mut rmean, mut rvar) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut shadow, mut accum) = (vec![], vec![]);
        let mut used = 0;
        for s in &self.step.signature.inputs {
            let dest = match s.kind {
                SlotKind::Param => &mut params,
                SlotKind::M => &mut m,
                SlotKind::V => &mut v,
                SlotKind::Shadow => &mut shadow,
                SlotKind::Accum => &mut accum,
                SlotKind::RunningMean => &mut rmean,
                SlotKind::RunningVar => &mut rvar,
                _ => continue,
            };
            let (shape, data) = ck
                .tensors
                .get(&s.name)
                .ok_or_else(|| wrong(format!("no tensor `{}` (a different net?)", s.name)))?;
            if *shape != dims(&s.ty) {
                return Err(wrong(format!(
                    "tensor `{}` has shape {shape:?}, the net needs {:?}",
                    s.name,
                    dims(&s.ty)
                )));
            }
            // Training never writes a non-finite value (a non-finite loss
            // stops the step before the state changes): one here is damage,
            // not a learning rate to lower.
            if let Some(i) = data.iter().position(|x| !x.is_finite()) {
                return Err(wrong(format!(
                    "tensor `{}` holds {} at element {i}: the checkpoint is damaged \
                     (training never stores non-finite values); restore a copy or start afresh",
                    s.name, data[i]
                )));
            }
            dest.push(data.clone());
            used += 1;
        }
        if used != ck.tensors.len() {
            return Err(wrong(format!(
                "{} tensors, the net has {used} slots (a different net?)",
                ck.tensors.len()
            )));
        }
        st.params = params;
        st.m = m;
        st.v = v;
        st.shadow = shadow;
        st.accum = accum;
        st.running = rmean.into_iter().zip(rvar).collect();
        st.step = ck.meta_u64("step")?;
        st.epoch = ck.meta_u64("epoch")?;
        st.batch_in_epoch = ck.meta_u64("batch_in_epoch")?;
        st.rng = Rng {
            state: ck.meta_u64("rng_state")?,
        };
        st.loss_sum = f64::from_bits(ck.meta_u64("loss_sum_bits")?);
        st.correct = ck.meta_u64("correct")?;
        st.seen = ck.meta_u64("seen")?;
        if st.batch_in_epoch > self.steps_per_epoch() {
            return Err(wrong(
                "its position in the epoch is past the epoch's end".into(),
            ));
        }
        self.state = st;
        Ok(())
    }
}

/// Opens a run directory's checkpoint as a session ready to continue (or to
/// be evaluated): `(session, metrics_len)`.
pub fn resume(run_dir: &Path) -> Result<(Session, u64), TrainError> {
    resume_with(run_dir, EngineOptions::native())
}

/// [`resume`] on the engine `engine`.
pub fn resume_with(run_dir: &Path, engine: EngineOptions) -> Result<(Session, u64), TrainError> {
    let p = checkpoint_path(run_dir);
    if !p.exists() {
        return Err(TrainError::Checkpoint(format!(
            "{}: no checkpoint to resume ({} does not exist); run without --resume to \
             start afresh",
            run_dir.display(),
            p.display()
        )));
    }
    let ck = Checkpoint::read(&p)?;
    let what = p.display().to_string();
    let s = Session::from_checkpoint_with(&ck, &what, engine)?;
    Ok((s, ck.meta_u64("metrics_len")?))
}
