//! The world the core lives in, and the adapter that drives the core.

use super::oracle::*;
use super::*;

/// The world the core lives in: two roots' files and inboxes (the
/// snapshots), the shell's timer queue and outbox, and the cores.
pub(super) struct World {
    pub(super) now: DateTime<Utc>,
    pub(super) roots: Vec<Root>,
    pub(super) snaps: Vec<Snapshot>,
    /// The shell's timer queue: when each armed timer fires.
    pub(super) timers: BTreeMap<Timer, DateTime<Utc>>,
    /// Deliveries due now, made at the next flush.
    pub(super) outbox: Vec<(RootId, Delivery)>,
    /// Facts tapped for the next notice step.
    pub(super) tapped: Vec<(RootId, String, Option<PathBuf>, EventKind)>,
    /// Sessions touched and changed by the operation under way.
    pub(super) touched: BTreeMap<RootId, BTreeSet<String>>,
    pub(super) changed: BTreeSet<(RootId, String)>,
}

impl World {
    pub(super) fn new() -> World {
        let now = base();
        let mut roots = Vec::new();
        let mut snaps = Vec::new();
        for r in 0..ROOTS {
            let mut root = Root::new(root_dir(r), State::default(), policy(0), now);
            let mut files = BTreeMap::new();
            for s in SESSIONS {
                let index = SessionIndex::new(root.session_dir(s));
                root.load_session(index, now, false);
                files.insert(s.to_string(), BTreeMap::new());
            }
            roots.push(root);
            snaps.push(Snapshot {
                root: root_dir(r),
                files,
                inbox: BTreeMap::new(),
                state: State::default(),
                policy: policy(0),
            });
        }
        World {
            now,
            roots,
            snaps,
            timers: BTreeMap::new(),
            outbox: Vec::new(),
            tapped: Vec::new(),
            touched: BTreeMap::new(),
            changed: BTreeSet::new(),
        }
    }

    pub(super) fn wall(&self) -> Now {
        Now { wall: self.now }
    }

    // ------------------------------------------------ the shell's part

    /// One core step, its effects carried out.
    pub(super) fn step(&mut self, r: RootId, input: Input<'_>) {
        let now = self.wall();
        let effects = Core::new(r, &mut self.roots[r.0 as usize]).step(input, now);
        self.perform(effects);
    }

    /// Carries out effects in order, as the shell does (the writes of
    /// status files, the shared context and hooks have no bearing on
    /// what the core knows and are skipped).
    pub(super) fn perform(&mut self, effects: Vec<Effect>) {
        for e in effects {
            self.effect(e);
        }
    }

    pub(super) fn effect(&mut self, e: Effect) {
        let now = self.now;
        match e {
            Effect::SendNotices | Effect::SendFirstNotices => self.send_notices(),
            Effect::Tap {
                root,
                session,
                kind,
            } => self.tapped.push((root, session, None, kind)),
            Effect::WriteNotice(n) => self.write_notice(n),
            Effect::RecheckWaiting { root, session } => {
                self.step(root, Input::WaitingChanged { session })
            }
            Effect::RecheckWaitingIfPresent { root, session } => {
                if self.roots[root.0 as usize].sessions.contains_key(&session) {
                    self.step(root, Input::WaitingChanged { session });
                    self.flush_outbox();
                }
            }
            Effect::FlushOutbox => self.flush_outbox(),
            Effect::Outbox { root, delivery } => self.outbox.push((root, *delivery)),
            Effect::OfferWaiting {
                root,
                session,
                to,
                name,
            } => self.step(root, Input::DeliveryDue { session, to, name }),
            Effect::RunEscalations { root, session } => {
                let snap = &self.snaps[root.0 as usize];
                let dir = self.roots[root.0 as usize].session_dir(&session);
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
            Effect::Emit {
                root,
                session: Some(session),
                path,
                kind,
            } => self.tapped.push((root, session, path, kind)),
            Effect::SaveState(r) => {
                self.roots[r.0 as usize].state_to_save();
            }
            // Writes and work with no bearing on what the core knows.
            Effect::Emit { .. }
            | Effect::WriteStatuses { .. }
            | Effect::WrapUpIfPresent { .. }
            | Effect::Notify { .. }
            | Effect::WriteSharedContext(_)
            | Effect::RefreshLocks(_)
            | Effect::RunRetention(_)
            | Effect::RefreshSkills(_)
            | Effect::MergeMemoryInbox(_)
            | Effect::CheckControl(_)
            | Effect::CheckRoot(_)
            | Effect::Rewatch
            | Effect::TrimMemory
            | Effect::Watchdog
            | Effect::StatusLine => {}
            // The shell hands a routed file over after its clash check.
            Effect::Route {
                root,
                session,
                file,
                own,
            } => self.step(root, Input::FileApplied { session, file, own }),
            // The adapter drives files, scans and runs through `Root`'s
            // methods, not through the inputs that return these: one showing
            // up here means the adapter no longer plays the shell's part.
            other => panic!("effect the adapter does not carry out: {other:?}"),
        }
    }

    pub(super) fn set_earlier(&mut self, timer: Timer, at: DateTime<Utc>) {
        let slot = self.timers.entry(timer).or_insert(at);
        if at < *slot {
            *slot = at;
        }
    }

    /// Makes the deliveries of the outbox, critical first: each written
    /// into its inbox's `new/` (its mtime: now) and told to the core.
    pub(super) fn flush_outbox(&mut self) {
        let mut outbox = std::mem::take(&mut self.outbox);
        batch::outbox_order(&mut outbox);
        for (r, d) in outbox {
            let snap = &mut self.snaps[r.0 as usize];
            let slot = (d.to.clone(), d.name.clone());
            let inbox = snap.inbox.entry(d.session.clone()).or_default();
            // Delivered before (fresh or not): the file stays as it is.
            let fresh = !inbox.contains_key(&slot);
            if fresh {
                inbox.insert(slot, Some(self.now));
            }
            let at = self.now;
            self.step(r, Input::Delivered { delivery: &d, at });
        }
    }

    /// The tapped facts, one notice step per run of a root's facts; the
    /// notice files written and applied from the bytes written.
    pub(super) fn send_notices(&mut self) {
        let tapped = std::mem::take(&mut self.tapped);
        let mut runs: Vec<(RootId, Vec<crate::daemon::core::input::TappedFact>)> = Vec::new();
        for (r, session, path, kind) in tapped {
            match runs.last_mut() {
                Some((last, facts)) if *last == r => facts.push((session, path, kind)),
                _ => runs.push((r, vec![(session, path, kind)])),
            }
        }
        let mut files = Vec::new();
        let mut seen = BTreeSet::new();
        for (r, facts) in runs {
            let now = self.wall();
            let effects =
                Core::new(r, &mut self.roots[r.0 as usize]).step(Input::FactsTapped(facts), now);
            for e in effects {
                match e {
                    Effect::WriteNotice(n) => {
                        if seen.insert(n.path.clone()) {
                            files.push(n)
                        }
                    }
                    e => self.effect(e),
                }
            }
        }
        for n in files {
            self.write_notice(n);
        }
    }

    pub(super) fn write_notice(&mut self, n: crate::daemon::core::notices::NoticeFile) {
        let r = n.root.0 as usize;
        let bytes = n.text.into_bytes();
        if let Some(files) = self.snaps[r].files.get_mut(&n.session) {
            files.insert(n.file.clone(), bytes.clone());
        }
        let loaded = index_bytes(&n.path, FileKind::Message, &bytes);
        self.apply_loaded(
            n.root,
            &n.session,
            &n.file,
            Some(loaded),
            Some(Arc::from(bytes)),
        );
    }

    /// A file's new contents (`None`: gone) handed to the session core,
    /// the outcome carried out: what `apply.rs` does after reading.
    pub(super) fn apply_loaded(
        &mut self,
        r: RootId,
        session: &str,
        file: &str,
        loaded: Option<IndexedFile>,
        own: Option<Arc<[u8]>>,
    ) {
        let now = self.now;
        let root = &mut self.roots[r.0 as usize];
        let Some(core) = root.sessions.get(session) else {
            return;
        };
        let reply_to = |f: Option<&IndexedFile>| match f.map(|f| &f.entry) {
            Some(Entry::Message(m)) => m.in_reply_to.clone(),
            _ => None,
        };
        let before = reply_to(core.index().file(file));
        let after = reply_to(loaded.as_ref());
        let Some(mut out) = root.apply_file(session, file, loaded, now) else {
            return;
        };
        let Some(outcome) = out.file.take() else {
            return;
        };
        if outcome == FileOutcome::Unchanged {
            return;
        }
        let mail = root.mail.entry(session.to_string()).or_default();
        mail.note_reply(before.as_deref(), false);
        mail.note_reply(after.as_deref(), true);
        self.step(
            r,
            Input::FileApplied {
                session: session.to_string(),
                file: file.to_string(),
                own,
            },
        );
        if let Some(message_id) = before.filter(|b| Some(b) != after.as_ref()) {
            self.step(
                r,
                Input::ReplyWithdrawn {
                    session: session.to_string(),
                    message_id,
                },
            );
        }
        let path = self.roots[r.0 as usize].session_dir(session).join(file);
        let removal = match outcome {
            FileOutcome::Removed => {
                self.tapped
                    .push((r, session.to_string(), Some(path), EventKind::FileRemoved));
                true
            }
            FileOutcome::Changed(kind) => {
                self.tapped.push((r, session.to_string(), Some(path), kind));
                false
            }
            FileOutcome::Unchanged => return,
        };
        self.take_outcome(r, session, out, removal);
    }

    /// What a session change caused (`apply.rs`'s `take_outcome`): events,
    /// task deadline timers, the persisted state.
    pub(super) fn take_outcome(&mut self, r: RootId, session: &str, out: Outcome, removal: bool) {
        for kind in out.events.into_iter().chain(out.overdue) {
            self.tapped.push((r, session.to_string(), None, kind));
        }
        for (task, at) in out.timers {
            let timer = Timer::TaskDue {
                root: r,
                session: session.to_string(),
                task,
            };
            match at {
                Some(at) => {
                    self.timers.insert(timer, at);
                }
                None => {
                    self.timers.remove(&timer);
                }
            }
        }
        if !removal {
            self.changed.insert((r, session.to_string()));
        }
        self.touched
            .entry(r)
            .or_default()
            .insert(session.to_string());
    }

    /// The end of a batch: what to write, in the order that matters.
    pub(super) fn settle(&mut self) {
        let touched = std::mem::take(&mut self.touched);
        let changed = std::mem::take(&mut self.changed);
        let roots = &self.roots;
        let effects = batch::settle(&touched, &changed, |r, name| {
            roots[r.0 as usize].sessions.contains_key(name)
        });
        self.perform(effects);
    }

    // ------------------------------------------------- the adapter

    /// A file written into a session (or `None`: removed), read back and
    /// applied as a settled path is.
    pub(super) fn file(&mut self, r: usize, session: &str, name: &str, bytes: Option<Vec<u8>>) {
        let files = self.snaps[r].files.entry(session.to_string()).or_default();
        match &bytes {
            Some(b) => files.insert(name.to_string(), b.clone()),
            None => files.remove(name),
        };
        let dir = self.roots[r].session_dir(session);
        // The oracle notes task starts after every file change (an
        // operation may write several: the core sees each state).
        let index = scratch_index(&dir, &self.snaps[r].files[session]);
        let starts = self.snaps[r]
            .state
            .task_starts
            .entry(session.to_string())
            .or_default();
        let first = crate::derive::new_starts(&index, starts);
        starts.extend(first);
        let loaded = bytes.and_then(|b| index_file(&dir, name, &b));
        // Same bytes as indexed: recognised by fingerprint, not applied.
        let indexed = self.roots[r]
            .sessions
            .get(session)
            .and_then(|c| c.index().files.get(name).map(|f| f.fingerprint));
        if loaded.as_ref().map(|f| f.fingerprint) == indexed {
            return;
        }
        self.apply_loaded(id(r), session, name, loaded, None);
    }

    pub(super) fn pick(&self, r: usize, session: &str, n: usize) -> Option<String> {
        let files = self.snaps[r].files.get(session)?;
        (!files.is_empty()).then(|| files.keys().nth(n % files.len()).cloned())?
    }

    /// THE adapter: one operation carried out through the core's entry
    /// points (`Core::step` and the `Root` methods), then the batch
    /// settled. At merge it moves onto the shell's new inputs (file
    /// application, scans and timer dispatch as `Input`s, run exits).
    pub(super) fn apply(&mut self, op: Op) {
        match op {
            Op::Plan {
                root,
                session,
                agent,
                task,
                requires,
                timeout,
            } => {
                let a = AGENTS[agent];
                let text = plan(task, a, &requires, timeout);
                self.file(
                    root,
                    SESSIONS[session],
                    &format!("role-plan-{a}-task_{task}.md"),
                    Some(text.into_bytes()),
                );
            }
            Op::Progress {
                root,
                session,
                agent,
                task,
                status,
                minute,
            } => {
                let a = AGENTS[agent];
                let s = ["pending", "in_progress", "blocked", "completed"][status];
                let at = base() + Duration::minutes(i64::from(minute));
                let text = progress(task, a, s, at);
                self.file(
                    root,
                    SESSIONS[session],
                    &format!("role-comm-{a}-task_{task}.md"),
                    Some(text.into_bytes()),
                );
            }
            Op::Message {
                root,
                session,
                id,
                priority,
                reply_to,
                respond_in,
            } => {
                let (name, text) = message(id, priority, reply_to, respond_in);
                self.file(root, SESSIONS[session], &name, Some(text.into_bytes()));
            }
            Op::Error {
                root,
                session,
                agent,
                to,
                n,
            } => {
                let (name, text) = error_report(agent, to, n);
                self.file(root, SESSIONS[session], &name, Some(text.into_bytes()));
            }
            Op::Status { root, session, s } => {
                self.file(
                    root,
                    SESSIONS[session],
                    SESSION_STATUS_FILE,
                    Some(status_file(s).into_bytes()),
                );
            }
            Op::Garbage { root, session, n } => {
                if let Some(name) = self.pick(root, SESSIONS[session], n) {
                    self.file(
                        root,
                        SESSIONS[session],
                        &name,
                        Some(b"meta: [\n\xff".to_vec()),
                    );
                }
            }
            Op::Remove { root, session, n } => {
                if let Some(name) = self.pick(root, SESSIONS[session], n) {
                    self.file(root, SESSIONS[session], &name, None);
                }
            }
            Op::Rename {
                root,
                session,
                n,
                agent,
            } => {
                // A removal, then the same bytes under another name.
                let s = SESSIONS[session];
                let Some(name) = self.pick(root, s, n) else {
                    return;
                };
                let Some(tail) = name
                    .strip_prefix("role-plan-")
                    .and_then(|t| t.split_once("-task_"))
                else {
                    return;
                };
                let to = format!("role-plan-{}-task_{}", AGENTS[agent], tail.1);
                let bytes = self.snaps[root].files[s][&name].clone();
                self.file(root, s, &name, None);
                self.settle();
                self.file(root, s, &to, Some(bytes));
            }
            Op::Ack { root, session, n } => self.ack(root, SESSIONS[session], n),
            Op::Advance(m) => {
                self.now += Duration::minutes(i64::from(m));
                self.fire_due();
            }
            Op::Edit {
                root,
                session,
                fail,
            } => self.edit(root, SESSIONS[session], fail),
            Op::Start {
                root,
                session,
                agent,
                task,
                timeout,
            } => {
                let (s, a) = (SESSIONS[session], AGENTS[agent]);
                let text = plan(task, a, &[], Some(timeout));
                self.file(
                    root,
                    s,
                    &format!("role-plan-{a}-task_{task}.md"),
                    Some(text.into_bytes()),
                );
                self.settle();
                let text = progress(task, a, "in_progress", self.now);
                self.file(
                    root,
                    s,
                    &format!("role-comm-{a}-task_{task}.md"),
                    Some(text.into_bytes()),
                );
            }
            Op::RunExit {
                root,
                session,
                task,
                ok,
            } => self.run_exit(root, SESSIONS[session], task, ok),
            Op::Policy { root, n } => {
                // As `upkeep::reload_policy` does: the policy replaced,
                // then told to the core.
                let p = policy(n);
                self.roots[root].next_gc = crate::daemon::core::next_run(&p, self.now);
                self.roots[root].policy = p.clone();
                self.snaps[root].policy = p;
                self.step(id(root), Input::PolicyChanged);
            }
        }
        self.settle();
    }

    /// An agent reads (acknowledges) one of its unread inbox entries.
    pub(super) fn ack(&mut self, root: usize, s: &str, n: usize) {
        let unread: Vec<(String, String)> = self.snaps[root]
            .inbox
            .get(s)
            .into_iter()
            .flatten()
            .filter(|(_, at)| at.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        if unread.is_empty() {
            return;
        }
        let (agent, file) = unread[n % unread.len()].clone();
        if let Some(inbox) = self.snaps[root].inbox.get_mut(s) {
            inbox.insert((agent.clone(), file.clone()), None);
        }
        self.step(
            id(root),
            Input::InboxEntry {
                session: s.to_string(),
                agent,
                file,
                present: None,
            },
        );
    }

    /// `squadctl session complete|fail`: decided by the core, written,
    /// applied, then told to the core.
    pub(super) fn edit(&mut self, root: usize, s: &str, fail: bool) {
        let edit = if fail {
            squad_policies::session_edit::SessionEdit::Fail {
                reason: "model".into(),
            }
        } else {
            squad_policies::session_edit::SessionEdit::Complete { force: false }
        };
        let now = self.wall();
        let Ok(edited) = crate::daemon::core::edits::decide(&self.roots[root], s, &edit, now)
        else {
            return;
        };
        if edited.write {
            self.file(root, s, SESSION_STATUS_FILE, Some(edited.text.into_bytes()));
            self.settle();
            self.step(
                id(root),
                Input::SessionEdited {
                    session: s.to_string(),
                },
            );
        }
    }

    /// A run exits: no core input yet, so what it leaves behind, its
    /// agent's last report.
    pub(super) fn run_exit(&mut self, root: usize, s: &str, task: u8, ok: bool) {
        // What the run leaves behind: its agent's last report.
        let Some(agent) = self.roots[root].sessions.get(s).and_then(|c| {
            c.tasks()
                .get(format!("task_{task}").as_str())
                .map(|t| t.agent.clone())
        }) else {
            return;
        };
        let status = if ok { "completed" } else { "blocked" };
        let at = self.now;
        let text = progress(task, &agent, status, at);
        self.file(
            root,
            s,
            &format!("role-comm-{agent}-task_{task}.md"),
            Some(text.into_bytes()),
        );
    }

    /// Fires every timer due by now, earliest first, as the event loop
    /// does: task deadlines re-derive their sessions in the batch, the
    /// others fire after it.
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
            let mut passed: BTreeMap<(RootId, String), Vec<String>> = BTreeMap::new();
            for t in &due {
                if let Timer::TaskDue {
                    root,
                    session,
                    task,
                } = t
                {
                    passed
                        .entry((*root, session.clone()))
                        .or_default()
                        .push(task.clone());
                }
            }
            for ((r, name), tasks) in passed {
                let now = self.now;
                if let Some(out) = self.roots[r.0 as usize].tick(&name, &tasks, now) {
                    self.take_outcome(r, &name, out, false);
                }
            }
            let changed = self.changed.clone();
            self.settle();
            for t in due {
                let r = t.root();
                let now = self.wall();
                let effects =
                    timer::fire(t, r.map(|r| &mut self.roots[r.0 as usize]), &changed, now);
                self.perform(effects);
            }
        }
    }

    // ------------------------------------------------- the comparison

    /// After a step: every root's core equals a from-scratch derivation
    /// of its snapshot, and the armed timers are the ones the snapshot
    /// calls for.
    pub(super) fn check(&mut self) {
        for r in 0..ROOTS {
            let indexes = self.snaps[r].indexes();
            keep_facts(&mut self.snaps[r], &indexes, self.now);
            let want = Known::from_indexes(&self.snaps[r], &indexes, self.now);
            let got = Known::of(&mut self.roots[r]);
            assert_eq!(got.state, want.state, "root {r}: persisted facts");
            for (name, w) in &want.sessions {
                let g = &got.sessions[name];
                assert_eq!(g.files, w.files, "root {r} {name}: files");
                assert_eq!(g.diagnostics, w.diagnostics, "root {r} {name}: diagnostics");
                assert_eq!(g.view, w.view, "root {r} {name}: view");
                assert_eq!(g.inbox, w.inbox, "root {r} {name}: mailbox");
                assert_eq!(g.replies, w.replies, "root {r} {name}: replies");
                assert_eq!(g.pending, w.pending, "root {r} {name}: pending deliveries");
            }
            assert_eq!(got.sessions.len(), want.sessions.len());
            self.check_timers(r, &want, &indexes);
        }
    }

    pub(super) fn check_timers(
        &self,
        r: usize,
        want: &Known,
        indexes: &BTreeMap<String, SessionIndex>,
    ) {
        let rid = id(r);
        let snap = &self.snaps[r];
        for (name, w) in &want.sessions {
            // Task deadlines: exactly the tasks still to finish in time.
            let expected: BTreeMap<String, DateTime<Utc>> = w
                .view
                .tasks
                .iter()
                .filter(|t| t.state != TaskStatus::Completed && !t.overdue)
                .filter_map(|t| Some((t.task_id.clone(), t.due_at?)))
                .collect();
            let armed: BTreeMap<String, DateTime<Utc>> = self
                .timers
                .iter()
                .filter_map(|(t, at)| match t {
                    Timer::TaskDue {
                        root,
                        session,
                        task,
                    } if *root == rid && session == name => Some((task.clone(), *at)),
                    _ => None,
                })
                .collect();
            assert_eq!(armed, expected, "root {r} {name}: task deadline timers");
            // Each pending delivery has its timer.
            for (to, n) in &w.pending {
                let t = Timer::Delivery {
                    root: rid,
                    session: name.clone(),
                    to: to.clone(),
                    name: n.clone(),
                };
                assert!(
                    self.timers.contains_key(&t),
                    "root {r} {name}: no timer for pending {to}/{n}"
                );
            }
            // The escalation timer fires no later than the next unread
            // message not yet escalated is due.
            let escalated = want.state.escalated.get(name);
            let next = w
                .inbox
                .iter()
                .filter_map(|((_, n), at)| {
                    let (p, mid) = parse_inbox_name(n)?;
                    if escalated.is_some_and(|e| e.contains(&mid)) {
                        return None;
                    }
                    escalation_at(&snap.policy.messages, p, (*at)?)
                })
                .min();
            if let Some(next) = next {
                let t = Timer::Escalation {
                    root: rid,
                    session: name.clone(),
                };
                let armed = self.timers.get(&t);
                assert!(
                    armed.is_some_and(|a| *a <= next),
                    "root {r} {name}: escalation due {next} but timer {armed:?}"
                );
            }
            // The reply timer likewise, for questions still to answer.
            let index = &indexes[name];
            let reported = want.state.replies_overdue.get(name);
            let next = messages(index)
                .filter(|m| !w.replies.contains_key(&m.message_id))
                .filter(|m| !reported.is_some_and(|s| s.contains(&m.message_id)))
                .filter_map(routing::reply_due)
                .min();
            if let Some(next) = next {
                let t = Timer::ReplyDue {
                    root: rid,
                    session: name.clone(),
                };
                let armed = self.timers.get(&t);
                assert!(
                    armed.is_some_and(|a| *a <= next),
                    "root {r} {name}: reply due {next} but timer {armed:?}"
                );
            }
        }
    }
}
