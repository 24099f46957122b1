//! The adapter: each operation of the model test carried out in the
//! world and told to the core as the shell tells it.

use super::world::World;
use super::*;

impl World {
    pub(super) fn pick(&self, r: usize, session: &str, n: usize) -> Option<String> {
        let files = self.snaps[r].files.get(session)?;
        (!files.is_empty()).then(|| files.keys().nth(n % files.len()).cloned())?
    }

    /// THE adapter: one operation of the world, told to the core with the
    /// inputs the shell steps for it (a file read or gone, an inbox entry
    /// read, timers fired, an edit, a process that ended, config.json or
    /// the policy re-read, a rescan), then the batch's end as `flush`
    /// carries it out (status writes, notices, the outbox, the runs).
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
                self.end_batch();
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
                self.end_batch();
                let text = progress(task, a, "in_progress", self.now);
                self.file(
                    root,
                    s,
                    &format!("role-comm-{a}-task_{task}.md"),
                    Some(text.into_bytes()),
                );
            }
            Op::Exit {
                root,
                session,
                task,
                ok,
            } => self.exit(root, SESSIONS[session], task, ok),
            op => self.apply_root_op(op),
        }
        self.end_batch();
    }

    /// The operations on a root as a whole: config.json, the runner, lost
    /// events, the policy, a message id clash, a restart, `squadctl
    /// run|stop`.
    fn apply_root_op(&mut self, op: Op) {
        match op {
            Op::Config { root, max } => {
                // As `reload_config` does: config.json read, handed over.
                let c = config(max);
                self.snaps[root].config = c.clone();
                let config = Some(Box::new(c));
                self.step(
                    id(root),
                    Input::ConfigRead {
                        config,
                        error: None,
                    },
                );
            }
            Op::Break { root, broken } => {
                if broken {
                    self.broken.insert(id(root));
                } else {
                    self.broken.remove(&id(root));
                }
            }
            Op::Lost { root, session, n } => {
                // A file removed while the watcher's queue overflowed: only
                // the rescan it asks for sees it.
                let s = SESSIONS[session];
                if let Some(name) = self.pick(root, s, n) {
                    self.put(root, s, &name, None);
                }
                self.step(id(root), Input::RescanDue { present: true });
            }
            Op::Policy { root, n } => {
                // policies.yaml rewritten, then read again by the shell.
                let p = policy(n);
                self.snaps[root].policy = p.clone();
                self.step(id(root), Input::PolicyRead(Ok(Box::new(p))));
            }
            Op::Clash {
                root,
                session,
                id,
                priority,
            } => {
                let (name, text) = clashing_message(id, priority);
                self.file(root, SESSIONS[session], &name, Some(text.into_bytes()));
            }
            Op::Restart { root, kill } => self.restart(root, kill),
            Op::Run {
                root,
                session,
                task,
            } => self.run_by_hand(root, session, task),
            Op::Stop {
                root,
                session,
                task,
            } => self.stop_by_hand(root, session, task),
            _ => unreachable!("not a root operation: {op:?}"),
        }
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
        let Ok(edited) = crate::daemon::core::edits::decide(&self.cores[root], s, &edit, now)
        else {
            return;
        };
        if edited.write {
            // Written, then indexed from the bytes written (`edits.rs`).
            self.put(
                root,
                s,
                SESSION_STATUS_FILE,
                Some(edited.text.clone().into_bytes()),
            );
            let text = edited.text;
            self.step(
                id(root),
                Input::EditWritten {
                    session: s.to_string(),
                    path: edited.path,
                    text: &text,
                },
            );
            self.step(
                id(root),
                Input::SessionEdited {
                    session: s.to_string(),
                },
            );
        }
    }
}
