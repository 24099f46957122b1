//! The world the core lives in, played in memory: the files and inboxes
//! of two roots, the shell's timer queue and outbox, the runs' processes,
//! and [`World::effect`], the one place where every [`Effect`] the core
//! returns is carried out, answering with the inputs the shell steps
//! (`shell.rs`, `apply.rs`, `scan.rs`, `processes.rs`, `mail.rs`,
//! `notices.rs`, `edits.rs`).

use super::oracle::*;
use super::*;
use crate::daemon::core::files::FileRef;
use crate::daemon::core::runs::{RunFacts, RunKey};
use crate::daemon::core::scan::Scanned;
use crate::runners::{Ended, RunRecord};

/// One process of a run, as the world runs it.
#[derive(Debug, Clone)]
pub(super) struct Proc {
    pub(super) root: RootId,
    pub(super) run: RunKey,
    /// It ignores SIGTERM (only SIGKILL ends it).
    pub(super) stubborn: bool,
    /// How it ended, once it did.
    pub(super) ended: Option<Ended>,
    /// When squadd sent it SIGTERM ([`Effect::SignalRun`]: its limit).
    pub(super) termed_at: Option<DateTime<Utc>>,
    /// It had ended when the last look began.
    pub(super) looked: bool,
    /// It ended unseen: squadd restarted before a look saw it end.
    pub(super) gone_unseen: bool,
}

/// The world the core lives in: two roots' files and inboxes (the
/// snapshots), the shell's timer queue and outbox, processes, the cores.
pub(super) struct World {
    pub(super) now: DateTime<Utc>,
    /// Each root's core, by [`RootId`] (`id(r)` is `cores[r]`'s).
    pub(super) cores: Vec<Root>,
    pub(super) snaps: Vec<Snapshot>,
    /// The shell's timer queue: when each armed timer fires.
    pub(super) timers: BTreeMap<Timer, DateTime<Utc>>,
    /// Deliveries due now, made at the next flush.
    pub(super) outbox: Vec<(RootId, Delivery)>,
    /// Facts tapped for the next notice step.
    pub(super) tapped: Vec<(RootId, String, Option<PathBuf>, EventKind)>,
    /// Sessions touched and changed by the batch under way.
    pub(super) touched: BTreeMap<RootId, BTreeSet<String>>,
    pub(super) changed: BTreeSet<(RootId, String)>,
    /// Run processes by pid.
    pub(super) procs: BTreeMap<u32, Proc>,
    /// Roots whose runner cannot start (its command is missing).
    pub(super) broken: BTreeSet<RootId>,
    /// Files squadd wrote outside a step's own inputs (word to the lead):
    /// their watch events come in the next batch.
    pub(super) written: Vec<(usize, String, String, Vec<u8>)>,
    /// Messages to the lead written so far (their ids).
    pub(super) told: u32,
    /// Fresh deliveries of the flush under way, announced once their
    /// inboxes are durable (at its end, as the shell's group commit).
    pub(super) announced: Vec<crate::daemon::core::deliver::Announce>,
    /// Facts reported once ever, as reported so far (`restart.rs`).
    pub(super) reported: BTreeSet<(RootId, String, super::restart::Reported)>,
    /// The answer to the last `squadctl run|stop` (`by_hand.rs`).
    pub(super) reply: Option<Result<(String, u32), crate::daemon::core::runs::by_hand::RunError>>,
    /// Comparisons made so far (the shared context's parts are compared
    /// every other one, so that changes also pile up between two writes).
    pub(super) checks: u64,
    /// Every fresh inbox entry the world wrote, in order (root, session,
    /// recipient, message id), and every `message-delivered` event the
    /// core emitted, in order: the two sequences are equal.
    pub(super) written_entries: Vec<(RootId, String, String, String)>,
    pub(super) delivered_events: Vec<(RootId, String, String, String)>,
}

/// The shell's answers about session files while runs are decided: the
/// snapshot's progress file, read (no write times are modelled: the
/// policy has no idle limit).
pub(super) struct Facts<'a>(pub(super) &'a Snapshot);

impl RunFacts for Facts<'_> {
    fn completed_in_file(&self, session_dir: &Path, rec: &RunRecord) -> bool {
        let Some(session) = session_dir.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        let name = format!("role-comm-{}-{}.md", rec.agent, rec.task);
        let Some(bytes) = self.0.files.get(session).and_then(|f| f.get(&name)) else {
            return false;
        };
        let f = index_bytes(&session_dir.join(&name), FileKind::ProgressUpdate, bytes);
        matches!(&f.entry, Entry::Progress(p) if p.status == TaskStatus::Completed)
    }

    fn last_write(&self, _: &Path, _: &str) -> Option<DateTime<Utc>> {
        None
    }
}

impl World {
    /// Two roots started on empty sessions, as `initial_scan` starts them.
    pub(super) fn new() -> World {
        let now = base();
        let mut w = World {
            now,
            cores: Vec::new(),
            snaps: Vec::new(),
            timers: BTreeMap::new(),
            outbox: Vec::new(),
            tapped: Vec::new(),
            touched: BTreeMap::new(),
            changed: BTreeSet::new(),
            procs: BTreeMap::new(),
            broken: BTreeSet::new(),
            written: Vec::new(),
            told: 0,
            announced: Vec::new(),
            reported: BTreeSet::new(),
            written_entries: Vec::new(),
            delivered_events: Vec::new(),
            reply: None,
            checks: 0,
        };
        for r in 0..ROOTS {
            let files = SESSIONS
                .iter()
                .map(|s| (s.to_string(), BTreeMap::new()))
                .collect();
            w.cores
                .push(Root::new(root_dir(r), State::default(), policy(0), now));
            w.snaps.push(Snapshot {
                root: root_dir(r),
                files,
                inbox: BTreeMap::new(),
                state: State::default(),
                policy: policy(0),
                config: config(0),
                records: BTreeMap::new(),
                state_file: None,
                copies: BTreeMap::new(),
                expected: BTreeMap::new(),
            });
            let config = Some(Box::new(config(0)));
            w.step(
                id(r),
                Input::ConfigRead {
                    config,
                    error: None,
                },
            );
            for s in SESSIONS {
                let index = Box::new(w.scan(r, s));
                let why = Scanned::StartUp;
                w.step(id(r), Input::SessionScanned { index, why });
            }
            let input = Input::StartScanned {
                files: 0,
                complete: true,
            };
            w.step(id(r), input);
        }
        w.end_batch();
        w
    }

    pub(super) fn wall(&self) -> Now {
        Now { wall: self.now }
    }

    /// A session's index as a scan of the snapshot reads it.
    pub(super) fn scan(&self, r: usize, session: &str) -> SessionIndex {
        let dir = self.cores[r].session_dir(session);
        let files = self.snaps[r]
            .files
            .get(session)
            .cloned()
            .unwrap_or_default();
        let mut index = SessionIndex::new(dir.clone());
        for (name, bytes) in &files {
            if let Some(f) = index_file(&dir, name, bytes) {
                index.insert(name.clone(), f);
            }
        }
        index.recheck();
        index
    }

    // ------------------------------------------------ the shell's part

    /// One core step, its effects carried out.
    pub(super) fn step(&mut self, r: RootId, input: Input<'_>) {
        let now = self.wall();
        let effects = Core::new(r, &mut self.cores[r.0 as usize]).step(input, now);
        self.perform(effects);
    }

    /// Carries out effects in order, as the shell does.
    pub(super) fn perform(&mut self, effects: Vec<Effect>) {
        for e in effects {
            self.effect(e);
        }
    }

    /// [`Self::effect`] for an agent run's effects, answered as the
    /// shell's `processes.rs` would.
    fn run_effect(&mut self, e: Effect) {
        let now = self.now;
        match e {
            Effect::SpawnRun { root, spec } => self.spawn(root, *spec),
            Effect::SignalRun { pid, signal, .. } => self.signal(pid, signal),
            Effect::ContainRun {
                root,
                run,
                rec,
                signal,
                report,
            } => {
                // The leader is gone and the model's runs have no other
                // processes: nothing is left, the output is drained.
                let _ = (rec, signal);
                if report {
                    let snap = &self.snaps[root.0 as usize];
                    let now = Now { wall: now };
                    let effects = Core::new(root, &mut self.cores[root.0 as usize]).step(
                        Input::RunLeft {
                            run,
                            left: 0,
                            drained: true,
                            facts: &Facts(snap),
                        },
                        now,
                    );
                    self.perform(effects);
                }
            }
            Effect::WriteRunRecord { dir, rec } => {
                let r = self
                    .cores
                    .iter()
                    .position(|r| dir.starts_with(&r.root))
                    .unwrap_or(0);
                let key = (rec.session.clone(), rec.task.clone());
                self.snaps[r].records.insert(key, *rec);
            }
            Effect::TellLead {
                root,
                session,
                task,
                subject,
                ..
            } => self.tell_lead(root, session, task.unwrap_or_default(), subject),
            Effect::RunsLooked { root, retry_at } => {
                self.step(root, Input::RunsLooked { retry_at })
            }
            // A run re-adopted after a restart: its process is the world's
            // already.
            Effect::AdoptRun { .. } => {}
            // `squadctl stop`: SIGTERM sent, then told (`processes.rs`).
            Effect::StopRun { root, run, pid } => {
                self.signal(pid, crate::runners::Signal::Term);
                self.step(root, Input::RunStopped { run });
            }
            Effect::RunReply { reply, .. } => self.reply = Some(reply),
            // After the look's effects, as `processes.rs` does.
            Effect::DispatchRuns { root, cluster } => {
                self.step(root, Input::DispatchDue { cluster })
            }
            _ => unreachable!("not a run effect: {e:?}"),
        }
    }

    /// THE effect match: every effect the core returns, carried out as
    /// the shell carries it out (`shell.rs`, `processes.rs`), answered
    /// with the inputs the shell steps. An effect out of the model's scope
    /// is skipped in an arm of its own that says why and where it is
    /// tested instead; one the model never asks for panics.
    pub(super) fn effect(&mut self, e: Effect) {
        let now = self.now;
        self.note_event(&e);
        match e {
            Effect::SendNotices | Effect::SendFirstNotices => self.send_notices(),
            Effect::Tap {
                root,
                session,
                kind,
            } => self.tapped.push((root, session, None, kind)),
            Effect::WriteNotice(n) => self.write_notices(vec![n]),
            Effect::RecheckWaiting { root, session } => {
                self.step(root, Input::WaitingChanged { session })
            }
            Effect::RecheckWaitingIfPresent { root, session } => {
                if self.snaps[root.0 as usize].files.contains_key(&session) {
                    self.step(root, Input::WaitingChanged { session });
                    self.flush_outbox();
                }
            }
            Effect::FlushOutbox => self.flush_outbox(),
            Effect::SuperviseRuns => self.supervise(),
            // Status writes (`writes.rs`, `status.rs`).
            Effect::WriteStatuses { root, sessions } => {
                self.step(root, Input::StatusesDue { sessions })
            }
            Effect::LockStatuses { root, sessions } => self.lock_statuses(root, sessions),
            Effect::WriteStatusTexts { root, texts } => self.write_status_texts(root, texts),
            Effect::Outbox { root, delivery } => self.outbox.push((root, *delivery)),
            Effect::OfferWaiting {
                root,
                session,
                to,
                name,
            } => self.step(root, Input::DeliveryDue { session, to, name }),
            Effect::RunEscalations { root, session } => self.run_escalations(root, session),
            Effect::SetTimer { timer, after } => {
                self.timers.insert(timer, now + after_of(after));
            }
            Effect::SetTimerAt { timer, at } => {
                self.timers.insert(timer, at);
            }
            Effect::SetTimerEarlier { timer, after } => {
                self.set_earlier(timer, now + after_of(after))
            }
            Effect::SetTimerEarlierAt { timer, at } => self.set_earlier(timer, at),
            Effect::CancelTimer(timer) => {
                self.timers.remove(&timer);
            }
            // Every event of a session tapped (the event log taps those that
            // may call for a notice; the core tells only those).
            Effect::Emit {
                root,
                session: Some(session),
                path,
                kind,
            } if crate::daemon::core::notices::wanted(&kind) => {
                self.tapped.push((root, session, path, kind))
            }
            // Saved as `writes.rs` saves it: state.json as the core says.
            Effect::SaveState(r) => self.step(r, Input::SaveStateDue { present: true }),
            Effect::WriteState { root, bytes, .. } => {
                if let Ok(bytes) = bytes {
                    self.snaps[root.0 as usize].state_file = Some(bytes);
                }
            }
            // Handed over as the shell does (`mail.rs`), the inbox copies
            // answered from what the world delivered into them.
            Effect::Route {
                root,
                session,
                file,
                own,
            } => self.route(root, session, file, own),
            // A delivery written into its inbox's `new/` (its mtime: now),
            // unless it is there already.
            Effect::WriteInbox {
                root,
                delivery,
                routed_from,
                bytes,
            } => self.write_inbox(root, delivery, routed_from, &bytes),
            // An inbox's `new/` or `.squad/run` watched: the model tells
            // the core of an acknowledgement itself (`Op::Ack`).
            Effect::Watch { .. } => {}
            Effect::Announce(a) => self.announced.push(*a),
            Effect::Touched {
                root,
                session,
                removal,
            } => {
                if !removal {
                    self.changed.insert((root, session.clone()));
                }
                self.touched.entry(root).or_default().insert(session);
            }
            // Still gone after the grace (nothing recreates it meanwhile).
            Effect::ConfirmGone { root, file } => self.step(root, Input::FileRemoved(file)),
            // Scans and rescans, read from the snapshot.
            Effect::ListSessions(root) => {
                let names = self.snaps[root.0 as usize].files.keys().cloned().collect();
                self.step(root, Input::SessionListed { names });
            }
            Effect::ScanSession { root, session, why } => {
                let index = Box::new(self.scan(root.0 as usize, &session));
                self.step(root, Input::SessionScanned { index, why });
            }
            Effect::RescanSession { root, session } => {
                let dir = self.cores[root.0 as usize].session_dir(&session);
                let on_disk = self.snaps[root.0 as usize].files[&session]
                    .keys()
                    .filter_map(|n| Some((dir.join(n), FileKind::from_file_name(n)?)))
                    .collect();
                self.step(root, Input::SessionFilesListed { session, on_disk });
            }
            Effect::ReadFile { root, file, kind } => self.read(root, file, kind),
            Effect::FinishRescan(root) => self.step(root, Input::Rescanned),
            Effect::SeedMail { root, session } => {
                let entries = self.snaps[root.0 as usize]
                    .inbox
                    .get(&session)
                    .into_iter()
                    .flatten()
                    .map(|((to, n), at)| (to.clone(), n.clone(), at.is_some(), *at))
                    .collect();
                self.step(root, Input::InboxesListed { session, entries });
            }
            // Agent runs (`processes.rs`).
            e @ (Effect::SpawnRun { .. }
            | Effect::SignalRun { .. }
            | Effect::ContainRun { .. }
            | Effect::WriteRunRecord { .. }
            | Effect::TellLead { .. }
            | Effect::RunsLooked { .. }
            | Effect::AdoptRun { .. }
            | Effect::StopRun { .. }
            | Effect::RunReply { .. }
            | Effect::DispatchRuns { .. }) => self.run_effect(e),
            // Every other event: once-ever facts are counted above
            // (`note_report`); the event log's numbering and audit file are
            // `daemon::eventlog`'s (the sequence is not compared: issue 42
            // item 4, left).
            Effect::Emit { .. } => {}
            // Answers to inputs the model does not step (a path handed over
            // unclassified, the shell's own outbox, the control check): the
            // model reads and delivers through its snapshot instead.
            e @ (Effect::GiveUpRoot { .. }
            | Effect::ReloadConfig(_)
            | Effect::ReloadPolicy(_)
            | Effect::LookAtSessionDir { .. }
            | Effect::WatchLocks { .. }
            | Effect::LookAtInboxEntry { .. }
            | Effect::LookAtPresence { .. }
            | Effect::ApplyFile { .. }
            | Effect::RereadStatus { .. }
            | Effect::LookAtStatuses { .. }) => {
                panic!("the model does not step the input that returns {e:?}")
            }
            // Out of the model's scope, each with its reason (and where it
            // is tested instead). The model has no lock records, summaries,
            // hooks, skills, memory, worktrees, sockets or watches: what
            // these effects change is no part of what the core knows here.
            //
            // A session's wrap-up (locks released, summary written):
            // `core/tests_wrapup.rs`, e2e `retention`.
            Effect::WrapUp { .. }
            | Effect::WrapUpIfPresent { .. }
            | Effect::FinishEnded { .. }
            | Effect::ReleaseSessionLocks { .. }
            | Effect::EndSession { .. } => {}
            // A notify hook's run: its outcome (`Input::HookDone`) is only
            // said (`core/tests_upkeep.rs`, `daemon::hooks` tests).
            Effect::Notify { .. } => {}
            // The shared context's write: its parts are checked against a
            // from-scratch render instead (`check_context`).
            Effect::WriteSharedContext(_)
            | Effect::WriteSharedContextNow(_)
            | Effect::WriteContext { .. } => {}
            // The lock table (no lock records in the model):
            // `core/tests_outputs.rs` (expiry), e2e `lock`, `session_locks`.
            Effect::ReadLocks(_) | Effect::ReclaimLocks { .. } | Effect::RefreshLocks(_) => {}
            // Word to the lead: the model's runs answer it through
            // `Effect::TellLead`; the file's text is `core/tests_wrapup.rs`'s.
            Effect::WriteLeadMessage { .. } => {}
            // Retention, skills, team memory: their own modules' tests
            // (`retention`, `skills`, `memory`, `core/tests_upkeep.rs`).
            Effect::RunRetention(_)
            | Effect::RefreshSkills(_)
            | Effect::MergeMemoryInbox(_)
            | Effect::MemoryUpkeep { .. } => {}
            // Presence: the pid lock, the socket, `.squad/` there or not
            // (the model's roots never go): `core/tests_paths.rs`,
            // `core/presence.rs` tests, e2e `hardening`.
            Effect::CheckControl(_) | Effect::CheckRoot(_) | Effect::RemoveSocket(_) => {}
            // Watches (the model steps changes itself, never through a
            // watcher): `core/tests_paths.rs`, `daemon::intake` tests.
            Effect::Rewatch
            | Effect::WatchSession { .. }
            | Effect::ForgetWatches(_)
            | Effect::UnwatchRoot(_) => {}
            // The process and the service manager, no root state: the
            // trim after a burst, the watchdog, the STATUS= line
            // (`core/tests_upkeep.rs`).
            Effect::TrimMemory | Effect::Watchdog | Effect::StatusLine => {}
            // The shell's bookkeeping of removals, unreadable retries and
            // a forgotten session's timers, which the model's own timer
            // queue and snapshot stand for (`core/tests_files.rs`).
            Effect::PathPresent(_)
            | Effect::PathReadable(_)
            | Effect::RetryUnreadable(_)
            | Effect::ForgetSession { .. } => {}
            // A worktree merged or held (no git in the model):
            // `runs::tests`, e2e `worktree`.
            Effect::FinishWorktree { .. }
            | Effect::DropWorktree { .. }
            | Effect::LookAtTree { .. } => {}
            e @ (Effect::RunsListed { .. } | Effect::Edit { .. } | Effect::Control { .. }) => {
                panic!("effect the model never asks for: {e:?}")
            }
        }
    }

    /// An event of a session: a once-ever fact counted (`note_report`),
    /// a delivery's announcement kept for the comparison with the inbox
    /// entries written.
    fn note_event(&mut self, e: &Effect) {
        let Effect::Emit {
            root,
            session: Some(session),
            kind,
            ..
        } = e
        else {
            return;
        };
        self.note_report(*root, session, kind);
        if let EventKind::MessageDelivered { to, message_id, .. } = kind {
            self.delivered_events
                .push((*root, session.clone(), to.clone(), message_id.clone()));
        }
    }

    /// [`Effect::Route`]: handed over as `mail.rs` does, the inbox copies
    /// answered from what the world delivered into them.
    fn route(&mut self, root: RootId, session: String, file: String, own: Option<Arc<[u8]>>) {
        let copies = self.snaps[root.0 as usize].copies.clone();
        let holds = |inbox: &Path, name: &str, print: u64| {
            copies.get(&(inbox.to_path_buf(), name.to_string())) == Some(&print)
        };
        let input = Input::Route {
            session,
            file,
            own,
            copy_holds: &holds,
        };
        self.step(root, input);
    }

    pub(super) fn set_earlier(&mut self, timer: Timer, at: DateTime<Utc>) {
        let slot = self.timers.entry(timer).or_insert(at);
        if at < *slot {
            *slot = at;
        }
    }

    /// The shell's read of one file of a session (`apply.rs`): its bytes,
    /// or gone.
    pub(super) fn read(&mut self, r: RootId, file: FileRef, kind: FileKind) {
        let bytes = self.snaps[r.0 as usize]
            .files
            .get(&file.session)
            .and_then(|f| f.get(&file.file))
            .cloned();
        match bytes {
            Some(bytes) => self.step(
                r,
                Input::FileRead {
                    file,
                    kind,
                    bytes: &bytes,
                },
            ),
            None => self.step(r, Input::FileGone(file)),
        }
    }

    /// "Still unread?" for each entry, from the inbox listing.
    fn run_escalations(&mut self, root: RootId, session: String) {
        let snap = &self.snaps[root.0 as usize];
        let dir = self.cores[root.0 as usize].session_dir(&session);
        let unread: BTreeSet<PathBuf> = snap
            .inbox
            .get(&session)
            .into_iter()
            .flatten()
            .filter(|(_, at)| at.is_some())
            .map(|((to, n), _)| crate::inbox::inbox_dir(&dir, to).join("new").join(n))
            .collect();
        let is_unread = |p: &Path| unread.contains(p);
        self.step(
            root,
            Input::EscalationsDue {
                session,
                unread: &is_unread,
            },
        );
    }

    /// [`Effect::WriteInbox`]: the delivery written into its inbox's
    /// `new/` (its mtime: now) unless it is there already, and told.
    fn write_inbox(
        &mut self,
        root: RootId,
        delivery: Box<Delivery>,
        routed_from: Option<String>,
        bytes: &[u8],
    ) {
        let dir = self.cores[root.0 as usize].session_dir(&delivery.session);
        let copy = (
            crate::inbox::inbox_dir(&dir, &delivery.to),
            delivery.name.clone(),
        );
        let snap = &mut self.snaps[root.0 as usize];
        let slot = (delivery.to.clone(), delivery.name.clone());
        let inbox = snap.inbox.entry(delivery.session.clone()).or_default();
        let written = match inbox.entry(slot) {
            std::collections::btree_map::Entry::Occupied(_) => {
                crate::daemon::core::deliver::Written::Before
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Some(self.now));
                if let Some((_, id)) = super::rules::read_inbox_name(&delivery.name) {
                    self.written_entries.push((
                        root,
                        delivery.session.clone(),
                        delivery.to.clone(),
                        id,
                    ));
                }
                snap.copies.insert(copy, crate::index::fingerprint(bytes));
                crate::daemon::core::deliver::Written::Fresh
            }
        };
        let at = self.now;
        let input = Input::InboxWritten {
            delivery,
            routed_from,
            written,
            at,
        };
        self.step(root, input);
    }

    /// Makes the deliveries of the outbox, critical first, as the shell
    /// does: each decided by the core ([`Input::Deliver`], the bodies read
    /// from the snapshot), written ([`Effect::WriteInbox`]), then every
    /// fresh one announced once the batch is durable
    /// ([`Input::DeliverySynced`]).
    pub(super) fn flush_outbox(&mut self) {
        let mut outbox = std::mem::take(&mut self.outbox);
        batch::outbox_order(&mut outbox);
        for (r, d) in outbox {
            let now = self.wall();
            let facts = SnapshotFacts(&self.snaps[r.0 as usize]);
            let input = Input::Deliver {
                delivery: Box::new(d),
                facts: &facts,
            };
            let effects = Core::new(r, &mut self.cores[r.0 as usize]).step(input, now);
            self.perform(effects);
        }
        for announce in std::mem::take(&mut self.announced) {
            let root = announce.root;
            let input = Input::DeliverySynced {
                announce: Box::new(announce),
                fsync_error: None,
            };
            self.step(root, input);
        }
    }

    /// The tapped facts, one notice step per run of a root's facts; the
    /// notice files written as one group and each told to the core.
    pub(super) fn send_notices(&mut self) {
        let tapped = std::mem::take(&mut self.tapped);
        // Each root's events of the batch in one step, as `notices.rs`
        // hands them over.
        let mut by_root: Vec<(RootId, Vec<crate::daemon::core::notices::TappedEvent>)> = Vec::new();
        for (r, session, path, kind) in tapped {
            match by_root.iter_mut().find(|(last, _)| *last == r) {
                Some((_, events)) => events.push((Some(session), path, kind)),
                None => by_root.push((r, vec![(Some(session), path, kind)])),
            }
        }
        let mut files = Vec::new();
        for (r, events) in by_root {
            let now = self.wall();
            let effects =
                Core::new(r, &mut self.cores[r.0 as usize]).step(Input::NoticesTapped(events), now);
            for e in effects {
                match e {
                    Effect::WriteNotice(n) => files.push(n),
                    e => self.effect(e),
                }
            }
        }
        self.write_notices(files);
    }

    /// Notice files written (`notices.rs`): in the snapshot, and each told
    /// to the core from the bytes written.
    pub(super) fn write_notices(&mut self, notices: Vec<crate::daemon::core::notices::NoticeFile>) {
        for n in notices {
            let r = n.root.0 as usize;
            let bytes: Arc<[u8]> = Arc::from(n.text.into_bytes());
            if let Some(files) = self.snaps[r].files.get_mut(&n.session) {
                files.insert(n.file.clone(), bytes.to_vec());
            }
            let file = FileRef {
                session: n.session,
                file: n.file,
                path: n.path,
            };
            self.step(n.root, Input::NoticeWritten { file, bytes });
        }
    }

    /// The end of a batch (`flush`): what to write in the order that
    /// matters, the notices, the outbox, then the runs.
    pub(super) fn end_batch(&mut self) {
        self.settle();
        self.perform(batch::Batch::tail());
        self.keep_facts_of_batch();
        // Word to the lead is a file like any other: its event comes in
        // a batch of its own.
        for _ in 0..4 {
            let written = std::mem::take(&mut self.written);
            if written.is_empty() {
                break;
            }
            for (r, session, name, bytes) in written {
                self.file(r, &session, &name, Some(bytes));
            }
            self.settle();
            self.perform(batch::Batch::tail());
            self.keep_facts_of_batch();
        }
    }

    /// What to write after a batch's file changes, in the order that
    /// matters (`batch::settle`).
    pub(super) fn settle(&mut self) {
        let touched = std::mem::take(&mut self.touched);
        let changed = std::mem::take(&mut self.changed);
        let cores = &self.cores;
        let effects = batch::settle(&touched, &changed, |r, name| {
            cores[r.0 as usize].sessions.contains_key(name)
        });
        self.perform(effects);
    }

    /// A file written into a session (`None`: removed) and its watch
    /// event read by the shell: `Input::FileRead`, or `Input::FileGone`
    /// (then `Input::FileRemoved` once the shell confirms it stayed gone).
    pub(super) fn file(&mut self, r: usize, session: &str, name: &str, bytes: Option<Vec<u8>>) {
        self.put(r, session, name, bytes);
        // Only protocol files of a session are read (`intake::classify`).
        let Some(kind) = FileKind::from_file_name(name) else {
            return;
        };
        let file = FileRef {
            session: session.to_string(),
            file: name.to_string(),
            path: self.cores[r].session_dir(session).join(name),
        };
        self.read(id(r), file, kind);
    }

    /// A file written into the snapshot (`None`: removed), no event yet.
    pub(super) fn put(&mut self, r: usize, session: &str, name: &str, bytes: Option<Vec<u8>>) {
        let files = self.snaps[r].files.entry(session.to_string()).or_default();
        match &bytes {
            Some(b) => files.insert(name.to_string(), b.clone()),
            None => files.remove(name),
        };
        // The oracle notes task starts after every file change (an
        // operation may write several: the core sees each state).
        let dir = self.cores[r].session_dir(session);
        let index = scratch_index(&dir, &self.snaps[r].files[session]);
        let starts = self.snaps[r]
            .state
            .task_starts
            .entry(session.to_string())
            .or_default();
        let first = crate::derive::new_starts(&index, starts);
        starts.extend(first);
    }

    /// Fires every timer due by now, earliest first, as the event loop
    /// does (`flush`): a rescan and task deadlines in the batch, the
    /// others after it, then notices, the outbox and the runs.
    pub(super) fn fire_due(&mut self) {
        loop {
            let due: Vec<Timer> = self
                .timers
                .iter()
                .filter(|(_, at)| **at <= self.now)
                .map(|(t, _)| t.clone())
                .collect();
            if due.is_empty() {
                return;
            }
            for t in &due {
                self.timers.remove(t);
            }
            // The stages of the event loop's `flush`, in `Batch`'s order.
            let mut b = batch::Batch::new(due);
            for r in b.rescans() {
                self.step(r, Input::RescanDue { present: true });
            }
            for (r, input) in b.tasks_due() {
                self.step(r, input);
            }
            for (r, names) in std::mem::take(&mut self.touched) {
                for name in names {
                    let removal = !self.changed.contains(&(r, name.clone()));
                    b.touched(r, name, removal);
                }
            }
            self.changed.clear();
            let cores = &self.cores;
            let effects = b.settle(|r, name| cores[r.0 as usize].sessions.contains_key(name));
            self.perform(effects);
            let now = self.wall();
            for fired in b.fire(now) {
                let effects = match fired {
                    batch::Fired::Root(r, input) => {
                        let now = self.wall();
                        Core::new(r, &mut self.cores[r.0 as usize]).step(*input, now)
                    }
                    batch::Fired::Daemon(effects) => effects,
                };
                self.perform(effects);
            }
            self.perform(batch::Batch::tail());
        }
    }
}

/// What the shell reads for a delivery, from a root's snapshot: no cluster;
/// a message file's bytes as the snapshot holds them.
struct SnapshotFacts<'a>(&'a Snapshot);

impl crate::daemon::core::deliver::DeliveryFacts for SnapshotFacts<'_> {
    fn owner(
        &self,
        _session: &str,
        _source: &str,
        _to: &str,
    ) -> Option<crate::cluster::replicate::Owner> {
        None
    }

    fn body(&self, path: &Path) -> crate::daemon::core::deliver::BodyRead {
        use crate::daemon::core::deliver::BodyRead;
        let file = path.file_name().and_then(|n| n.to_str());
        let session = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str());
        let (Some(file), Some(session)) = (file, session) else {
            return BodyRead::Gone;
        };
        match self.0.files.get(session).and_then(|f| f.get(file)) {
            Some(bytes) => BodyRead::Bytes(bytes.clone()),
            None => BodyRead::Gone,
        }
    }
}
