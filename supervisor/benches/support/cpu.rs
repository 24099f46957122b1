//! What a command costs the machine, beside what it costs the clock: on a
//! loaded machine (2 cores shared by many builds) the wall clock of a short
//! process is mostly time spent waiting for a core, while its CPU time
//! (user + system, from `getrusage(RUSAGE_CHILDREN)` around each waited-for
//! child) is not.

use std::time::{Duration, Instant};

/// CPU time (user + system) of every child waited for so far.
pub(crate) fn children_cpu() -> Duration {
    // SAFETY: getrusage writes one rusage into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Wall clock and CPU time of the children `f` runs (and waits for).
pub(crate) fn measure(f: impl FnOnce()) -> (Duration, Duration) {
    let (c0, t0) = (children_cpu(), Instant::now());
    f();
    (t0.elapsed(), children_cpu().saturating_sub(c0))
}

/// The `p` quantile (0..=1) of `samples`, in ms.
pub(crate) fn pct(samples: &mut [Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1e3
}
