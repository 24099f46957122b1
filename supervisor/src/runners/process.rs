//! The process I/O of agent runs behind one small trait, [`Processes`]:
//! start a run, signal its group, see whether it ended, recognise it after a
//! restart. squadd uses [`OsProcesses`]; the unit tests of run supervision
//! (`daemon::runs`) use a test double that starts nothing, so time limits,
//! retries and re-adoption are tested without processes.

use super::RunRecord;
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

/// What a run is started with: everything decided before the spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// argv, placeholders expanded; the program first.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The whole environment of the run (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The run's folder (its run.log is there).
    pub run_dir: PathBuf,
}

/// A started run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spawned {
    /// Its pid (and process group id).
    pub pid: u32,
    /// Its start time as the kernel reports it (0 when it could not be read).
    pub process_start: u64,
}

/// How a run's leader ended (both `None`: unknown, e.g. a re-adopted run,
/// which is not squadd's child).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ended {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when one killed it.
    pub signal: Option<i32>,
}

/// The signals squadd sends a run's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: the time limit passed or `squadctl stop`.
    Term,
    /// SIGKILL: the grace period passed.
    Kill,
}

impl Signal {
    /// The signal number.
    pub fn number(self) -> i32 {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// The process operations run supervision needs.
pub trait Processes {
    /// Starts a run in its own process group.
    fn spawn(&mut self, request: &SpawnRequest) -> io::Result<Spawned>;
    /// Sends `signal` to the process group `pid` leads.
    fn signal_group(&mut self, pid: u32, signal: Signal) -> io::Result<()>;
    /// `Some` once the run's leader has ended (a child of ours is reaped; a
    /// re-adopted one is looked up by pid and start time).
    fn try_exit(&mut self, pid: u32, process_start: u64) -> Option<Ended>;
    /// Whether the process of a record is alive and really that run (start
    /// time and environment match: a forged run.json must not make squadd
    /// adopt, and later signal, a stranger).
    fn is_run_process(&self, record: &RunRecord) -> bool;
    /// The leader of a run whose pid was never recorded: (pid, start time).
    fn find_run_process(&self, root: &Path, session: &str, task: &str) -> Option<(u32, u64)>;
}

/// The real processes.
#[derive(Default)]
pub struct OsProcesses {
    /// The runs squadd started (reaped by `try_exit`).
    children: HashMap<u32, std::process::Child>,
}

impl Processes for OsProcesses {
    fn spawn(&mut self, request: &SpawnRequest) -> io::Result<Spawned> {
        use std::os::unix::process::CommandExt;
        let Some((program, args)) = request.argv.split_first() else {
            return Err(io::Error::other("the runner's command is empty"));
        };
        // Opened relative to the run folder's descriptor: neither a link
        // planted as run.log nor one on the way to it is followed. (O_NONBLOCK,
        // set by `open_file` against FIFOs, means nothing to a regular file.)
        let log = super::open_existing(&request.run_dir)?.open_file(
            super::RUN_LOG,
            libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            0o666,
        )?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .current_dir(&request.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            // Its own group: a time limit stops the agent and everything it started.
            .process_group(0)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)));
        let child = cmd.spawn()?;
        let pid = child.id();
        let process_start = crate::locks::process_start(pid).unwrap_or(0);
        self.children.insert(pid, child);
        Ok(Spawned { pid, process_start })
    }

    fn signal_group(&mut self, pid: u32, signal: Signal) -> io::Result<()> {
        super::signal_group(pid, signal.number())
    }

    fn try_exit(&mut self, pid: u32, process_start: u64) -> Option<Ended> {
        use std::os::unix::process::ExitStatusExt;
        let Some(child) = self.children.get_mut(&pid) else {
            return (!super::alive(pid, process_start)).then_some(Ended::default());
        };
        let ended = match child.try_wait() {
            Ok(Some(status)) => Ended {
                code: status.code(),
                signal: status.signal(),
            },
            Ok(None) => return None,
            Err(_) => Ended::default(),
        };
        self.children.remove(&pid);
        Some(ended)
    }

    fn is_run_process(&self, record: &RunRecord) -> bool {
        super::is_run_process(record)
    }

    fn find_run_process(&self, root: &Path, session: &str, task: &str) -> Option<(u32, u64)> {
        super::find_run_process(root, session, task)
    }
}
