//! What the core asks the shell to do, and the moment it decides at.

use super::RootId;
use super::timer::Timer;
use crate::events::EventKind;
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::time::Duration;

/// The moment of one step, as the shell read the wall clock: the core
/// never reads a clock. Timers it sets are either at a wall-clock moment or
/// a duration from when the shell carries the effect out, so it needs no
/// monotonic instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    /// The wall clock (deadlines written in files).
    pub wall: DateTime<Utc>,
}

/// One thing to do. A step returns them in the order they must be carried
/// out: the order is the contract (see [`super::batch`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Effect {
    /// Write squadd's notices for the facts tapped so far (one group
    /// commit) and put their deliveries in the outbox; a
    /// [`Effect::FlushOutbox`] after it makes them.
    SendNotices,
    /// Send the first notices of a start-up: at most
    /// `notices::STARTUP_NOTICES` before READY, so readiness does not wait
    /// on a backlog of notices owed (the rest follow a batch per wake-up).
    SendFirstNotices,
    /// Tap a fact for the next [`Effect::SendNotices`] (a standing fact
    /// found at start-up).
    Tap {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// The fact.
        kind: EventKind,
    },
    /// Write one notice file (new: the file is the record), then index and
    /// route it from the bytes written. Those of one step are written as
    /// one group commit.
    WriteNotice(super::notices::NoticeFile),
    /// Render each session's session-status.md and write it when it
    /// differs (under the session's lock; a busy lock is retried later).
    WriteStatuses {
        /// The root.
        root: RootId,
        /// Session directory names.
        sessions: Vec<String>,
    },
    /// Offer a session's waiting deliveries again (a recipient may no
    /// longer be busy).
    RecheckWaiting {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// [`Effect::RecheckWaiting`] and [`Effect::FlushOutbox`], only if the
    /// session's directory is still there (a held-back session may be
    /// being deleted: nothing is recreated in it).
    RecheckWaitingIfPresent {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Make the deliveries due now, critical first.
    FlushOutbox,
    /// Look at every root's agent runs (exits, time limits, idleness),
    /// then dispatch (docs/runners.md): the end of every batch.
    SuperviseRuns,
    /// Put a delivery due now in the outbox (made at the next
    /// [`Effect::FlushOutbox`], critical first).
    Outbox {
        /// The root.
        root: RootId,
        /// The delivery.
        delivery: Box<crate::daemon::routing::Delivery>,
    },
    /// Write a delivery into its recipient's inbox (not yet durable: the
    /// outbox's inboxes are fsynced once each after the whole batch) and
    /// answer with [`super::Input::InboxWritten`]; the recipient's hook is
    /// journalled before the write and started only once it is announced.
    WriteInbox {
        /// The root.
        root: RootId,
        /// The delivery.
        delivery: Box<crate::daemon::routing::Delivery>,
        /// What to write.
        bytes: Vec<u8>,
        /// A routed message's source.
        routed_from: Option<String>,
    },
    /// Watch a directory, non-recursively (an inbox's `new/`: its
    /// acknowledgements count; the root's `.squad/run`: the socket and pid
    /// file).
    Watch {
        /// The root.
        root: RootId,
        /// The directory.
        dir: PathBuf,
    },
    /// A fresh delivery, to announce once its inbox is durable: the shell
    /// fsyncs the batch's inboxes, then answers with
    /// [`super::Input::DeliverySynced`] and starts the delivery's hook.
    Announce(Box<super::deliver::Announce>),
    /// Offer a deferred delivery again (its timer fired).
    OfferWaiting {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Recipient.
        to: String,
        /// Inbox file name.
        name: String,
    },
    /// Escalate the unread messages of a session whose time came (the
    /// shell answers whether each is still unread: [`super::escalations`]).
    RunEscalations {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Wrap up a session that ended, if its directory is still there.
    WrapUpIfPresent {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
    },
    /// Set (or move) a timer, `after` counted from when the shell carries
    /// the effect out (as before the core existed: a long batch does not
    /// shorten a quiet period).
    SetTimer {
        /// The timer.
        timer: Timer,
        /// How long from now.
        after: Duration,
    },
    /// Set a timer unless it is already set earlier (coalescing never
    /// postpones).
    SetTimerEarlier {
        /// The timer.
        timer: Timer,
        /// How long from now.
        after: Duration,
    },
    /// Set a timer at a wall-clock moment.
    SetTimerAt {
        /// The timer.
        timer: Timer,
        /// When.
        at: DateTime<Utc>,
    },
    /// Set a timer at a wall-clock moment unless it is already set
    /// earlier.
    SetTimerEarlierAt {
        /// The timer.
        timer: Timer,
        /// When.
        at: DateTime<Utc>,
    },
    /// Cancel a timer.
    CancelTimer(Timer),
    /// Record an event.
    Emit {
        /// The root.
        root: RootId,
        /// The session, if the event is about one.
        session: Option<String>,
        /// The path, if the event is about a file.
        path: Option<PathBuf>,
        /// What happened.
        kind: EventKind,
    },
    /// Run a recipient's notify hook for a message squadd escalated.
    Notify {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Recipient.
        to: String,
        /// Message id.
        message_id: String,
        /// Priority.
        priority: squad_protocol::model::Priority,
        /// The unread inbox file.
        path: PathBuf,
    },
    /// Write the root's persisted state now.
    SaveState(RootId),
    /// Render the root's shared context and have it written.
    WriteSharedContext(RootId),
    /// Re-read the root's lock records.
    RefreshLocks(RootId),
    /// Run retention on the root and schedule its next run.
    RunRetention(RootId),
    /// Re-read the root's skills and team.
    RefreshSkills(RootId),
    /// Merge the root's decisions inbox.
    MergeMemoryInbox(RootId),
    /// Check the root's pid lock and control socket.
    CheckControl(RootId),
    /// Look whether the root's `.squad/sessions` is there, and tell the
    /// core ([`super::Input::RootLookedAt`]).
    CheckRoot(RootId),
    /// Retry the directories that could not be watched.
    Rewatch,
    /// Give memory freed after a burst back to the OS.
    TrimMemory,
    /// Route a file of a session that changed: the shell checks for a
    /// reused message id (it reads the inbox copies), then hands the file
    /// over ([`super::Input::FileApplied`]).
    Route {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// The file's name.
        file: String,
        /// The file's bytes as squadd wrote them (a notice).
        own: Option<std::sync::Arc<[u8]>>,
    },
    /// Wrap up a session that ended: release its locks, write its summary.
    WrapUp {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
    },
    /// The batch touched a session (`removal`: only by losing a file): its
    /// outputs are settled at the batch's end ([`super::batch::settle`]).
    Touched {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Whether the change was only a removal.
        removal: bool,
    },
    /// A path was found present (or is not indexed): no removal of it
    /// waits to be confirmed.
    PathPresent(PathBuf),
    /// A path was read (or went): its unreadable retries end.
    PathReadable(PathBuf),
    /// A file was unreadable: read it again after a back-off.
    RetryUnreadable(PathBuf),
    /// An indexed file was found gone: answer with
    /// [`super::Input::FileRemoved`] once it stayed gone past the grace
    /// (the shell reads it again then; a file back by then is a change).
    ConfirmGone {
        /// The root.
        root: RootId,
        /// The file.
        file: super::files::FileRef,
    },
    /// A session that ended while squadd was down (start-up): release its
    /// locks if its `locks/` is still there, write its summary if missing.
    FinishEnded {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
    },
    /// List a session's inboxes (watching each `new/`) and answer with
    /// [`super::Input::InboxesListed`].
    SeedMail {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Render the root's shared context and write it before going on
    /// (start-up).
    WriteSharedContextNow(RootId),
    /// Forget the watches under the root's `.squad/` (and under the root
    /// when it is gone too): the kernel dropped them.
    ForgetWatches(RootId),
    /// Drop the watches under the root (a root directory replaced).
    UnwatchRoot(RootId),
    /// Check the root's control, watch it, list its session directories
    /// and answer with [`super::Input::SessionListed`], then
    /// [`super::Input::Rescanned`].
    ListSessions(RootId),
    /// The sessions of a rescan are read: answer with
    /// [`super::Input::Rescanned`].
    FinishRescan(RootId),
    /// List a known session's files and answer with
    /// [`super::Input::SessionFilesListed`].
    RescanSession {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Scan a session directory and answer with
    /// [`super::Input::SessionScanned`].
    ScanSession {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Why it is scanned.
        why: super::scan::Scanned,
    },
    /// Read a file of a session and answer with what the read gave
    /// ([`super::Input::FileRead`], `FileGone`, `FileUnreadable`).
    ReadFile {
        /// The root.
        root: RootId,
        /// The file.
        file: super::files::FileRef,
        /// Its kind.
        kind: squad_protocol::FileKind,
    },
    /// Watch a session directory and its `locks/`.
    WatchSession {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// A session is forgotten: its timers, watches and staged writes go.
    ForgetSession {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Another squadd holds the root's pid lock: let go of the root (pid
    /// lock, socket, watches, timers), then tell the core
    /// ([`super::Input::TakenOver`]).
    GiveUpRoot {
        /// The root.
        root: RootId,
        /// That squadd's pid.
        pid: String,
    },
    /// Re-read the root's config.json (`Input::ConfigRead`).
    ReloadConfig(RootId),
    /// Re-read the root's `.squad/policies.yaml`; a policy replaced is
    /// [`super::Input::PolicyRead`].
    ReloadPolicy(RootId),
    /// Look whether a session directory is one now and answer with
    /// [`super::Input::SessionDir`] (the session it touched, for the batch).
    LookAtSessionDir {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Watch a session's `locks/` if it exists.
    WatchLocks {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Read an agent's presence record and answer with
    /// [`super::Input::PresenceRead`].
    LookAtPresence {
        /// The root.
        root: RootId,
        /// The agent.
        agent: String,
        /// The record.
        path: PathBuf,
    },
    /// Look at an entry of an unread inbox (one `stat`) and answer with
    /// [`super::Input::InboxEntry`].
    LookAtInboxEntry {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// The inbox's agent.
        agent: String,
        /// The entry's file name.
        file: String,
        /// Its path.
        path: PathBuf,
    },
    /// Read a changed file of a known session and answer with what the
    /// read gave (as [`Effect::ReadFile`]; the session it touched counts
    /// for the batch).
    ApplyFile {
        /// The root.
        root: RootId,
        /// The file.
        file: super::files::FileRef,
        /// Its kind.
        kind: squad_protocol::FileKind,
    },
    /// Ping the watchdog and arm the next ping.
    Watchdog,
    /// Recompute the STATUS= line and send it if it changed.
    StatusLine,
    // ---- Agent runs (core/runs.rs) ----
    /// Prepare a run (folder, prompt, worktree, record) and start its
    /// process; tell the core with [`super::Input::RunSpawned`] or
    /// [`super::Input::SpawnFailed`].
    SpawnRun {
        /// The root.
        root: RootId,
        /// What to start.
        spec: Box<super::runs::RunSpec>,
    },
    /// Signal a live run's process group (a failure is logged).
    SignalRun {
        /// The root.
        root: RootId,
        /// The group's leader.
        pid: u32,
        /// The signal.
        signal: crate::runners::Signal,
    },
    /// Signal every process of a run still alive (its leader gone); with
    /// `report`, tell the core what was left ([`super::Input::RunLeft`]).
    ContainRun {
        /// The root.
        root: RootId,
        /// (session, task).
        run: super::runs::RunKey,
        /// The run's record (pid 0: found by its environment only).
        rec: Box<crate::runners::RunRecord>,
        /// The signal.
        signal: crate::runners::Signal,
        /// Whether the core waits for the answer.
        report: bool,
    },
    /// Drain a run met again after a restart.
    AdoptRun {
        /// The root.
        root: RootId,
        /// Its record.
        rec: Box<crate::runners::RunRecord>,
        /// Its folder.
        dir: PathBuf,
        /// run.log's cap.
        log_max: u64,
    },
    /// `squadctl stop`: SIGTERM to a run's group, then
    /// [`super::Input::RunStopped`] (or the error as the answer).
    StopRun {
        /// The root.
        root: RootId,
        /// (session, task).
        run: super::runs::RunKey,
        /// The group's leader.
        pid: u32,
    },
    /// Write a run's run.json (after the fact it records: a failure is
    /// logged, never undone).
    WriteRunRecord {
        /// The run's folder.
        dir: PathBuf,
        /// The record.
        rec: Box<crate::runners::RunRecord>,
    },
    /// A run whose task completed: if it ran in a worktree of its own,
    /// merge its branch or hold it (docs/worktrees.md; a no-op otherwise).
    FinishWorktree {
        /// The root.
        root: RootId,
        /// The run's folder.
        dir: PathBuf,
        /// The run's final record.
        rec: Box<crate::runners::RunRecord>,
        /// `squadctl merge` asked for it (its answer waits for the outcome).
        by_hand: bool,
        /// `runners.merge: review` (docs/review.md): its leftovers
        /// committed and the branch recorded `review` instead of merged.
        review: bool,
    },
    /// Look at what a live worktree run's branch changes (git, at the
    /// edge: `worktree::changes`), then [`super::Input::TreeLooked`].
    LookAtTree {
        /// The root.
        root: RootId,
        /// The run.
        run: super::runs::RunKey,
        /// The run's folder.
        dir: PathBuf,
    },
    /// `squadctl merge TASK --drop`: a held branch given up (recorded
    /// `dropped`, the branch kept), then [`super::Input::WorktreeFinished`].
    DropWorktree {
        /// The root.
        root: RootId,
        /// The run's folder.
        dir: PathBuf,
        /// The run's last record.
        rec: Box<crate::runners::RunRecord>,
        /// `squadctl review reject`: recorded `rejected` with the lead's
        /// comment instead of `dropped` (docs/review.md).
        rejected: Option<String>,
    },
    /// A high-priority message from squadd to the lead the policy names.
    TellLead {
        /// The root.
        root: RootId,
        /// The session.
        session: String,
        /// The task it is about, if any.
        task: Option<String>,
        /// The message's subject (`run of task_1 failed`).
        subject: String,
        /// The text.
        text: String,
        /// A run folder whose run.log's tail is appended.
        tail_of: Option<PathBuf>,
    },
    /// The look's spawns are carried out: [`super::Input::RunsLooked`].
    RunsLooked {
        /// The root.
        root: RootId,
        /// The next retry due, if any.
        retry_at: Option<DateTime<Utc>>,
    },
    /// The answer to `squadctl run|stop`: (session, pid) or why not.
    RunReply {
        /// The root.
        root: RootId,
        /// (session, pid) or the error.
        reply: Result<(String, u32), super::runs::RunError>,
    },
    // ---- squadd's own outputs (core/outputs.rs) ----
    /// Take each session's lock without waiting, re-read its status file
    /// under a lock taken, and answer with
    /// [`super::Input::StatusesLocked`]; the locks are held until that
    /// step's effects are carried out.
    LockStatuses {
        /// The root.
        root: RootId,
        /// Session directory names.
        sessions: Vec<String>,
    },
    /// Write these status files as one batch of the writer (the leader's
    /// supervisor-owned writes), each answered with
    /// [`super::Input::StatusWritten`].
    WriteStatusTexts {
        /// The root.
        root: RootId,
        /// The files and their texts.
        texts: Vec<super::outputs::StatusText>,
    },
    /// Assemble the shared context from these fragments and write it if
    /// it changed (behind, unless `now`); answered with
    /// [`super::Input::OutputDone`].
    WriteContext {
        /// The root.
        root: RootId,
        /// The file.
        path: PathBuf,
        /// Every session's part, by session name.
        fragments: super::ContextParts,
        /// Before going on (start-up, shutdown).
        now: bool,
    },
    /// Write the persisted state (a failure, or bytes that could not be
    /// encoded, is logged: the next save writes it).
    WriteState {
        /// The root.
        root: RootId,
        /// `.squad/run/state.json`.
        path: PathBuf,
        /// Its bytes, or why they could not be encoded.
        bytes: Result<Vec<u8>, String>,
    },
    /// Lock the lock table without waiting, read it and answer with
    /// [`super::Input::LocksRead`]; the table stays locked until that
    /// step's effects are carried out.
    ReadLocks(RootId),
    /// Reclaim these expired locks (the table is locked) and answer with
    /// [`super::Input::LocksReclaimed`].
    ReclaimLocks {
        /// The root.
        root: RootId,
        /// The expired locks.
        expired: Vec<crate::locks::Entry>,
    },
    /// Release the locks of a session that ended and answer with
    /// [`super::Input::SessionLocksReleased`].
    ReleaseSessionLocks {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Why, in the release events (`session completed`).
        reason: String,
    },
    /// Remove a session's temporary files, write its summary (its presence
    /// marks a finished wrap-up) and answer with
    /// [`super::Input::SessionEnded`].
    EndSession {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
        /// summary.md.
        path: PathBuf,
        /// Its text.
        text: String,
    },
    /// Write a message from squadd into a session (the normal routing
    /// delivers it); a failure is logged.
    WriteLeadMessage {
        /// The root.
        root: RootId,
        /// The message file.
        path: PathBuf,
        /// Its text.
        text: String,
    },
    // ---- issue 22: the last decisions out of the shell ----
    /// Re-read a session's status file under the lock just taken (an edit
    /// squadctl made while squadd was not answering yet is the text the
    /// render starts from); asked by [`super::Input::StatusLocksTaken`].
    RereadStatus {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
    },
    /// Look at these sessions' status files (vanishing, directory there)
    /// and answer with [`super::Input::StatusesLocked`], the locks still
    /// held; asked by [`super::Input::StatusLocksTaken`].
    LookAtStatuses {
        /// The root.
        root: RootId,
        /// Each session with what taking its lock gave.
        sessions: Vec<(String, super::outputs::StatusLock)>,
    },
    /// Team memory upkeep on the retention schedule: merge the decisions
    /// inbox if `merge`, archive by `archive` if set (each skipped, and
    /// logged, while a `squadctl memory` command holds the memory lock).
    MemoryUpkeep {
        /// The root.
        root: RootId,
        /// What to do (the parts the policy enables).
        memory: squad_policies::memory::MemoryPolicy,
    },
    /// Remove the root's control socket (squadd stops; the socket is this
    /// squadd's own).
    RemoveSocket(RootId),
    // ---- Agent runs, the shell's remaining calls (coreB, issue 22) ----
    /// The look's effects are carried out: dispatch now
    /// ([`super::Input::DispatchDue`] with this `cluster`).
    DispatchRuns {
        /// The root.
        root: RootId,
        /// With `cluster:`: this host's id.
        cluster: Option<String>,
    },
    /// The answer to `squadctl runs` (list): the live runs.
    RunsListed {
        /// The root.
        root: RootId,
        /// The live runs.
        runs: Vec<super::runs::RunView>,
    },
    // ---- Session edits (core/edits.rs) ----
    /// What a session edit does next (its lock, going ahead, or its
    /// answer); carried out by the edit's request itself.
    Edit {
        /// The root.
        root: RootId,
        /// Session directory name.
        session: String,
        /// The next step.
        next: super::edits::EditNext,
    },
    // ---- A root's presence (core/presence.rs) ----
    /// What a control check does next; carried out by the check itself
    /// (`daemon/presence.rs::check_control`).
    Control {
        /// The root.
        root: RootId,
        /// The next step.
        next: super::presence::ControlNext,
    },
}
