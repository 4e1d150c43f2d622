//! Interrupts: a SIGINT (Ctrl-C) handler that asks the host loop to stop at
//! the next update boundary, where [`crate::run`] writes a checkpoint before
//! returning [`crate::TrainError::Interrupted`] — so an interrupted run loses
//! nothing and resumes exactly. A second SIGINT exits at once (status 130),
//! for a loop stuck inside one long step; the last checkpoint is then what
//! is left, which atomic writes keep intact.
//!
//! Only a program that calls [`install_sigint_handler`] (the CLI's `train`)
//! changes its signal disposition; libraries and tests use [`request`].

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether a stop was asked for (by SIGINT or [`request`]).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Asks the host loop to stop at the next update boundary.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Forgets an earlier request (before starting another run in-process).
pub fn clear() {
    REQUESTED.store(false, Ordering::SeqCst);
}

#[cfg(unix)]
mod sys {
    use super::REQUESTED;
    use std::sync::atomic::Ordering;

    const SIGINT: i32 = 2;

    extern "C" {
        // POSIX signal(2) and _exit(2): both in every Unix libc, which std
        // already links; declared here rather than adding a crate for two calls.
        fn signal(signum: i32, handler: usize) -> usize;
        fn _exit(status: i32) -> !;
    }

    extern "C" fn on_sigint(_: i32) {
        // Only async-signal-safe work here: an atomic swap, maybe _exit.
        if REQUESTED.swap(true, Ordering::SeqCst) {
            // SAFETY: _exit is async-signal-safe and never returns.
            unsafe { _exit(130) }
        }
    }

    pub fn install() -> bool {
        let handler: extern "C" fn(i32) = on_sigint;
        // SAFETY: the handler only touches an atomic and calls _exit.
        let previous = unsafe { signal(SIGINT, handler as usize) };
        previous != usize::MAX // SIG_ERR is (void(*)(int))-1
    }
}

/// Installs the SIGINT handler (Unix; elsewhere a no-op returning false).
pub fn install_sigint_handler() -> bool {
    #[cfg(unix)]
    {
        sys::install()
    }
    #[cfg(not(unix))]
    {
        false
    }
}
