//! The shell's half of a step: carrying out the [`Effect`]s the core
//! returned, in their order. Each arm is I/O or a hand-over to the part of
//! squadd that owns it (the writer, the timers, the event log); no decision
//! is made here beyond what the file system answers.

use super::EventLoop;
use super::core::wrapup::WrapUpWhy;
use super::core::{self, Effect, Now};
use super::release_scan_memory;
use super::systemd;
use std::time::Instant;

impl EventLoop {
    /// One step of root `i`'s core ([`core::Core::step`]): the input taken
    /// in, the effects it returns carried out. Returns the sessions the
    /// step touched ([`Effect::Touched`]: each name, whether only by a
    /// removal), for the batch.
    pub(super) fn step(
        &mut self,
        i: core::RootId,
        input: core::Input<'_>,
        now: Now,
    ) -> Vec<(String, bool)> {
        let effects = core::Core::new(i, self.roots.core_mut(i)).step(input, now);
        self.perform(effects, now)
    }

    /// Carries out effects in order; returns the sessions they touched.
    pub(super) fn perform(&mut self, effects: Vec<Effect>, now: Now) -> Vec<(String, bool)> {
        let mut touched = Vec::new();
        for effect in effects {
            self.perform_one(effect, now, &mut touched);
        }
        touched
    }

    fn perform_one(&mut self, effect: Effect, now: Now, touched: &mut Vec<(String, bool)>) {
        let Some(effect) = self.perform_reading(effect, now, touched) else {
            return;
        };
        let wall = now.wall;
        match effect {
            Effect::PathPresent(path) => self.intake.clear_vanished(&path),
            Effect::PathReadable(path) => self.intake.readable(&path),
            Effect::RetryUnreadable(path) => {
                self.intake.retry_unreadable(&path, Instant::now());
            }
            Effect::WrapUp {
                root,
                session,
                status,
            } => self.wrap_up(root, session, status, WrapUpWhy::Ended, now),
            Effect::SendNotices => self.send_notices(wall),
            Effect::SendFirstNotices => {
                self.send_notices_at_most(wall, super::notices::STARTUP_NOTICES)
            }
            // Agent runs: processes, records, word to the lead (processes.rs).
            e @ (Effect::SpawnRun { .. }
            | Effect::SignalRun { .. }
            | Effect::ContainRun { .. }
            | Effect::AdoptRun { .. }
            | Effect::StopRun { .. }
            | Effect::WriteRunRecord { .. }
            | Effect::FinishWorktree { .. }
            | Effect::DropWorktree { .. }
            | Effect::LookAtTree { .. }
            | Effect::TellLead { .. }
            | Effect::RunsLooked { .. }
            | Effect::RunReply { .. }
            | Effect::WriteLeadMessage { .. }
            | Effect::DispatchRuns { .. }
            | Effect::RunsListed { .. }) => self.perform_run(e, now),
            Effect::Tap {
                root,
                session,
                kind,
            } => self.log.tap((root, Some(session), None, kind)),
            // Its group commit ends with the outbox's (notices.rs).
            Effect::WriteNotice(n) => {
                self.write_notices(vec![n]);
                self.flush_outbox(wall);
            }
            Effect::WriteStatuses { root, sessions } => {
                self.step(root, core::Input::StatusesDue { sessions }, now);
            }
            Effect::FlushOutbox => self.flush_outbox(wall),
            Effect::SuperviseRuns => self.supervise_runs(wall),
            Effect::Outbox { root, delivery } => self.outbox.push((root, *delivery)),
            // Routing, waiting deliveries, a delivery's write, escalations
            // (mail.rs).
            e @ (Effect::Route { .. }
            | Effect::RecheckWaiting { .. }
            | Effect::RecheckWaitingIfPresent { .. }
            | Effect::OfferWaiting { .. }
            | Effect::RunEscalations { .. }
            | Effect::WriteInbox { .. }
            | Effect::Watch { .. }
            | Effect::Announce(_)) => self.perform_mail(e, now),
            Effect::WrapUpIfPresent {
                root,
                session,
                status,
            } => {
                let dir_present = self.roots.core(root).session_dir(&session).is_dir();
                self.wrap_up(root, session, status, WrapUpWhy::Held { dir_present }, now);
            }
            Effect::SetTimer { timer, after } => self
                .timers
                .set(timer, super::timers::instant_after(Instant::now(), after)),
            Effect::SetTimerEarlier { timer, after } => self
                .timers
                .set_earlier(timer, super::timers::instant_after(Instant::now(), after)),
            Effect::SetTimerAt { timer, at } => {
                self.timers.set_wall(timer, at, wall, Instant::now())
            }
            Effect::SetTimerEarlierAt { timer, at } => {
                let at = super::timers::instant_at(at, wall, Instant::now());
                self.timers.set_earlier(timer, at);
            }
            Effect::CancelTimer(timer) => self.timers.cancel(&timer),
            Effect::Emit {
                root,
                session,
                path,
                kind,
            } => self
                .log
                .emit(root, session.as_deref(), path.as_deref(), kind),
            Effect::Notify {
                root,
                session,
                to,
                message_id,
                priority,
                path,
            } => {
                let policy = &self.roots.core(root).policy;
                self.hooks.notify(
                    &policy.messages,
                    &policy.hooks,
                    super::hooks::Notice {
                        root,
                        session: &session,
                        from: "squadd",
                        to: &to,
                        message_id: &message_id,
                        priority,
                        path: &path,
                    },
                );
            }
            Effect::SaveState(root) => self.save_state(root),
            Effect::WriteSharedContext(root) => self.write_shared_context(root, false),
            Effect::RefreshLocks(root) => self.refresh_locks(root),
            Effect::RunRetention(root) => self.run_retention(root, now),
            Effect::RefreshSkills(root) => self.refresh_skills(root),
            Effect::CheckControl(root) => {
                self.check_control(root);
            }
            Effect::GiveUpRoot { root, pid } => self.take_over(root, pid),
            Effect::CheckRoot(root) => {
                let present = self.roots.core(root).sessions_dir.is_dir();
                if !present {
                    self.look_for_moved_root(root);
                }
                self.step(root, core::Input::RootLookedAt { present }, now);
            }
            Effect::Rewatch => self.rewatch(),
            // What a changed path asked for (apply.rs).
            e @ (Effect::ReloadConfig(_)
            | Effect::ReloadPolicy(_)
            | Effect::WatchLocks { .. }
            | Effect::LookAtInboxEntry { .. }
            | Effect::LookAtPresence { .. }) => self.perform_path(e),
            Effect::TrimMemory => release_scan_memory(),
            // Memory upkeep, the socket, the service manager.
            e @ (Effect::MergeMemoryInbox(_)
            | Effect::MemoryUpkeep { .. }
            | Effect::RemoveSocket(_)
            | Effect::Watchdog
            | Effect::StatusLine) => self.perform_upkeep(e, now),
            // squadd's own outputs: locks, reads and writes (writes.rs).
            e @ (Effect::LockStatuses { .. }
            | Effect::WriteStatusTexts { .. }
            | Effect::WriteContext { .. }
            | Effect::WriteState { .. }
            | Effect::ReadLocks(_)
            | Effect::ReclaimLocks { .. }
            | Effect::ReleaseSessionLocks { .. }
            | Effect::EndSession { .. }
            | Effect::RereadStatus { .. }
            | Effect::LookAtStatuses { .. }) => self.perform_output(e, now),
            // Carried out by `perform_reading`.
            Effect::Touched { .. }
            | Effect::ConfirmGone { .. }
            | Effect::ListSessions(_)
            | Effect::ScanSession { .. }
            | Effect::FinishRescan(_)
            | Effect::RescanSession { .. }
            | Effect::ReadFile { .. }
            | Effect::SeedMail { .. }
            | Effect::WatchSession { .. }
            | Effect::ForgetSession { .. }
            | Effect::ForgetWatches(_)
            | Effect::UnwatchRoot(_)
            | Effect::FinishEnded { .. }
            | Effect::LookAtSessionDir { .. }
            | Effect::ApplyFile { .. }
            | Effect::WriteSharedContextNow(_) => {}
            // Carried out by the edit's request (edits.rs), never here.
            Effect::Edit { session, next, .. } => {
                tracing::warn!(session, ?next, "a session edit's step outside its request");
            }
            // Carried out by the control check (presence.rs), never here.
            Effect::Control { next, .. } => {
                tracing::warn!(?next, "a control check's step outside the check");
            }
        }
    }

    /// Memory upkeep, the control socket's removal, the service
    /// manager's watchdog and status line.
    fn perform_upkeep(&mut self, effect: Effect, now: Now) {
        let wall = now.wall;
        match effect {
            Effect::MergeMemoryInbox(root) => {
                let merged = super::upkeep::merge_memory_inbox(&self.roots.core(root).root);
                self.step(root, core::Input::MemoryInboxMerged(merged), now);
            }
            Effect::MemoryUpkeep { root, memory } => {
                super::upkeep::run_memory(&self.roots.core(root).root, memory, wall);
            }
            Effect::RemoveSocket(root) => {
                let _ =
                    std::fs::remove_file(crate::control::socket_path(&self.roots.core(root).root));
            }
            Effect::Watchdog => {
                systemd::watchdog();
                if let Some(every) = self.watchdog {
                    self.timers.set(
                        super::timers::Timer::Watchdog,
                        super::timers::instant_after(Instant::now(), every),
                    );
                }
            }
            Effect::StatusLine => {
                let summary = super::answers::summary(self);
                if summary != self.last_status_line {
                    systemd::status(&summary);
                    self.last_status_line = summary;
                }
            }
            // Not an upkeep effect: `perform_one` routes none here.
            _ => {}
        }
    }

    /// The effects that read sessions and files (and so may touch
    /// sessions of the batch); any other effect is handed back.
    fn perform_reading(
        &mut self,
        effect: Effect,
        now: Now,
        touched: &mut Vec<(String, bool)>,
    ) -> Option<Effect> {
        let wall = now.wall;
        match effect {
            Effect::Touched {
                session, removal, ..
            } => touched.push((session, removal)),
            Effect::ConfirmGone { root, file } => {
                if self.intake.vanished(&file.path, Instant::now()) {
                    touched.extend(self.step(root, core::Input::FileRemoved(file), now));
                } else {
                    tracing::debug!(path = %file.path.display(), "gone; removal counts if still gone in a moment");
                }
            }
            Effect::ListSessions(root) => touched.extend(self.list_sessions(root)),
            Effect::ScanSession { root, session, why } => {
                touched.extend(self.scan_session(root, &session, why));
            }
            Effect::FinishRescan(root) => {
                self.step(root, core::Input::Rescanned, now);
            }
            Effect::RescanSession { root, session } => self.rescan_session(root, &session),
            Effect::ReadFile { root, file, kind } => {
                // Its session is touched by the rescan as a whole.
                self.apply_file(root, &file.session, &file.file, &file.path, kind);
            }
            Effect::LookAtSessionDir { root, session } => {
                touched.extend(self.apply_session_dir(root, &session));
            }
            Effect::ApplyFile { root, file, kind } => {
                touched.extend(self.apply_file(root, &file.session, &file.file, &file.path, kind));
            }
            Effect::SeedMail { root, session } => self.seed_mail(root, &session, wall),
            Effect::WatchSession { root, session } => {
                let dir = self.roots.core(root).session_dir(&session);
                self.watch(root, &dir);
                self.watch_locks(root, &dir);
            }
            Effect::ForgetSession { root, session } => self.forget_session(root, &session),
            Effect::ForgetWatches(root) => {
                let dir = self.roots.core(root).root.clone();
                self.intake.forget_under(&dir.join(super::SQUAD_DIR));
                if !dir.is_dir() {
                    self.intake.forget_under(&dir);
                }
            }
            Effect::UnwatchRoot(root) => {
                let dir = self.roots.core(root).root.clone();
                self.intake.unwatch_under(&dir);
            }
            Effect::FinishEnded {
                root,
                session,
                status,
            } => {
                let dir = self.roots.core(root).session_dir(&session);
                let why = WrapUpWhy::Found {
                    locks_dir: dir.join(crate::locks::LOCKS_DIR).is_dir(),
                    summary_present: dir.join(super::SUMMARY_FILE).exists(),
                };
                self.wrap_up(root, session, status, why, now);
            }
            Effect::WriteSharedContextNow(root) => self.write_shared_context(root, true),
            other => return Some(other),
        }
        None
    }
}
