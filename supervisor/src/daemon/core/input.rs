// Over 800 lines: every Input variant and the one match that routes it to
// its area; grouping them by area (issue 42 item 3) splits this file.
//! The single entry point of the core: [`Core::step`] takes one [`Input`]
//! (what the world said, as the shell read it) at one [`Now`], changes what
//! the core knows and returns the [`Effect`]s to carry out, in order.
//!
//! The shell turns OS events (a settled path, a fired timer, a write that
//! succeeded or failed, an inbox entry that came or went) into inputs; it
//! never decides what follows from them. Areas move here one at a time:
//! message delivery ([`super::mail`]), escalations, reply deadlines and
//! squadd's notices ([`super::notices`]), session edits ([`super::edits`])
//! and a root's presence ([`super::presence`]) so far.

use super::files::{self, FileRef};
use super::scan::{self, InboxListing, Scanned};
use super::{
    Effect, Now, Root, RootId, deliver, edits, escalations, mail, notices, outputs, paths,
    presence, replies, runs, timer,
};
use crate::daemon::routing::Delivery;
use crate::events::EventKind;
use crate::index::IndexedFile;
use crate::index::SessionIndex;
use chrono::{DateTime, Utc};
use squad_protocol::FileKind;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A fact tapped for notices: (session, the file it is about, the event).
pub(crate) type TappedFact = (String, Option<PathBuf>, EventKind);

/// What the world said: one event the shell read, in the core's terms.
pub(crate) enum Input<'a> {
    // The shell steps `Input::Route`, `InboxWritten` instead; kept for
    // the unit and model tests, which step the decision on its own.
    #[cfg(test)]
    /// A protocol file of a session was applied: what it asks to deliver
    /// is offered, and its reply deadline queued.
    FileApplied {
        /// Session directory name.
        session: String,
        /// The file's name.
        file: String,
        /// The file's bytes as squadd itself wrote them (a notice): its
        /// deliveries carry them, never read back.
        own: Option<Arc<[u8]>>,
    },
    /// A session's recipients may no longer be busy: its waiting
    /// deliveries are offered again.
    WaitingChanged {
        /// Session directory name.
        session: String,
    },
    /// A deferred delivery's timer fired.
    DeliveryDue {
        /// Session directory name.
        session: String,
        /// Recipient.
        to: String,
        /// Inbox file name.
        name: String,
    },
    // The shell steps `Input::Route`, `InboxWritten` instead; kept for
    // the unit and model tests, which step the decision on its own.
    #[cfg(test)]
    /// A delivery was written into its inbox (fresh or not): it is
    /// delivered, and unread until acknowledged.
    Delivered {
        /// The delivery.
        delivery: &'a Delivery,
        /// The moment of the batch that made it (the step's [`Now`] is
        /// the shell's reading after the write: an escalation already due
        /// then is run at once).
        at: DateTime<Utc>,
    },
    // The shell steps `Input::Route`, `InboxWritten` instead; kept for
    // the unit and model tests, which step the decision on its own.
    #[cfg(test)]
    /// A delivery failed for a passing reason (out of descriptors): it
    /// waits and is offered again a moment later, never dropped.
    DeliveryFailed(Box<Delivery>),
    /// A protocol file of a session changed and is to be routed: its
    /// message id is checked first (a reused id refused, or left alone if
    /// delivered before the clash arose; `copy_holds` answers for the
    /// inbox copies), then as [`Input::FileApplied`].
    Route {
        /// Session directory name.
        session: String,
        /// The file's name.
        file: String,
        /// The file's bytes as squadd itself wrote them (a notice).
        own: Option<Arc<[u8]>>,
        /// Whether an inbox copy holds given bytes ([`mail::CopyHolds`]).
        copy_holds: mail::CopyHolds<'a>,
    },
    /// The outbox is flushed: one delivery of it, critical first; `facts`
    /// answers what the decision needs read ([`deliver::DeliveryFacts`]).
    Deliver {
        /// The delivery.
        delivery: Box<Delivery>,
        /// The shell's answers (the recipient's host, the body's bytes).
        facts: &'a dyn deliver::DeliveryFacts,
    },
    /// A delivery was written into its inbox ([`Effect::WriteInbox`]), or
    /// the write failed.
    InboxWritten {
        /// The delivery.
        delivery: Box<Delivery>,
        /// A routed message's source.
        routed_from: Option<String>,
        /// How the write went.
        written: deliver::Written,
        /// The flush's moment (the step's [`Now`] is the shell's reading
        /// after the write).
        at: DateTime<Utc>,
    },
    /// A fresh delivery's inbox was fsynced (with the batch's others).
    DeliverySynced {
        /// The delivery, as [`Effect::Announce`] gave it.
        announce: Box<deliver::Announce>,
        /// The fsync's error, if it failed.
        fsync_error: Option<String>,
    },
    /// An agent's presence record as read (`None`: gone, or its CLI is).
    PresenceRead {
        /// The agent.
        agent: String,
        /// The record.
        record: Option<Box<crate::agent_presence::Record>>,
    },
    /// Every agent's presence record, as listed when squadd starts (after
    /// the sessions are loaded): `None` for one gone, refused, or whose CLI
    /// is gone.
    PresenceListed {
        /// Agent and record.
        records: Vec<(String, Option<crate::agent_presence::Record>)>,
    },
    /// An entry of an unread inbox appeared (`Some(mtime)`) or went (read).
    InboxEntry {
        /// Session directory name.
        session: String,
        /// The inbox's agent.
        agent: String,
        /// The entry's file name.
        file: String,
        /// Its modification time, when it is there.
        present: Option<DateTime<Utc>>,
    },
    /// A session's escalation time came (its timer fired, or a backlog at
    /// start-up). `unread` is the shell's answer for one inbox entry
    /// (`inbox/<agent>/new/<name>`): whether it is still there.
    EscalationsDue {
        /// Session directory name.
        session: String,
        /// Whether an inbox entry is still unread.
        unread: &'a dyn Fn(&Path) -> bool,
    },
    // Decided inside `Input::Leadership` (core/outputs.rs); stepped on its
    // own by the unit tests.
    #[cfg(test)]
    /// A session was loaded at start-up: its standing facts (ready,
    /// overdue, violating tasks) are tapped for notices.
    SessionLoaded {
        /// Session directory name.
        session: String,
    },
    // The shell steps `Input::NoticesTapped`; the model steps this.
    #[cfg(test)]
    /// Facts tapped for notices in this root, in order: (session, the
    /// file the fact is about, the event).
    FactsTapped(Vec<TappedFact>),
    /// A session edit was applied and its status file written
    /// ([`edits::decide`] said what to write).
    SessionEdited {
        /// Session directory name.
        session: String,
    },
    /// The text a session edit decided ([`edits::decide`]) was written to
    /// session-status.md.
    EditWritten {
        /// Session directory name.
        session: String,
        /// The file.
        path: PathBuf,
        /// The text written.
        text: &'a str,
    },
    /// A notice file could not be written.
    NoticeFailed {
        /// The file.
        file: FileRef,
        /// Why.
        error: String,
    },
    /// Directories of the root the kernel had refused to watch are
    /// watched again.
    WatchesRestored {
        /// How many.
        dirs: usize,
    },
    /// A directory of the root could not be watched.
    WatchFailed {
        /// The directory.
        path: PathBuf,
        /// Why.
        error: String,
        /// When the shell keeps it for another try: the back-off.
        rewatch_after: Option<std::time::Duration>,
    },
    /// The pid lock of a recreated `.squad/` was tried.
    PidLockTried(presence::PidLock),
    /// The control socket was bound again.
    SocketBound {
        /// Its path.
        path: PathBuf,
    },
    /// The root's skills and team were read again.
    SkillsRead {
        /// The skills, as `status` reports them.
        skills: Box<crate::skills::SkillsHealth>,
        /// The team directory, as `status` reports it.
        team: Box<crate::team::TeamHealth>,
    },
    /// A path of the root changed (a watcher event, settled): what it is
    /// and what it calls for are decided in [`paths`].
    PathChanged {
        /// The path.
        path: &'a Path,
    },
    /// The watcher failed: every root is told.
    WatcherFailed {
        /// Why.
        error: String,
    },
    /// Events of the root were lost (the kernel's queue overflowed).
    EventsLost,
    /// Another squadd took the root over (it holds the recreated pid
    /// lock); the shell has let go of what it held for the root.
    TakenOver {
        /// That squadd's pid.
        pid: String,
    },
    /// The shell read a protocol file of a known session.
    FileRead {
        /// The file.
        file: FileRef,
        /// Its kind (from its name).
        kind: FileKind,
        /// Its bytes.
        bytes: &'a [u8],
    },
    /// The shell could not read a file for a reason of the file's own
    /// (unreadable, too large, not a regular file): `indexed` is the file
    /// indexed with that reason (or read after all on a second try).
    FileUnreadable {
        /// The file.
        file: FileRef,
        /// The file as indexed.
        indexed: Box<IndexedFile>,
    },
    /// The shell found a file gone.
    FileGone(FileRef),
    /// A file found gone stayed gone past the grace
    /// ([`Effect::ConfirmGone`]'s answer): its removal counts.
    FileRemoved(FileRef),
    /// squadd wrote a notice file: indexed and routed from these bytes.
    NoticeWritten {
        /// The file.
        file: FileRef,
        /// The bytes written.
        bytes: Arc<[u8]>,
    },
    /// A session directory was scanned.
    SessionScanned {
        /// Its index.
        index: Box<SessionIndex>,
        /// Why.
        why: Scanned,
    },
    /// The start-up scan could not read the root.
    StartScanFailed,
    /// Every session of the start-up scan was handed over.
    StartScanned {
        /// How many files the scan indexed.
        files: usize,
        /// Whether the scan read the root (else nothing is pruned).
        complete: bool,
    },
    /// A rescan of the root is due.
    RescanDue {
        /// Whether `.squad/sessions` is there.
        present: bool,
    },
    /// The root is missing and its `.squad/` was found moved, under this
    /// name in the root (the pid lock squadd holds is in its `run/`).
    RootMoved {
        /// The directory, relative to the root.
        to: String,
    },
    /// A rescan listed the root's session directories.
    SessionListed {
        /// Their names (only those named like sessions).
        names: BTreeSet<String>,
    },
    /// The sessions of a rescan were read.
    Rescanned,
    /// A known session's files were listed (a rescan).
    SessionFilesListed {
        /// Session directory name.
        session: String,
        /// Each protocol file on disk with its kind.
        on_disk: Vec<(PathBuf, FileKind)>,
    },
    /// A session directory changed: whether it is there now.
    SessionDir {
        /// Session directory name.
        session: String,
        /// Whether it is a directory now.
        present: bool,
    },
    /// A session's inboxes were listed.
    InboxesListed {
        /// Session directory name.
        session: String,
        /// Each entry.
        entries: Vec<InboxListing>,
    },
    /// Deliveries of a session that were made and never audited (a squadd
    /// killed between a delivery and its line): (recipient, inbox name,
    /// the copy's path), none of them said by the audit log.
    DeliveriesUnaudited {
        /// Session directory name.
        session: String,
        /// Each delivery.
        found: Vec<(String, String, PathBuf)>,
    },
    /// Task deadline timers of a session fired (those due in one batch).
    TasksDue {
        /// Session directory name.
        session: String,
        /// The tasks whose deadline passed.
        tasks: Vec<String>,
    },
    /// A timer of this root fell due ([`timer::fire`]). `changed`: the
    /// sessions the same batch changed (a held-back status write of one
    /// is done already).
    TimerFired {
        /// The timer.
        timer: timer::Timer,
        /// The sessions of the batch that saw more than a removal.
        changed: &'a BTreeSet<(RootId, String)>,
    },
    /// The shell looked for the root's `.squad/sessions`
    /// ([`Effect::CheckRoot`]): whether it is there ([`timer::root_check`]).
    RootLookedAt {
        /// Whether `.squad/sessions` is a directory.
        present: bool,
    },
    /// `.squad/policies.yaml` was read again ([`Effect::ReloadPolicy`]):
    /// the same policy changes nothing; another one replaces it (said,
    /// retention rescheduled, escalation times and delivery waits follow
    /// it); one refused is said and the previous one stays in force.
    PolicyRead(Result<Box<squad_policies::Policy>, crate::locks::PolicyLoadError>),
    // ---- Agent runs (core/runs.rs) ----
    /// config.json was read again (`config`: `None` when invalid, the
    /// previous one stays; `error`: the first error).
    ConfigRead {
        /// The new config, when valid.
        config: Option<Box<squad_protocol::config::RuntimeConfig>>,
        /// Its first error.
        error: Option<String>,
    },
    // The shell steps `Input::RunRecordsRead`; kept for the unit tests,
    // which step what was seen of each process directly.
    #[cfg(test)]
    /// After the start-up scan: the root's run records, with what the
    /// shell saw of each one's process.
    RunsFound {
        /// The records.
        records: Vec<runs::FoundRun>,
        /// The shell's answers about session files.
        facts: &'a dyn runs::RunFacts,
    },
    // Stepped by the tests; the shell steps `Input::SuperviseRuns` or
    // `Input::RunsAsked`, which decide what follows.
    #[cfg(test)]
    /// A live run's leader ended.
    RunExited {
        /// (session, task).
        run: runs::RunKey,
        /// How.
        ended: crate::runners::Ended,
    },
    // Stepped by the tests; the shell steps `Input::SuperviseRuns` or
    // `Input::RunsAsked`, which decide what follows.
    #[cfg(test)]
    /// The runs timer fired (or a batch ended): every live run looked at.
    RunsDue {
        /// The shell's answers about session files.
        facts: &'a dyn runs::RunFacts,
    },
    /// What a live run's output said that is new: usage, the CLI's model
    /// warning (priced, recorded and held to its budget: `runs/output.rs`).
    RunOutput {
        /// (session, task).
        run: runs::RunKey,
        /// What it said.
        seen: Box<crate::runners::OutputSeen>,
    },
    /// What a live worktree run's branch changes ([`Effect::LookAtTree`];
    /// `None`: no active worktree, or git failed).
    TreeLooked {
        /// The run.
        run: runs::RunKey,
        /// What its branch and worktree change.
        found: Option<crate::worktree::TreeChanges>,
    },
    /// What became of a run's branch ([`Effect::FinishWorktree`],
    /// [`Effect::DropWorktree`]): merged, held, dropped, or no worktree.
    WorktreeFinished {
        /// The run.
        run: runs::RunKey,
        /// What became of its branch.
        outcome: crate::worktree::Finished,
        /// `squadctl merge` asked (its answer is due).
        by_hand: bool,
    },
    /// What was left of an ended run after [`Effect::ContainRun`].
    RunLeft {
        /// (session, task).
        run: runs::RunKey,
        /// How many of its processes were still alive.
        left: usize,
        /// Whether its output is drained into run.log.
        drained: bool,
        /// The shell's answers about session files.
        facts: &'a dyn runs::RunFacts,
    },
    /// After the look at live runs: ready tasks dispatched.
    DispatchDue {
        /// With `cluster:` (docs/cluster.md): this host's id; only the
        /// agent's host (its runner's `host:`, else the leader's, see
        /// [`Root::leads`]) starts its runs. `None`: no cluster.
        cluster: Option<String>,
    },
    /// The look's spawns are carried out ([`Effect::RunsLooked`]).
    RunsLooked {
        /// The next retry due, if any.
        retry_at: Option<DateTime<Utc>>,
    },
    /// A run's process started.
    RunSpawned {
        /// What was started.
        spec: Box<runs::RunSpec>,
        /// Its record (pid, command).
        rec: Box<crate::runners::RunRecord>,
        /// Its folder.
        dir: PathBuf,
    },
    /// A run could not start.
    SpawnFailed {
        /// What was to start.
        spec: Box<runs::RunSpec>,
        /// The run's folder and the record written before the spawn, if
        /// it got that far.
        written: Option<Box<(PathBuf, crate::runners::RunRecord)>>,
        /// Why.
        error: String,
    },
    // Stepped by the tests; the shell steps `Input::SuperviseRuns` or
    // `Input::RunsAsked`, which decide what follows.
    #[cfg(test)]
    /// `squadctl stop TASK`.
    RunStop {
        /// The session named, if any.
        session: Option<String>,
        /// The task.
        task: String,
    },
    /// SIGTERM reached a run stopped by hand.
    RunStopped {
        /// (session, task).
        run: runs::RunKey,
    },
    // ---- squadd's own outputs (core/outputs.rs) ----
    /// Status files of these sessions are due ([`Effect::WriteStatuses`]):
    /// which are written is decided here, the locks taken next.
    StatusesDue {
        /// Session directory names.
        sessions: Vec<String>,
    },
    /// The sessions' locks were taken ([`Effect::LockStatuses`], or a
    /// session edit holding its lock): what the shell saw of each.
    StatusesLocked {
        /// Each session's facts.
        sessions: Vec<outputs::StatusFacts>,
    },
    /// A status file was written ([`Effect::WriteStatusTexts`]), or not.
    StatusWritten {
        /// Session directory name.
        session: String,
        /// The file.
        path: PathBuf,
        /// The bytes written.
        bytes: &'a [u8],
        /// Why it was not written.
        error: Option<String>,
    },
    /// The shared context is due ([`Effect::WriteSharedContext`], or
    /// start-up and shutdown with `now`).
    ContextDue {
        /// Whether `.squad/sessions` is there.
        present: bool,
        /// Written before going on rather than behind.
        now: bool,
    },
    /// A write of squadd's outputs made behind finished (the shared
    /// context), or not.
    OutputDone {
        /// The session, if the output is one's.
        session: Option<String>,
        /// The file.
        path: PathBuf,
        /// The output's name in events.
        output: &'static str,
        /// Why it was not written.
        error: Option<String>,
    },
    /// The persisted state is due ([`Effect::SaveState`], shutdown).
    SaveStateDue {
        /// Whether `.squad/sessions` is there.
        present: bool,
    },
    /// A retention run finished ([`Effect::RunRetention`]).
    RetentionRan(outputs::RetentionRun),
    /// The lock table is due ([`Effect::RefreshLocks`]).
    LocksDue {
        /// Whether `.squad/sessions` is there.
        present: bool,
    },
    /// The lock table was read ([`Effect::ReadLocks`]).
    LocksRead(outputs::LockTable),
    /// Expired locks were reclaimed ([`Effect::ReclaimLocks`]): (session,
    /// path, kind) of each.
    LocksReclaimed(Vec<(String, PathBuf, EventKind)>),
    /// With `cluster:`: this host's lease as the shell read it before a
    /// batch (`epoch`: valid now), or the cluster task's news.
    Leadership {
        /// The lease's epoch while it is valid.
        epoch: Option<u64>,
        /// What the cluster task said, if this is its news.
        news: Option<crate::cluster::leader::News>,
    },
    /// A session's wrap-up is due ([`Effect::WrapUp`],
    /// [`Effect::WrapUpIfPresent`], [`Effect::FinishEnded`]), with what the
    /// shell saw of it.
    WrapUpDue {
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
        /// Why, and what the shell saw.
        why: super::wrapup::WrapUpWhy,
    },
    /// A session's locks were released ([`Effect::ReleaseSessionLocks`]):
    /// (session, path, kind) of each.
    SessionLocksReleased(Vec<(String, PathBuf, EventKind)>),
    /// A session's temporaries were removed and its summary written, or
    /// not ([`Effect::EndSession`]).
    SessionEnded {
        /// Session directory name.
        session: String,
        /// Its final status.
        status: String,
        /// summary.md.
        path: PathBuf,
        /// How many temporary files were removed.
        removed: usize,
        /// Why the summary was not written.
        error: Option<String>,
    },
    /// Word to the lead about a run is due ([`Effect::TellLead`], a
    /// worktree held): the text with the run.log tail the shell read.
    LeadMessageDue {
        /// Session directory name.
        session: String,
        /// The task it is about, if any.
        task: Option<String>,
        /// The message's subject.
        subject: String,
        /// The text.
        text: String,
        /// Distinct for each message of this squadd (with its process).
        salt: u32,
    },
    // ---- issue 22: the last decisions out of the shell ----
    /// The sessions' locks for a status write were taken
    /// ([`Effect::LockStatuses`], or a session edit holding its own):
    /// which status files are re-read under them is decided here.
    StatusLocksTaken {
        /// Each session's lock.
        sessions: Vec<super::upkeep::LockTaken>,
    },
    /// The decisions inbox was merged, or not ([`Effect::MergeMemoryInbox`]).
    MemoryInboxMerged(super::upkeep::MemoryMerge),
    /// squadd stops (SIGTERM, SIGINT): what is owed is written now.
    Shutdown {
        /// Why, in the `stopping` event.
        reason: String,
        /// The root's timers armed at that moment (the writes they
        /// coalesce are owed).
        armed: Vec<super::timer::Timer>,
        /// Whether the control socket at the root's path is this squadd's
        /// (one that took the root over keeps its own).
        socket_ours: bool,
    },
    /// A root was opened at start-up (its pid lock held, its state read):
    /// the project policy as read, or why it is refused.
    RootOpened(Result<Box<squad_policies::Policy>, crate::locks::PolicyLoadError>),
    /// A notify command finished (after its retries), or failed.
    HookDone {
        /// Session directory name.
        session: String,
        /// Recipient.
        to: String,
        /// Message id.
        message_id: String,
        /// Why it failed, if it did.
        error: Option<String>,
    },
    // ---- Agent runs, the shell's remaining calls (coreB, issue 22) ----
    /// The loop's one call at a batch's end (`supervise_runs`): the runs
    /// whose leader the shell saw end, then the look at every live run,
    /// then (an [`Effect::DispatchRuns`] after the look's effects) the
    /// dispatch: that order is the core's ([`runs::supervise`]).
    SuperviseRuns(runs::Supervise<'a>),
    /// The `runs` method of the control socket as asked: which action it
    /// is (list, run, stop) and whether it is complete is the core's
    /// ([`runs::by_hand::asked`]).
    RunsAsked(runs::Asked),
    /// After the start-up scan: every run record of the root as read,
    /// with the root's processes to ask about each (which records are
    /// looked for by environment, which are checked alive, is the core's;
    /// then as [`Input::RunsFound`]: [`runs::records_read`]).
    RunRecordsRead(runs::RecordsRead<'a>),
    /// A session edit's request or its lock as tried ([`edits::step`]).
    Edit(edits::EditInput),
    /// One batch of events tapped for notices in this root, in tapped
    /// order ([`notices::batch_tapped`]); the shell hands each root its
    /// own, once per batch.
    NoticesTapped(Vec<notices::TappedEvent>),
    /// A control check's step: due, or what is seen of the root's pid
    /// lock and socket ([`presence::control`]).
    Control(presence::ControlInput),
}

/// The core of one root, for one step: its id (named in the effects) and
/// what it knows.
pub(crate) struct Core<'a> {
    id: RootId,
    root: &'a mut Root,
}

impl<'a> Core<'a> {
    /// The core of root `id`.
    pub(crate) fn new(id: RootId, root: &'a mut Root) -> Core<'a> {
        Core { id, root }
    }

    /// Takes in one input at `now`; returns what to do, in order.
    pub(crate) fn step(&mut self, input: Input<'_>, now: Now) -> Vec<Effect> {
        let (id, root) = (self.id, &mut *self.root);
        match input {
            #[cfg(test)]
            Input::FileApplied { session, file, own } => {
                let mut effects = mail::route(root, id, &session, &file, own, now);
                effects.extend(replies::asked(root, id, &session, &file, now));
                effects
            }
            Input::WaitingChanged { session } => mail::recheck_waiting(root, id, &session, now),
            Input::DeliveryDue { session, to, name } => {
                mail::delivery_due(root, id, &session, to, name, now)
            }
            #[cfg(test)]
            Input::Delivered { delivery, at } => mail::delivered(root, id, delivery, at, now),
            #[cfg(test)]
            Input::DeliveryFailed(d) => mail::failed(root, id, *d),
            Input::Route {
                session,
                file,
                own,
                copy_holds,
            } => match mail::route_checked(root, id, &session, &file, copy_holds) {
                Ok(()) => {
                    let mut effects = mail::route(root, id, &session, &file, own, now);
                    effects.extend(replies::asked(root, id, &session, &file, now));
                    effects
                }
                Err(refused) => refused,
            },
            Input::Deliver { delivery, facts } => deliver::deliver(root, id, *delivery, facts),
            Input::InboxWritten {
                delivery,
                routed_from,
                written,
                at,
            } => deliver::written(root, id, *delivery, routed_from, written, at, now),
            Input::DeliverySynced {
                announce,
                fsync_error,
            } => deliver::synced(*announce, fsync_error),
            Input::InboxEntry {
                session,
                agent,
                file,
                present,
            } => mail::inbox_entry(root, id, &session, &agent, &file, present, now),
            Input::PresenceRead { agent, record } => {
                super::waiting::presence_read(root, id, &agent, record.map(|r| *r), now.wall)
            }
            Input::PresenceListed { records } => {
                super::waiting::presence_listed(root, id, records, now.wall)
            }
            Input::EscalationsDue { session, unread } => {
                escalations::run(root, id, &session, now, unread)
            }
            #[cfg(test)]
            Input::SessionLoaded { session } => notices::standing_facts(root, id, &session),
            // With `cluster:`, only the leader tells (a new leader looks
            // at every standing fact when elected: core/outputs.rs).
            #[cfg(test)]
            Input::FactsTapped(facts) => notices::batch_tapped(root, id, notices::some(facts), now),
            Input::SessionEdited { session } => edits::applied(id, &session),
            Input::EditWritten {
                session,
                path,
                text,
            } => edits::written(root, id, &session, path, text, now),
            Input::NoticeFailed { file, error } => notices::write_failed(id, file, error),
            Input::WatchesRestored { dirs } => presence::rewatched(id, dirs),
            Input::WatchFailed {
                path,
                error,
                rewatch_after,
            } => presence::watch_failed(id, path, error, rewatch_after),
            Input::PidLockTried(outcome) => presence::pid_lock(id, outcome),
            Input::SocketBound { path } => presence::socket_bound(root, id, path),
            Input::SkillsRead { skills, team } => presence::skills_read(root, *skills, *team),
            Input::PathChanged { path } => paths::changed(root, id, path),
            Input::WatcherFailed { error } => paths::watcher_failed(id, error),
            Input::EventsLost => paths::events_lost(id),
            Input::TakenOver { pid } => presence::taken_over(root, id, pid),
            Input::FileRead { file, kind, bytes } => files::read(root, id, file, kind, bytes, now),
            Input::FileUnreadable { file, indexed } => {
                files::unreadable(root, id, file, *indexed, now)
            }
            Input::FileGone(file) => files::gone(root, id, file, now),
            Input::FileRemoved(file) => files::removed(root, id, file, now),
            Input::NoticeWritten { file, bytes } => {
                files::notice_written(root, id, file, bytes, now)
            }
            Input::SessionScanned { index, why } => scan::scanned(root, id, *index, why, now),
            Input::StartScanFailed => scan::start_failed(root, id),
            Input::StartScanned { files, complete } => scan::start_done(root, id, files, complete),
            Input::RescanDue { present } => scan::rescan_due(root, id, present),
            Input::RootMoved { to } => scan::root_moved(root, id, to),
            Input::SessionListed { names } => scan::listed(root, id, names),
            Input::Rescanned => scan::rescanned(root, id),
            Input::SessionFilesListed { session, on_disk } => {
                scan::files_listed(root, id, &session, on_disk)
            }
            Input::SessionDir { session, present } => {
                scan::session_dir(root, id, &session, present)
            }
            Input::InboxesListed { session, entries } => {
                scan::inboxes_listed(root, id, &session, entries)
            }
            Input::DeliveriesUnaudited { session, found } => {
                deliver::unaudited(root, id, &session, found)
            }
            Input::TasksDue { session, tasks } => files::tasks_due(root, id, &session, &tasks, now),
            Input::TimerFired { timer, changed } => timer::fire(timer, Some(root), changed, now),
            Input::RootLookedAt { present } => timer::root_check(root, id, present),
            Input::PolicyRead(read) => outputs::policy_read(root, id, read, now),
            #[cfg(test)]
            Input::RunsFound { records, facts } => runs::found(root, id, records, facts, now),
            #[cfg(test)]
            Input::RunExited { run, ended } => runs::exited(root, &run, ended),
            #[cfg(test)]
            Input::RunsDue { facts } => runs::due(root, id, facts, now),
            #[cfg(test)]
            Input::RunStop { session, task } => {
                runs::by_hand::stop(root, id, session.as_deref(), &task)
            }
            Input::StatusesDue { sessions } => outputs::statuses_due(root, id, sessions),
            Input::StatusesLocked { sessions } => outputs::statuses_locked(root, id, sessions, now),
            Input::StatusWritten {
                session,
                path,
                bytes,
                error,
            } => outputs::status_written(root, id, session, path, bytes, error, now),
            Input::ContextDue { present, now } => outputs::context_due(root, id, present, now),
            Input::OutputDone {
                session,
                path,
                output,
                error,
            } => outputs::output_done(id, session, path, output, error),
            Input::SaveStateDue { present } => outputs::save_state_due(root, id, present),
            Input::RetentionRan(run) => outputs::retention_ran(root, id, run, now),
            Input::LocksDue { present } => outputs::locks_due(root, id, present),
            Input::LocksRead(table) => outputs::locks_read(root, id, table, now),
            Input::LocksReclaimed(events) => outputs::locks_reclaimed(root, id, events),
            Input::Leadership { epoch, news } => outputs::leadership(root, id, epoch, news),
            Input::WrapUpDue {
                session,
                status,
                why,
            } => super::wrapup::due(root, id, &session, &status, why, now),
            Input::SessionLocksReleased(events) => super::wrapup::locks_released(id, events),
            Input::SessionEnded {
                session,
                status,
                path,
                removed,
                error,
            } => super::wrapup::ended(id, session, status, path, removed, error),
            // The last decisions out of the shell (issue 22).
            input @ (Input::StatusLocksTaken { .. }
            | Input::MemoryInboxMerged(_)
            | Input::Shutdown { .. }
            | Input::RootOpened(_)
            | Input::HookDone { .. }) => super::upkeep::step(root, id, input, now),
            input @ (Input::ConfigRead { .. }
            | Input::RunLeft { .. }
            | Input::WorktreeFinished { .. }
            | Input::TreeLooked { .. }
            | Input::DispatchDue { .. }
            | Input::RunsLooked { .. }
            | Input::RunSpawned { .. }
            | Input::SpawnFailed { .. }
            | Input::RunStopped { .. }
            | Input::RunOutput { .. }
            | Input::LeadMessageDue { .. }
            | Input::SuperviseRuns(_)
            | Input::RunsAsked(_)
            | Input::RunRecordsRead(_)) => runs::step(root, id, input, now),
            Input::Edit(input) => edits::step(root, id, input, now),
            Input::NoticesTapped(events) => notices::batch_tapped(root, id, events, now),
            Input::Control(input) => presence::control(root, id, input),
        }
    }
}
