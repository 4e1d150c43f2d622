//! Running the control steps: `while` runs its condition's and its body's
//! sub-plans on the loop state until the condition is false (the state moves
//! from one iteration to the next, never copied; a sub-plan may write over
//! its inputs, so captured outer values are passed as copies); `case`/`if`
//! run the chosen branch's sub-plan. Semantics as `den::eval`'s control ops.

use crate::runtime::Buf;
use crate::schedule::{SubArg, SubPlan};

/// Options a control step hands to its sub-plans.
pub(crate) struct Run {
    pub profile: bool,
    pub parallel: bool,
}

fn missing(s: usize) -> String {
    format!("internal: operand buffer {s} missing")
}

/// The buffers of `slots` at `idx` (copies: the slots stay live).
fn copies(slots: &[Option<Buf>], idx: &[usize]) -> Result<Vec<Buf>, String> {
    idx.iter()
        .map(|&s| {
            slots[s]
                .as_ref()
                .map(Buf::duplicate)
                .ok_or_else(|| missing(s))
        })
        .collect()
}

impl Run {
    /// Runs `sub` (named `what` in errors) on the loop `state` (moved in when
    /// `take_state`, else copied) and the `captured` values.
    fn sub(
        &self,
        what: &str,
        sub: &mut SubPlan,
        state: &mut [Option<Buf>],
        take_state: bool,
        captured: &[Buf],
    ) -> Result<Vec<Buf>, String> {
        let mut inputs = Vec::with_capacity(sub.args.len());
        for a in &sub.args {
            inputs.push(match *a {
                SubArg::Unused => None,
                SubArg::State(k) if take_state => state[k].take(),
                SubArg::State(k) => state[k].as_ref().map(Buf::duplicate),
                SubArg::Captured(k) => captured.get(k).map(Buf::duplicate),
            });
        }
        sub.plan
            .run_bufs(what, inputs, self.profile, self.parallel)
            .map_err(|e| {
                let at = e.line.map(|l| format!(" (line {l})")).unwrap_or_default();
                format!("in the {what}: {}{at}: {}", e.op, e.message)
            })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_while(
        &self,
        cond: &mut SubPlan,
        body: &mut SubPlan,
        state: &[usize],
        captured: &[usize],
        results: &[usize],
        slots: &mut [Option<Buf>],
    ) -> Result<(), String> {
        let captured = copies(slots, captured)?;
        let mut st: Vec<Option<Buf>> = copies(slots, state)?.into_iter().map(Some).collect();
        loop {
            let c = self.sub("while condition", cond, &mut st, false, &captured)?;
            let go = match c.as_slice() {
                [p] => p
                    .first_int()
                    .ok_or("the while condition must return one i1")?,
                _ => return Err("the while condition must return one i1".into()),
            };
            if go == 0 {
                break;
            }
            let next = self.sub("while body", body, &mut st, true, &captured)?;
            if next.len() != st.len() {
                return Err("the while body must return the loop state".into());
            }
            st = next.into_iter().map(Some).collect();
        }
        for (b, &r) in st.into_iter().zip(results) {
            slots[r] = Some(b.ok_or("internal: loop state missing")?);
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_branch(
        &self,
        selector: usize,
        is_if: bool,
        branches: &mut [SubPlan],
        captured: &[usize],
        results: &[usize],
        slots: &mut [Option<Buf>],
    ) -> Result<(), String> {
        let sel = slots[selector]
            .as_ref()
            .and_then(Buf::first_int)
            .ok_or_else(|| missing(selector))?;
        let n = branches.len() as i64;
        let k = den::eval::branch_index(is_if, sel, n);
        // Only the captured values this branch reads are copied.
        let mut caps: Vec<Buf> = Vec::with_capacity(captured.len());
        for (i, &s) in captured.iter().enumerate() {
            let read = branches[k].args.contains(&SubArg::Captured(i));
            caps.push(if read {
                slots[s]
                    .as_ref()
                    .map(Buf::duplicate)
                    .ok_or_else(|| missing(s))?
            } else {
                Buf::I(Vec::new())
            });
        }
        let what = if is_if { "if branch" } else { "case branch" };
        let outs = self.sub(what, &mut branches[k], &mut [], true, &caps)?;
        if outs.len() != results.len() {
            return Err(format!(
                "the {what} returned {} values, the op has {}",
                outs.len(),
                results.len()
            ));
        }
        for (b, &r) in outs.into_iter().zip(results) {
            slots[r] = Some(b);
        }
        Ok(())
    }
}
