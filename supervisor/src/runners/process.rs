//! The process I/O of agent runs behind one small trait, [`Processes`]:
//! start a run, signal its group, see whether it ended, recognise it after a
//! restart. squadd's shell (`daemon/processes.rs`) uses [`OsProcesses`];
//! run supervision's decisions are the core's (`daemon/core/runs.rs`),
//! which sees processes only as inputs, so time limits, retries and
//! re-adoption are unit-tested there without processes.

use super::RunRecord;
use squad_policies::usage::{OutputScan, Reported};
use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What a run is started with: everything decided before the spawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpawnRequest {
    /// argv, placeholders expanded; the program first.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The whole environment of the run (nothing else is inherited).
    pub env: Vec<(String, String)>,
    /// The run's folder (its run.log is there).
    pub run_dir: PathBuf,
    /// run.log's cap (`runners.log_max_size`), held at every write.
    pub log_max: u64,
}

/// A started run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spawned {
    /// Its pid (and process group id).
    pub pid: u32,
    /// Its start time as the kernel reports it (0 when it could not be read).
    pub process_start: u64,
}

/// How a run's leader ended (both `None`: unknown, e.g. a re-adopted run,
/// which is not squadd's child).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Ended {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal, when one killed it.
    pub signal: Option<i32>,
}

/// What a run's output said (docs/runners.md, "Tokens and cost").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OutputSeen {
    /// Usage figures so far (`None`: the CLI reported none).
    pub reported: Option<Reported>,
    /// The CLI's warning that its model is deprecated or retiring.
    pub warning: Option<String>,
    /// The CLI's own session (conversation) id, when it said one.
    pub conversation: Option<String>,
}

/// The signals squadd sends a run's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGTERM: the time limit passed or `squadctl stop`.
    Term,
    /// SIGKILL: the grace period passed.
    Kill,
}

impl Signal {
    /// The signal number.
    pub(crate) fn number(self) -> i32 {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// The process operations run supervision needs.
pub(crate) trait Processes {
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
    /// A run met again after a restart: its output is drained again.
    fn adopt(&mut self, record: &RunRecord, run_dir: &Path, log_max: u64);
    /// Sends `signal` to every process of the run still alive (its leader
    /// gone); how many there were (0: nothing of the run is left).
    fn contain(&mut self, record: &RunRecord, signal: Signal) -> usize;
    /// Whether the run's output is drained into run.log (every writer of
    /// its pipe closed it, or it has none).
    fn drained(&self, pid: u32) -> bool;
    /// What the run's output said, when that changed since the last call
    /// (`None`: nothing new, or output not read).
    fn output(&mut self, pid: u32) -> Option<OutputSeen> {
        let _ = pid;
        None
    }
}

/// The real processes of one project's runs.
#[derive(Default)]
pub(crate) struct OsProcesses {
    /// The project root (its runs' environment names it).
    root: PathBuf,
    /// The runs squadd started (reaped by `try_exit`).
    children: HashMap<u32, std::process::Child>,
    /// Each run's output pipe (device, inode) and whether it is drained, by
    /// the run's pid.
    pipes: HashMap<u32, ((u64, u64), Arc<AtomicBool>)>,
    /// What each run's output said so far, fed by its drain thread.
    scans: HashMap<u32, Arc<Mutex<OutputScan>>>,
}

impl OsProcesses {
    /// The runs of the project at `root`. squadd becomes a child subreaper
    /// (see `contain`).
    pub(crate) fn new(root: &Path) -> OsProcesses {
        super::contain::become_subreaper();
        OsProcesses {
            root: root.to_path_buf(),
            ..OsProcesses::default()
        }
    }

    fn drain(
        &mut self,
        pid: u32,
        reader: std::fs::File,
        pipe: (u64, u64),
        run_dir: &Path,
        max: u64,
    ) {
        let done = Arc::new(AtomicBool::new(false));
        let log = super::contain::CappedLog::open(run_dir, max)
            .inspect_err(
                |e| tracing::warn!(error = %e, "cannot open run.log; the run's output is dropped"),
            )
            .ok();
        let scan = Arc::new(Mutex::new(OutputScan::default()));
        super::contain::drain(reader, log, done.clone(), scan.clone());
        self.pipes.insert(pid, (pipe, done));
        self.scans.insert(pid, scan);
    }
}

impl Processes for OsProcesses {
    fn spawn(&mut self, request: &SpawnRequest) -> io::Result<Spawned> {
        use std::os::unix::process::CommandExt;
        let Some((program, args)) = request.argv.split_first() else {
            return Err(io::Error::other("the runner's command is empty"));
        };
        // Output through a pipe squadd drains into the capped run.log (the
        // cap holds at every write, after the leader exits too).
        let (reader, writer, pipe) = super::contain::make_pipe(&request.run_dir)?;
        let mut cmd = std::process::Command::new(program);
        cmd.args(args)
            .current_dir(&request.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(writer.try_clone()?)
            .stderr(writer)
            // Its own group: a time limit stops the agent and everything it started.
            .process_group(0)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)));
        let child = cmd.spawn()?;
        // squadd's copy of the run's end is closed with `cmd`: only the
        // run's processes keep the pipe open.
        drop(cmd);
        let pid = child.id();
        let process_start = crate::locks::process_start(pid).unwrap_or(0);
        self.children.insert(pid, child);
        self.drain(pid, reader, pipe, &request.run_dir, request.log_max);
        Ok(Spawned { pid, process_start })
    }

    fn signal_group(&mut self, pid: u32, signal: Signal) -> io::Result<()> {
        super::signal_group(pid, signal.number())
    }

    fn try_exit(&mut self, pid: u32, process_start: u64) -> Option<Ended> {
        use std::os::unix::process::ExitStatusExt;
        // Orphans re-parented to squadd that ended meanwhile: no zombie stays.
        super::contain::reap_orphans(&self.children.keys().copied().collect());
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

    fn adopt(&mut self, record: &RunRecord, run_dir: &Path, log_max: u64) {
        match super::contain::reopen_pipe(run_dir) {
            Ok((reader, pipe)) => self.drain(record.pid, reader, pipe, run_dir, log_max),
            // A run started before run.pipe existed writes run.log itself.
            Err(e) => tracing::debug!(error = %e, "no run.pipe to drain"),
        }
    }

    fn contain(&mut self, record: &RunRecord, signal: Signal) -> usize {
        let known = self.children.keys().copied().collect();
        super::contain::reap_orphans(&known);
        let pipe = self.pipes.get(&record.pid).map(|(p, _)| *p);
        let left = super::contain::run_processes(&self.root, record, pipe);
        super::contain::signal_each(&left, signal.number());
        left.len()
    }

    fn drained(&self, pid: u32) -> bool {
        self.pipes
            .get(&pid)
            .is_none_or(|(_, done)| done.load(Ordering::Acquire))
    }

    fn output(&mut self, pid: u32) -> Option<OutputSeen> {
        let drained = self.drained(pid);
        let seen = {
            let mut scan = self.scans.get(&pid)?.lock().ok()?;
            scan.take_changed().then(|| OutputSeen {
                reported: scan.reported(),
                warning: scan.warning().map(str::to_string),
                conversation: scan.conversation().map(str::to_string),
            })
        };
        // Drained: nothing more will come.
        if drained {
            self.scans.remove(&pid);
        }
        seen
    }
}
