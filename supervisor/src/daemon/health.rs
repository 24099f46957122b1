//! `squadctl health`: the daemon's resource use, each figure with a verdict.

use super::hooks::HooksReport;
use serde::{Deserialize, Serialize};
use std::path::Path;
use sysinfo::{Disks, Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// A verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    /// Fine.
    Ok,
    /// Worth a look.
    Warn,
    /// Act now.
    Critical,
}

/// One measured figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Check {
    /// What was measured.
    pub name: String,
    /// The value, human readable.
    pub value: String,
    /// The verdict.
    pub verdict: Verdict,
    /// What the thresholds are, or what to do.
    pub note: String,
}

/// The health report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Health {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Average CPU use since start, percent of one core.
    pub cpu_percent: f64,
    /// Inotify (or equivalent) watches held.
    pub watches: usize,
    /// The per-user watch limit, when known.
    pub max_user_watches: Option<u64>,
    /// File events waiting to be processed.
    pub queue_depth: usize,
    /// Free bytes on each root's volume.
    pub disk_free_bytes: Vec<(String, u64)>,
    /// Directories squadd could not watch (the inotify limit); retried
    /// with backoff, and what happens in them is missed until then.
    #[serde(default)]
    pub unwatched: Vec<String>,
    /// Why squadd polls the directories instead of being told of changes
    /// (no inotify instance could be had), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling: Option<String>,
    /// Each root's notify commands (queued, running, failed).
    #[serde(default)]
    pub hooks: Vec<RootHooks>,
    /// How often the event loop woke since start, and why.
    #[serde(default)]
    pub turns: Turns,
    /// Every figure with its verdict.
    pub checks: Vec<Check>,
}

impl Health {
    /// The worst verdict.
    pub(crate) fn verdict(&self) -> Verdict {
        self.checks
            .iter()
            .map(|c| c.verdict)
            .max_by_key(|v| match v {
                Verdict::Ok => 0,
                Verdict::Warn => 1,
                Verdict::Critical => 2,
            })
            .unwrap_or(Verdict::Ok)
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn threshold<T: PartialOrd>(value: T, warn: T, critical: T) -> Verdict {
    if value >= critical {
        Verdict::Critical
    } else if value >= warn {
        Verdict::Warn
    } else {
        Verdict::Ok
    }
}

fn max_user_watches() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// One root's notify commands, in `health --json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RootHooks {
    /// The root.
    pub root: String,
    /// Its figures.
    #[serde(flatten)]
    pub hooks: HooksReport,
}

/// The oldest queued notify command has waited this long: `hooks` warns
/// (a slow command holds the queue up).
pub(crate) const HOOK_QUEUE_WARN_SECS: u64 = 5 * 60;
/// ... and this long: `hooks` is critical.
pub(crate) const HOOK_QUEUE_CRITICAL_SECS: u64 = 30 * 60;
/// This many notify commands failed one after the other: `hook-failures`
/// is critical (one failure in the last hour already warns).
pub(crate) const HOOK_FAILURES_CRITICAL: u64 = 5;

/// How squadd holds one root, for `health`.
#[derive(Debug, Clone)]
pub(crate) struct RootControl {
    /// The root.
    pub root: String,
    /// What is wrong (missing, taken over, socket not bound), if anything.
    pub problem: Option<String>,
    /// Its notify commands.
    pub hooks: HooksReport,
    /// With `cluster:`, the replicated supervisor outputs refused as not
    /// the leader's: how many, and the last one's description.
    pub refused_outputs: Option<(u64, Option<String>)>,
}

/// The `replica-refused` check of one root: shown once a replicated
/// supervisor output was refused as not the leader's (docs/cluster.md,
/// "Only the leader's"); someone with the project's NATS credentials wrote
/// it, which a person should know.
fn refused_check(root: &str, refused: Option<&(u64, Option<String>)>) -> Option<Check> {
    let (n, last) = refused.filter(|r| r.0 > 0)?;
    Some(Check {
        name: "replica-refused".into(),
        value: format!(
            "{n} supervisor output(s) refused as not the leader's{} ({root})",
            match last {
                Some(l) => format!("; last: {l}"),
                None => String::new(),
            }
        ),
        verdict: Verdict::Warn,
        note: "a value in the files bucket claimed to be the leader's output and the lease says otherwise: a NATS client with the project's credentials wrote it (`cluster status`, replica-dropped events)".into(),
    })
}

/// The `hooks` and `hook-failures` checks of one root: shown when its
/// policy names a notify command or any ran (a root without hooks has
/// nothing to say).
fn hook_checks(root: &str, h: &HooksReport) -> Vec<Check> {
    if !h.configured && h.queued + h.running == 0 && h.succeeded + h.failed == 0 {
        return Vec::new();
    }
    let oldest = h.oldest_queued_secs.unwrap_or(0);
    let waited = match h.oldest_queued_secs {
        Some(s) => format!(
            ", oldest waiting {}",
            squad_policies::duration::format_duration(std::time::Duration::from_secs(s))
        ),
        None => String::new(),
    };
    let failures = if h.consecutive_failures >= HOOK_FAILURES_CRITICAL {
        Verdict::Critical
    } else if h.failed_last_hour > 0 || h.consecutive_failures > 0 {
        Verdict::Warn
    } else {
        Verdict::Ok
    };
    vec![
        Check {
            name: "hooks".into(),
            value: format!(
                "{} queued{waited}, {} running of {} ({root})",
                h.queued, h.running, h.max_concurrent
            ),
            verdict: threshold(oldest, HOOK_QUEUE_WARN_SECS, HOOK_QUEUE_CRITICAL_SECS),
            note: "notify commands; warn when the oldest queued one has waited 5 min, critical at 30 min (a slow command holds the queue: shorten its timeout or raise hooks.max_concurrent)".into(),
        },
        Check {
            name: "hook-failures".into(),
            value: format!(
                "{} failed in the last hour, {} since start, {} in a row{} ({root})",
                h.failed_last_hour,
                h.failed,
                h.consecutive_failures,
                match &h.last_error {
                    Some(e) => format!("; last: {e}"),
                    None => String::new(),
                }
            ),
            verdict: failures,
            note: "notify commands failed after their retries (notify-failed events); warn when any failed in the last hour, critical at 5 in a row".into(),
        },
    ]
}

/// How often squadd's event loop woke since start, by what woke it. A
/// counter, not a timing: each wake-up is a trip through the runtime and a
/// pass over the due work, and what one change costs in them is bounded by
/// a test (`one_progress_update_costs_a_bounded_number_of_wake_ups`), so a
/// hop through the loop added between a change and its outputs shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Turns {
    /// Every wake-up.
    pub total: u64,
    /// Watcher notifications (one wake-up takes all that are queued).
    pub file_events: u64,
    /// The head of the timer queue or a settling path came due.
    pub due: u64,
    /// Control-socket calls (this `health` call among them).
    pub calls: u64,
    /// The background writer's completions (the shared context).
    pub written_behind: u64,
    /// Everything else: notify commands' outcomes, the cluster's tasks.
    pub other: u64,
    /// Turns that gave the runtime a turn first, because more was ready
    /// already (each a trip through the runtime: see `daemon::run`).
    #[serde(default)]
    pub yields: u64,
}

/// What woke the event loop, for [`Turns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// A watcher notification.
    FileEvent,
    /// A timer or a settling path.
    Due,
    /// A control-socket call.
    Call,
    /// The background writer.
    WrittenBehind,
    /// A hook's outcome or a cluster task.
    Other,
}

impl Turns {
    /// Counts one wake-up.
    pub(crate) fn count(&mut self, why: Woken) {
        self.total += 1;
        let n = match why {
            Woken::FileEvent => &mut self.file_events,
            Woken::Due => &mut self.due,
            Woken::Call => &mut self.calls,
            Woken::WrittenBehind => &mut self.written_behind,
            Woken::Other => &mut self.other,
        };
        *n += 1;
    }
}

/// What squadd knows that `health` reports besides the process figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct Supervision {
    /// Watches held.
    pub watches: usize,
    /// File events waiting.
    pub queue_depth: usize,
    /// Directories that could not be watched.
    pub unwatched: Vec<String>,
    /// Why the watcher polls, when it does.
    pub polling: Option<String>,
    /// Each root.
    pub roots: Vec<RootControl>,
    /// The event loop's wake-ups.
    pub turns: Turns,
}

/// Measures the current process.
pub(crate) fn measure(s: &Supervision) -> Health {
    let watches = s.watches;
    let queue_depth = s.queue_depth;
    let roots: Vec<&Path> = s.roots.iter().map(|r| Path::new(&r.root)).collect();
    let pid = Pid::from_u32(std::process::id());
    let mut system = System::new();
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[pid]),
        true,
        ProcessRefreshKind::nothing().with_memory().with_cpu(),
    );
    let (rss, cpu) = system.process(pid).map_or((0, 0.0), |p| {
        let run = p.run_time().max(1) as f64;
        (
            p.memory(),
            p.accumulated_cpu_time() as f64 / 1000.0 / run * 100.0,
        )
    });
    let max_watches = max_user_watches();
    let disks = Disks::new_with_refreshed_list();
    let disk_free: Vec<(String, u64, u64)> = roots
        .iter()
        .map(|root| {
            let best = disks
                .list()
                .iter()
                .filter(|d| root.starts_with(d.mount_point()))
                .max_by_key(|d| d.mount_point().as_os_str().len());
            (
                root.display().to_string(),
                best.map_or(0, |d| d.available_space()),
                best.map_or(0, |d| d.total_space()),
            )
        })
        .collect();

    let mut checks = vec![
        Check {
            name: "memory".into(),
            value: mib(rss),
            verdict: threshold(rss, 64 << 20, 256 << 20),
            note: "resident set; warn at 64 MiB, critical at 256 MiB".into(),
        },
        Check {
            name: "cpu".into(),
            value: format!("{cpu:.2}% average since start"),
            verdict: threshold(cpu, 5.0, 50.0),
            note: "an idle daemon uses ~0%; warn at 5%, critical at 50%".into(),
        },
        Check {
            name: "watches".into(),
            value: match max_watches {
                Some(max) => format!("{watches} of {max}"),
                None => watches.to_string(),
            },
            verdict: max_watches.map_or(Verdict::Ok, |max| {
                threshold(watches as f64 / max.max(1) as f64, 0.5, 0.9)
            }),
            note: "raise with: sysctl fs.inotify.max_user_watches=524288".into(),
        },
        Check {
            name: "watcher".into(),
            value: match &s.polling {
                Some(_) => "polling".into(),
                None => "told of changes".into(),
            },
            verdict: if s.polling.is_some() {
                Verdict::Warn
            } else {
                Verdict::Ok
            },
            note: s.polling.clone().unwrap_or_else(|| {
                "the kernel reports each change (inotify); polling only where no inotify instance or watch can be had".into()
            }),
        },
        Check {
            name: "unwatched".into(),
            value: match s.unwatched.len() {
                0 => "none".into(),
                n => format!(
                    "{} ({}{})",
                    crate::text::count(n, "directory", "directories"),
                    s.unwatched[..n.min(3)].join(", "),
                    if n > 3 { ", …" } else { "" }
                ),
            },
            // Polled meanwhile: changes there are seen, late (a warning,
            // not a failure).
            verdict: if s.unwatched.is_empty() {
                Verdict::Ok
            } else {
                Verdict::Warn
            },
            note: "directories squadd could not watch (inotify limit): polled every 2 s and retried with backoff until watched; raise with: sysctl fs.inotify.max_user_watches=524288".into(),
        },
        Check {
            name: "queue".into(),
            value: format!("{queue_depth} pending file events"),
            verdict: threshold(queue_depth, 1_000, 10_000),
            note: "events waiting to be processed; warn at 1,000".into(),
        },
    ];
    for r in &s.roots {
        checks.push(Check {
            name: "root".into(),
            value: format!(
                "{} ({})",
                r.problem.as_deref().unwrap_or("supervised"),
                r.root
            ),
            verdict: if r.problem.is_some() {
                Verdict::Critical
            } else {
                Verdict::Ok
            },
            note: "watched, pid lock held, control socket bound; a removed socket is bound again, a recreated root taken back".into(),
        });
        checks.extend(hook_checks(&r.root, &r.hooks));
        checks.extend(refused_check(&r.root, r.refused_outputs.as_ref()));
    }
    for (root, free, total) in &disk_free {
        let ratio = if *total == 0 {
            1.0
        } else {
            *free as f64 / *total as f64
        };
        let verdict = if *total == 0 {
            Verdict::Warn
        } else if *free < (256 << 20) || ratio < 0.02 {
            Verdict::Critical
        } else if *free < (1 << 30) || ratio < 0.10 {
            Verdict::Warn
        } else {
            Verdict::Ok
        };
        checks.push(Check {
            name: "disk".into(),
            value: format!("{} free of {} ({root})", mib(*free), mib(*total)),
            verdict,
            note: "warn under 1 GiB or 10% free, critical under 256 MiB or 2%".into(),
        });
    }
    Health {
        rss_bytes: rss,
        cpu_percent: cpu,
        watches,
        max_user_watches: max_watches,
        queue_depth,
        disk_free_bytes: disk_free.into_iter().map(|(r, f, _)| (r, f)).collect(),
        unwatched: s.unwatched.clone(),
        polling: s.polling.clone(),
        hooks: s
            .roots
            .iter()
            .map(|r| RootHooks {
                root: r.root.clone(),
                hooks: r.hooks.clone(),
            })
            .collect(),
        turns: s.turns,
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(h: &HooksReport) -> Vec<(String, Verdict)> {
        hook_checks("/p", h)
            .into_iter()
            .map(|c| (c.name, c.verdict))
            .collect()
    }

    #[test]
    fn hook_checks_by_queue_age_and_failures() {
        use Verdict::*;
        let base = HooksReport {
            configured: true,
            max_concurrent: 4,
            ..HooksReport::default()
        };
        let with = |f: &dyn Fn(&mut HooksReport)| {
            let mut h = base.clone();
            f(&mut h);
            h
        };
        let table: Vec<(HooksReport, Verdict, Verdict)> = vec![
            (base.clone(), Ok, Ok),
            (with(&|h| h.oldest_queued_secs = Some(299)), Ok, Ok),
            (with(&|h| h.oldest_queued_secs = Some(300)), Warn, Ok),
            (with(&|h| h.oldest_queued_secs = Some(1_800)), Critical, Ok),
            (with(&|h| h.failed = 3), Ok, Ok),
            (with(&|h| h.failed_last_hour = 1), Ok, Warn),
            (with(&|h| h.consecutive_failures = 4), Ok, Warn),
            (with(&|h| h.consecutive_failures = 5), Ok, Critical),
        ];
        for (h, queue, failures) in table {
            assert_eq!(
                verdicts(&h),
                [("hooks".into(), queue), ("hook-failures".into(), failures)],
                "{h:?}"
            );
        }
        // A root without notify commands, where none ran: no checks.
        assert!(verdicts(&HooksReport::default()).is_empty());
        // One whose policy no longer names any, with failures left: shown.
        let left = HooksReport {
            failed: 1,
            ..HooksReport::default()
        };
        assert_eq!(verdicts(&left).len(), 2);
    }
}
