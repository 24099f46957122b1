//! The shell's half of a step: carrying out the [`Effect`]s the core
//! returned, in their order. Each arm is I/O or a hand-over to the part of
//! squadd that owns it (the writer, the timers, the event log); no decision
//! is made here beyond what the file system answers.

use super::Supervisor;
use super::core::{self, Effect, Now};
use super::release_scan_memory;
use super::systemd;
use std::time::Instant;

impl Supervisor {
    /// One step of root `i`'s core ([`core::Core::step`]): the input taken
    /// in, the effects it returns carried out.
    pub(super) fn step(&mut self, i: core::RootId, input: core::Input<'_>, now: Now) {
        let effects = core::Core::new(i, self.roots.core_mut(i)).step(input, now);
        self.perform(effects, now);
    }

    /// Carries out effects in order.
    pub(super) fn perform(&mut self, effects: Vec<Effect>, now: Now) {
        for effect in effects {
            self.perform_one(effect, now);
        }
    }

    fn perform_one(&mut self, effect: Effect, now: Now) {
        let wall = now.wall;
        match effect {
            Effect::SendNotices => self.send_notices(wall),
            Effect::Tap {
                root,
                session,
                kind,
            } => self.log.tap((root, Some(session), None, kind)),
            Effect::WriteNotice(n) => self.write_notices(vec![n]),
            Effect::WriteStatuses { root, sessions } => self.write_statuses(root, &sessions, wall),
            Effect::RecheckWaiting { root, session } => {
                self.step(root, core::Input::WaitingChanged { session }, now)
            }
            Effect::RecheckWaitingIfPresent { root, session } => {
                if self.roots.core(root).session_dir(&session).is_dir() {
                    self.step(root, core::Input::WaitingChanged { session }, now);
                    self.flush_outbox(wall);
                }
            }
            Effect::FlushOutbox => self.flush_outbox(wall),
            Effect::Outbox { root, delivery } => self.outbox.push((root, *delivery)),
            Effect::OfferWaiting {
                root,
                session,
                to,
                name,
            } => self.step(root, core::Input::DeliveryDue { session, to, name }, now),
            Effect::RunEscalations { root, session } => self.run_escalations(root, &session, wall),
            Effect::WrapUpIfPresent {
                root,
                session,
                status,
            } => {
                if self.roots.core(root).session_dir(&session).is_dir() {
                    self.wrap_up(root, &session, &status, wall);
                }
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
            Effect::RunRetention(root) => {
                // With `cluster:`, only the leader runs retention.
                if self.leads(root) {
                    let busy = self.busy_sessions(root);
                    let caused =
                        super::upkeep::run_retention(self.roots.core_mut(root), &busy, wall);
                    self.record(root, caused);
                }
                self.schedule_retention(root, wall);
            }
            Effect::RefreshSkills(root) => self.refresh_skills(root),
            Effect::MergeMemoryInbox(root) => {
                if super::upkeep::merge_memory_inbox(self.roots.core(root)) {
                    // A squadctl memory command holds the lock: again soon.
                    let at = Instant::now() + super::MEMORY_LOCK_RETRY;
                    self.timers.set(core::timer::Timer::MemoryInbox(root), at);
                }
            }
            Effect::CheckControl(root) => {
                self.check_control(root);
            }
            Effect::CheckRoot(root) => {
                let present = self.roots.core(root).sessions_dir.is_dir();
                let effects = core::timer::root_check(self.roots.core_mut(root), root, present);
                self.perform(effects, now);
            }
            Effect::Rewatch => self.rewatch(),
            Effect::TrimMemory => release_scan_memory(),
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
        }
    }
}
