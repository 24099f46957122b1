//! A worktree's setup and cleanup lines (`runners.worktree_setup`,
//! `runners.worktree_cleanup`; docs/worktrees.md): shell lines run one by
//! one in the worktree, with the run's cleared environment, within one
//! time limit for all of them, their output appended to the run's run.log.

use super::contain::CappedLog;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The scratch file a line's output goes to before its tail is copied to
/// run.log, in the run's folder.
const OUTPUT_FILE: &str = "setup.out";
/// How much of a line's output reaches run.log (its end).
const LOG_TAIL: u64 = 16 * 1024;
/// How many lines of the failing line's output the error quotes.
const ERROR_LINES: usize = 20;

/// Why a setup or cleanup did not complete.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// A line exited non-zero (or was killed by a signal).
    #[error("`{line}` {how} after {secs:.1}s{}", said(tail))]
    Failed {
        /// The line.
        line: String,
        /// `exited 1`, `was killed by signal 9`.
        how: String,
        /// How long it ran.
        secs: f64,
        /// The end of its output.
        tail: String,
    },
    /// The time limit passed: the line's process group was killed.
    #[error(
        "`{line}` did not finish within {limit}s (the limit for all the lines; its process group was killed){}",
        said(tail)
    )]
    TimedOut {
        /// The line.
        line: String,
        /// The limit, in seconds.
        limit: u64,
        /// The end of its output.
        tail: String,
    },
    /// The shell could not be started, or its output not kept.
    #[error("`{line}`: {source}")]
    Io {
        /// The line.
        line: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn said(tail: &str) -> String {
    if tail.trim().is_empty() {
        " with no output".into()
    } else {
        format!("; its output ends:\n{tail}")
    }
}

/// Runs `lines` (each with `sh -c`) in `dir`, with exactly `env`, one
/// after the other, all within `limit`; each line's output (stdout and
/// stderr) is appended, under a `[squadd: {what}: LINE]` header, to the
/// run.log of `run_dir` (capped at `log_max`). Stops at the first line
/// that fails. Returns how long they took.
pub(crate) fn run_lines(
    what: &str,
    lines: &[String],
    dir: &Path,
    env: &[(String, String)],
    limit: Duration,
    run_dir: &Path,
    log_max: u64,
) -> Result<Duration, SetupError> {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let deadline = started + limit;
    let io = |line: &str| {
        let line = line.to_string();
        move |source| SetupError::Io { line, source }
    };
    for line in lines {
        let mut log = CappedLog::open(run_dir, log_max).map_err(io(line))?;
        log.write(format!("[squadd: {what}: {line}]\n").as_bytes())
            .map_err(io(line))?;
        let out = super::open_existing(run_dir)
            .and_then(|d| {
                d.open_file(
                    OUTPUT_FILE,
                    libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC,
                    0o600,
                )
            })
            .map_err(io(line))?;
        let err = out.try_clone().map_err(io(line))?;
        let line_start = Instant::now();
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(line)
            .current_dir(dir)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(io(line))?)
            .stderr(err)
            // Its own process group: a timeout kills what it started too.
            .process_group(0)
            .spawn()
            .map_err(io(line))?;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) | Err(_) => {
                    // SAFETY: a signal to the process group of the child we
                    // started, still unreaped.
                    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let tail = tail_of(out, &mut log);
        let _ = super::open_existing(run_dir).and_then(|d| d.unlink(OUTPUT_FILE));
        let Some(status) = status else {
            return Err(SetupError::TimedOut {
                line: line.clone(),
                limit: limit.as_secs(),
                tail,
            });
        };
        if !status.success() {
            use std::os::unix::process::ExitStatusExt;
            let how = match (status.code(), status.signal()) {
                (Some(c), _) => format!("exited {c}"),
                (None, Some(s)) => format!("was killed by signal {s}"),
                (None, None) => "failed".into(),
            };
            return Err(SetupError::Failed {
                line: line.clone(),
                how,
                secs: line_start.elapsed().as_secs_f64(),
                tail,
            });
        }
    }
    Ok(started.elapsed())
}

/// `runners.worktree_cleanup` in the worktree of a run (`rec`) before
/// squadd removes it: with the cleared environment runs get and the run's
/// `SQUAD_*` variables, within `runners.worktree_setup_timeout`. A failure
/// is logged (and in run.log), never a reason to keep the worktree: its
/// work is merged.
pub(crate) fn clean_up(
    root: &Path,
    runners: &squad_policies::runners::RunnersPolicy,
    run_dir: &Path,
    tree: &Path,
    rec: &super::RunRecord,
) {
    if runners.worktree_cleanup.is_empty() {
        return;
    }
    let mut env = crate::child_env::cleared(std::env::vars_os(), &runners.pass_env);
    env.extend(super::squad_env(root, &rec.session, &rec.agent, &rec.task));
    let env: Vec<(String, String)> = env.into_iter().collect();
    if let Err(e) = run_lines(
        "worktree cleanup",
        &runners.worktree_cleanup,
        tree,
        &env,
        runners.worktree_setup_timeout,
        run_dir,
        runners.log_max_bytes,
    ) {
        tracing::warn!(task = %rec.task, error = %e, "a worktree's cleanup failed; the worktree is removed all the same");
    }
}

/// Copies the end of a line's output into run.log; returns its last lines
/// (escaped: a line's output is the repository's, shown to people).
fn tail_of(mut out: std::fs::File, log: &mut CappedLog) -> String {
    let size = out.metadata().map_or(0, |m| m.len());
    let mut buf = Vec::new();
    if out
        .seek(SeekFrom::Start(size.saturating_sub(LOG_TAIL)))
        .is_ok()
    {
        let _ = out.take(LOG_TAIL).read_to_end(&mut buf);
    }
    if !buf.is_empty() {
        let _ = log.write(&buf);
        if !buf.ends_with(b"\n") {
            let _ = log.write(b"\n");
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(ERROR_LINES)..]
        .iter()
        .map(|l| format!("  | {}", crate::text::escape(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap().join("run");
        std::fs::create_dir_all(&dir).unwrap();
        (tmp, dir)
    }

    #[test]
    fn lines_run_in_order_with_only_the_given_environment() {
        let (_t, dir) = run_dir();
        let env = vec![
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
            ("ONLY".to_string(), "this".to_string()),
        ];
        let lines = vec![
            "echo \"one $ONLY ${HOME:-nohome}\" > out.txt".to_string(),
            "echo two >> out.txt; echo said".to_string(),
        ];
        run_lines(
            "setup",
            &lines,
            &dir,
            &env,
            Duration::from_secs(30),
            &dir,
            1 << 20,
        )
        .unwrap();
        let out = std::fs::read_to_string(dir.join("out.txt")).unwrap();
        assert_eq!(out, "one this nohome\ntwo\n");
        let log = std::fs::read_to_string(dir.join("run.log")).unwrap();
        assert!(
            log.contains("[squadd: setup: echo two >> out.txt; echo said]\nsaid\n"),
            "{log}"
        );
        assert!(!dir.join(OUTPUT_FILE).exists());
    }

    #[test]
    fn a_failing_line_stops_the_rest_and_says_its_output() {
        let (_t, dir) = run_dir();
        let lines = vec![
            "echo preparing; echo broken >&2; exit 3".to_string(),
            "touch never".to_string(),
        ];
        let e = run_lines(
            "setup",
            &lines,
            &dir,
            &[],
            Duration::from_secs(30),
            &dir,
            1 << 20,
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("exited 3") && text.contains("  | broken"),
            "{text}"
        );
        assert!(!dir.join("never").exists());
    }

    #[test]
    fn a_line_past_the_limit_is_killed_with_what_it_started() {
        let (_t, dir) = run_dir();
        // A child of the line that would outlive it if only sh were killed.
        let lines = vec!["(sleep 30; touch late) & echo waiting; sleep 30".to_string()];
        let t = Instant::now();
        let e = run_lines(
            "setup",
            &lines,
            &dir,
            &[],
            Duration::from_millis(300),
            &dir,
            1 << 20,
        )
        .unwrap_err();
        assert!(matches!(e, SetupError::TimedOut { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(20));
        assert!(e.to_string().contains("  | waiting"), "{e}");
    }
}
