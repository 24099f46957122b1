//! Message delivery, the I/O: a file to route handed to the core with the
//! answer about inbox copies (a reused message id is decided there:
//! [`core::mail`]), the outbox written (critical first, one group commit:
//! each delivery's decision is [`core::deliver`]'s, the shell reads the
//! body, journals the hook, writes, fsyncs each inbox once and starts the
//! hooks after the announcements), escalations' "still unread?" answered
//! with one `stat`, and inbox acknowledgements read. Nothing here decides
//! beyond what the file system answers.

use self::core::deliver::{Announce, BodyRead, DeliveryFacts, Written};
use super::*;

impl EventLoop {
    /// Routes one file ([`core::Input::Route`]): the core checks its
    /// message id, asking about inbox copies ([`delivered_copy_of`]), then
    /// offers what it asks to deliver and schedules its reply deadline.
    /// `own`: the file's bytes as squadd itself wrote them (a notice),
    /// delivered from memory instead of read back.
    pub(super) fn route_file(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        wall: DateTime<Utc>,
        own: Option<std::sync::Arc<[u8]>>,
    ) {
        let input = self::core::Input::Route {
            session: name.to_string(),
            file: file.to_string(),
            own,
            copy_holds: &delivered_copy_of,
        };
        self.step(i, input, Now { wall });
    }

    /// Makes the deliveries in the outbox, critical first, then by age, as
    /// one group commit: each is decided by the core
    /// ([`core::Input::Deliver`]) and written and renamed into its inbox
    /// ([`core::Effect::WriteInbox`]), then each inbox's `new/` and each
    /// session directory the batch's notices went into is fsynced once for
    /// the whole batch ([`Self::commit_group`]); only then are the
    /// deliveries announced ([`core::Input::DeliverySynced`]) and their
    /// hooks started (a hook never tells of a message a crash could still
    /// lose).
    pub(super) fn flush_outbox(&mut self, wall: DateTime<Utc>) {
        let mut outbox = std::mem::take(&mut self.outbox);
        self::core::batch::outbox_order(&mut outbox);
        let now = Now { wall };
        for (i, d) in outbox {
            let (core, shell) = self.roots.both_mut(i);
            let facts = ShellFacts {
                replica: shell.replica.as_ref(),
            };
            let input = self::core::Input::Deliver {
                delivery: Box::new(d),
                facts: &facts,
            };
            let effects = self::core::Core::new(i, core).step(input, now);
            self.perform(effects, now);
        }
        let made = std::mem::take(&mut self.unsynced);
        let mut dirs: BTreeMap<PathBuf, crate::safefs::Dir> = BTreeMap::new();
        let mut hooks = Vec::with_capacity(made.len());
        for m in made {
            let crate::inbox::Fresh { new, tmp, marker } = m.fresh;
            dirs.entry(m.announce.new_dir.clone()).or_insert(new);
            hooks.push((m.announce, m.hook, tmp, marker));
        }
        // With the session directories of the batch's notices.
        let failed = self.commit_group(dirs);
        for (announce, hook, tmp, marker) in hooks {
            let root = announce.root;
            let input = self::core::Input::DeliverySynced {
                fsync_error: failed.get(&announce.new_dir).cloned(),
                announce,
            };
            self.step(root, input, now);
            // Said (its audit line written in that step): its mark goes.
            let _ = tmp.unlink(&marker);
            self.hooks.start(hook);
        }
        self.log.forget_said();
    }

    /// Carries out the mail area's effects: a file routed, waiting
    /// deliveries offered again, a delivery's write
    /// ([`core::Effect::WriteInbox`]), its inbox watched, escalations run.
    /// An [`core::Effect::Announce`] is taken out of its step by
    /// [`Self::write_inbox`], which pairs it with the delivery's hook;
    /// nothing else returns it.
    pub(super) fn perform_mail(&mut self, effect: self::core::Effect, now: Now) {
        use self::core::{Effect, Input};
        let wall = now.wall;
        match effect {
            Effect::Route {
                root,
                session,
                file,
                own,
            } => self.route_file(root, &session, &file, wall, own),
            Effect::RecheckWaiting { root, session } => {
                self.step(root, Input::WaitingChanged { session }, now);
            }
            Effect::RecheckWaitingIfPresent { root, session } => {
                if self.roots.core(root).session_dir(&session).is_dir() {
                    self.step(root, Input::WaitingChanged { session }, now);
                    self.flush_outbox(wall);
                }
            }
            Effect::OfferWaiting {
                root,
                session,
                to,
                name,
            } => {
                self.step(root, Input::DeliveryDue { session, to, name }, now);
            }
            Effect::RunEscalations { root, session } => self.run_escalations(root, &session, wall),
            Effect::WriteInbox {
                root,
                delivery,
                bytes,
                routed_from,
            } => self.write_inbox(root, *delivery, &bytes, routed_from, wall),
            Effect::Watch { root, dir } => self.watch(root, &dir),
            Effect::Announce(a) => {
                tracing::error!(to = %a.delivery.to, message_id = %a.delivery.message_id, "a delivery announced outside its inbox write");
            }
            other => tracing::error!(?other, "not a mail effect"),
        }
    }

    /// Writes one delivery into its inbox ([`core::Effect::WriteInbox`]; not
    /// yet durable: see [`Self::flush_outbox`]) and tells the core how it
    /// went; a fresh one waits in `unsynced` with its hook, journalled
    /// before the write (at least once; started only once announced).
    pub(super) fn write_inbox(
        &mut self,
        i: RootId,
        d: routing::Delivery,
        bytes: &[u8],
        routed_from: Option<String>,
        wall: DateTime<Utc>,
    ) {
        let dir = self.roots.core(i).session_dir(&d.session);
        let path = crate::inbox::inbox_dir(&dir, &d.to)
            .join("new")
            .join(&d.name);
        let policy = &self.roots.core(i).policy;
        let hook = self.hooks.intend(
            &policy.messages,
            &policy.hooks,
            Notice {
                root: i,
                session: &d.session,
                from: &d.from,
                to: &d.to,
                message_id: &d.message_id,
                priority: d.priority,
                path: &path,
            },
        );
        let (written, synced) = match self.writer.deliver_unsynced(&dir, &d.to, &d.name, bytes) {
            Ok(Some(synced)) => (Written::Fresh, Some(synced)),
            Ok(None) => (Written::Before, None),
            Err(e) if squad_protocol::fsx::is_transient_io(&e) => {
                tracing::warn!(session = %d.session, to = %d.to, error = %e, "delivery failed; retrying");
                (Written::Transient, None)
            }
            Err(e) => (Written::Failed(e.to_string()), None),
        };
        // Whether an escalation is already due is judged at the shell's
        // reading after the write, as it always was.
        let now = Now { wall: Utc::now() };
        let input = self::core::Input::InboxWritten {
            delivery: Box::new(d),
            routed_from,
            written,
            at: wall,
        };
        let effects = self::core::Core::new(i, self.roots.core_mut(i)).step(input, now);
        let mut announce = None;
        let mut rest = Vec::with_capacity(effects.len());
        for e in effects {
            match e {
                self::core::Effect::Announce(a) => announce = Some(a),
                other => rest.push(other),
            }
        }
        self.perform(rest, now);
        match (announce, synced) {
            (Some(announce), Some(fresh)) => self.unsynced.push(Made {
                announce,
                hook,
                fresh,
            }),
            (None, Some(fresh)) => {
                // Not to be said: no mark of a delivery to say either.
                let _ = fresh.tmp.unlink(&fresh.marker);
                self.hooks.cancel(hook);
            }
            _ => self.hooks.cancel(hook),
        }
    }

    /// Escalates the unread messages of a session whose escalation time
    /// passed ([`core::escalations::run`]; one `stat` each says whether it
    /// is still unread).
    pub(super) fn run_escalations(&mut self, i: RootId, session: &str, wall: DateTime<Utc>) {
        let input = self::core::Input::EscalationsDue {
            session: session.to_string(),
            unread: &still_unread,
        };
        self.step(i, input, Now { wall });
    }
}

/// A fresh delivery written into its inbox, announced once the inbox is
/// durable: what the core said to announce, the hook journalled for it,
/// its inbox's `new/` to fsync and its mark of not yet audited.
pub(super) struct Made {
    announce: Box<Announce>,
    hook: hooks::Hook,
    fresh: crate::inbox::Fresh,
}

/// What the shell reads for a delivery the core decides on.
struct ShellFacts<'a> {
    /// With `cluster:`, the root's replication task.
    replica: Option<&'a crate::cluster::replicate::Handle>,
}

impl DeliveryFacts for ShellFacts<'_> {
    fn owner(
        &self,
        session: &str,
        source: &str,
        to: &str,
    ) -> Option<crate::cluster::replicate::Owner> {
        let owner = self.replica?.owner(session, source, to);
        if let crate::cluster::replicate::Owner::Elsewhere(host) = &owner {
            tracing::debug!(%to, %host, %source, "delivered on the recipient's host, not here");
        }
        Some(owner)
    }

    fn body(&self, path: &Path) -> BodyRead {
        match read_regular(path, MAX_FILE_BYTES) {
            Ok(b) => BodyRead::Bytes(b),
            // Out of descriptors: the machine's fault, tried again.
            Err(squad_protocol::fsx::ReadError::Io(e))
                if squad_protocol::fsx::is_transient_io(&e) =>
            {
                BodyRead::Transient
            }
            Err(_) => BodyRead::Gone,
        }
    }
}

/// Whether an entry of an inbox is still in `new/` (one `stat`, not
/// followed).
fn still_unread(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Whether the copy `name` in `inbox` (in `new/` or `cur/`) holds the
/// bytes whose fingerprint is `fingerprint` ([`core::mail::CopyHolds`]).
fn delivered_copy_of(inbox: &Path, name: &str, fingerprint: u64) -> bool {
    ["new", "cur"].iter().any(|sub| {
        squad_protocol::fsx::read_regular(&inbox.join(sub).join(name), MAX_FILE_BYTES)
            .is_ok_and(|b| crate::index::fingerprint(&b) == fingerprint)
    })
}
