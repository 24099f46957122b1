//! Message delivery: offering what a file asks to deliver, the outbox
//! (made critical first), the inbox writes and their hooks, escalations of
//! unread messages, and inbox acknowledgements.

use super::*;

impl Supervisor {
    /// Offers what one file asks to deliver, and schedules its reply
    /// deadline ([`core::Input::FileApplied`]). `own`: the file's bytes as
    /// squadd itself wrote them (a notice), delivered from memory instead
    /// of read back.
    pub(super) fn route_file(
        &mut self,
        i: RootId,
        name: &str,
        file: &str,
        wall: DateTime<Utc>,
        own: Option<std::sync::Arc<[u8]>>,
    ) {
        match self.message_id_clash(i, name, file) {
            Clash::None => {}
            Clash::DeliveredBefore => return,
            Clash::Refused(path, kind) => {
                self.log.emit(i, Some(name), Some(&path), kind);
                return;
            }
        }
        let input = self::core::Input::FileApplied {
            session: name.to_string(),
            file: file.to_string(),
            own,
        };
        self.step(i, input, Now { wall });
    }

    /// Whether `file` reuses a message id: a reused id is reported
    /// (duplicate-message-id), not delivered, since the recipient would
    /// take it for the first one. It is refused visibly: an audited event,
    /// and a notice to its sender (docs/daemon.md, Messages). The first by
    /// name keeps the id, unless another file with it was delivered already
    /// (a later file whose name sorts first): that one keeps it. Reads the
    /// inbox copies only when ids clash.
    fn message_id_clash(&self, i: RootId, name: &str, file: &str) -> Clash {
        let r = self.roots.core(i);
        let Some(core) = r.sessions.get(name) else {
            return Clash::None;
        };
        let Some(f) = core.index().files.get(file) else {
            return Clash::None;
        };
        let others = core.others_with_message_id(file);
        if others.is_empty() {
            return Clash::None;
        }
        let mail = r.mail.get(name);
        let dir = &core.index().dir;
        // Whether `of`'s message sits in its recipient's inbox. Two files
        // with the same id may share an inbox name: the copy's content says
        // whose it is.
        let delivered = |of: &str| {
            core.index().files.get(of).is_some_and(|o| {
                routing::file_deliveries(&r.root, name, dir, o)
                    .iter()
                    .any(|d| {
                        mail.is_some_and(|m| m.is_delivered(&d.to, &d.name))
                            && delivered_copy_of(dir, &d.to, &d.name, o.fingerprint)
                    })
            })
        };
        // A file delivered before the clash arose is not refused (a restart
        // routes every file again).
        if delivered(file) {
            return if core.reuses_message_id(file) {
                Clash::DeliveredBefore
            } else {
                Clash::None
            };
        }
        let kept_by = core
            .message_id_kept_by(file)
            .or_else(|| others.iter().copied().find(|o| delivered(o)));
        let Some(kept_by) = kept_by else {
            return Clash::None;
        };
        let crate::index::Entry::Message(m) = &f.entry else {
            return Clash::DeliveredBefore;
        };
        Clash::Refused(
            f.path_in(dir),
            EventKind::MessageRefused {
                message_id: m.message_id.clone(),
                from: m.from_agent.clone(),
                to: m.to_agent.clone(),
                file: file.to_string(),
                kept_by: kept_by.to_string(),
            },
        )
    }

    /// Makes the deliveries in the outbox, critical first, then by age, as
    /// one group commit: each message is written and renamed into its
    /// inbox, then each inbox's `new/` and each session directory the
    /// batch's notices went into is fsynced once for the whole batch
    /// ([`Self::commit_group`]); only then are the deliveries announced and
    /// their hooks started (a hook never tells of a message a crash could
    /// still lose).
    pub(super) fn flush_outbox(&mut self, wall: DateTime<Utc>) {
        let mut outbox = std::mem::take(&mut self.outbox);
        self::core::batch::outbox_order(&mut outbox);
        let mut dirs: BTreeMap<PathBuf, crate::safefs::Dir> = BTreeMap::new();
        let mut made = Vec::new();
        for (i, d) in outbox {
            if let Some((m, dir)) = self.deliver(i, d, wall) {
                dirs.entry(m.new_dir.clone()).or_insert(dir);
                made.push(m);
            }
        }
        // With the session directories of the batch's notices (perfe).
        let failed = self.commit_group(dirs);
        for m in made {
            self.announce(m, &failed);
        }
    }

    /// Writes one delivery into its inbox (not yet durable: see
    /// [`Self::flush_outbox`]); a fresh one is returned with its inbox's
    /// `new/` directory.
    fn deliver(
        &mut self,
        i: RootId,
        d: routing::Delivery,
        wall: DateTime<Utc>,
    ) -> Option<(Made, crate::safefs::Dir)> {
        let dir = self.roots.core(i).session_dir(&d.session);
        // Never recreate a session that is going away.
        if !self.roots.core(i).sessions.contains_key(&d.session) {
            return None;
        }
        // Replication call site: with `cluster:`, a message replicated to
        // every checkout is delivered only on its recipient's host
        // (docs/cluster.md, "Cross-host delivery"); squadd's own notices
        // stay local.
        let source = match &d.body {
            routing::Body::File(path) => path.file_name(),
            routing::Body::Routed { from_file, .. } => from_file.file_name(),
            routing::Body::Text { .. } => None,
        };
        if let (Some(replica), Some(source)) = (&self.roots.shell(i).replica, source) {
            let source = source.to_string_lossy();
            match replica.owner(&d.session, &source, &d.to) {
                crate::cluster::replicate::Owner::Here => {}
                crate::cluster::replicate::Owner::Elsewhere(host) => {
                    tracing::debug!(to = %d.to, %host, message_id = %d.message_id, "delivered on the recipient's host, not here");
                    return None;
                }
                // The presence table is loading (a restart): asked again
                // shortly, like a delivery that failed for a passing reason.
                crate::cluster::replicate::Owner::Unknown => {
                    self.step(
                        i,
                        self::core::Input::DeliveryFailed(Box::new(d)),
                        Now { wall },
                    );
                    return None;
                }
            }
        }
        let (bytes, routed_from) = match &d.body {
            // squadd's own notice: delivered from memory, never read back.
            routing::Body::Text { bytes, .. } => (bytes.to_vec(), None),
            routing::Body::File(path) => match read_regular(path, MAX_FILE_BYTES) {
                Ok(b) => (b, None),
                // Out of descriptors: the machine's fault, tried again.
                Err(squad_protocol::fsx::ReadError::Io(e))
                    if squad_protocol::fsx::is_transient_io(&e) =>
                {
                    self.step(
                        i,
                        self::core::Input::DeliveryFailed(Box::new(d)),
                        Now { wall },
                    );
                    return None;
                }
                // Vanished or changed into something unreadable: its own
                // event will bring it back if it returns.
                Err(_) => return None,
            },
            routing::Body::Routed { routed, rel, .. } => match routed.render(rel) {
                Some(text) => (text.into_bytes(), Some(rel.clone())),
                None => return None,
            },
        };
        let new_dir = crate::inbox::inbox_dir(&dir, &d.to).join("new");
        let path = new_dir.join(&d.name);
        // Journalled before the delivery, so no delivered message loses its
        // hook to a crash (at least once; started only if fresh).
        let hook = self.hooks.intend(
            &self.roots.core(i).policy.messages,
            &self.roots.core(i).policy.hooks,
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
        let result = self.writer.deliver_unsynced(&dir, &d.to, &d.name, &bytes);
        match result {
            Ok(fresh) => {
                // Whether an escalation is already due is judged at the
                // shell's reading after the write, as it always was.
                let now = Now { wall: Utc::now() };
                let input = self::core::Input::Delivered {
                    delivery: &d,
                    at: wall,
                };
                let effects = self::core::Core::new(i, self.roots.core_mut(i)).step(input, now);
                self.perform(effects, now);
                self.watch(i, &new_dir);
                let Some(synced) = fresh else {
                    self.hooks.cancel(hook);
                    return None;
                };
                let late = routing::late(&self.roots.core(i).policy.messages, &d, wall);
                Some((
                    Made {
                        root: i,
                        d,
                        path,
                        hook,
                        routed_from,
                        late,
                        new_dir,
                    },
                    synced,
                ))
            }
            // Out of descriptors (EMFILE) and the like pass: a delivery
            // failing so is tried again, never dropped (and not audited at
            // every retry).
            Err(e) if squad_protocol::fsx::is_transient_io(&e) => {
                self.hooks.cancel(hook);
                tracing::warn!(session = %d.session, to = %d.to, error = %e, "delivery failed; retrying");
                self.step(
                    i,
                    self::core::Input::DeliveryFailed(Box::new(d)),
                    Now { wall },
                );
                None
            }
            Err(e) => {
                self.hooks.cancel(hook);
                self.log.emit(
                    i,
                    Some(&d.session),
                    None,
                    EventKind::OutputFailed {
                        output: format!("inbox of {}", d.to),
                        error: e.to_string(),
                    },
                );
                None
            }
        }
    }

    /// A delivery made durable (its inbox fsynced): the event, then the
    /// recipient's hook. `failed`: inboxes whose fsync failed (the message
    /// is there for readers, but a crash may lose it: said so).
    fn announce(&mut self, m: Made, failed: &BTreeMap<PathBuf, String>) {
        let Made {
            root: i,
            d,
            path,
            hook,
            routed_from,
            late,
            new_dir,
        } = m;
        if let Some(error) = failed.get(&new_dir) {
            self.log.emit(
                i,
                Some(&d.session),
                Some(&path),
                EventKind::OutputFailed {
                    output: format!("inbox of {}", d.to),
                    error: format!("fsync of {}: {error}", new_dir.display()),
                },
            );
        }
        self.log.emit(
            i,
            Some(&d.session),
            Some(&path),
            EventKind::MessageDelivered {
                to: d.to.clone(),
                message_id: d.message_id.clone(),
                priority: d.priority.to_string(),
                late,
                routed_from,
            },
        );
        self.hooks.start(hook);
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

    /// An entry of an unread inbox appeared or went (acknowledged): one
    /// `stat`, and the unread counters follow.
    pub(super) fn inbox_changed(
        &mut self,
        i: RootId,
        session: &str,
        agent: String,
        file: String,
        path: &Path,
    ) {
        let present = std::fs::symlink_metadata(path).ok().map(|m| {
            m.modified()
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now())
        });
        let input = self::core::Input::InboxEntry {
            session: session.to_string(),
            agent,
            file,
            present,
        };
        self.step(i, input, Now { wall: Utc::now() });
    }
}

/// A fresh delivery written into its inbox, announced once the inbox is
/// durable.
struct Made {
    root: RootId,
    d: routing::Delivery,
    path: PathBuf,
    hook: hooks::Hook,
    routed_from: Option<String>,
    late: bool,
    new_dir: PathBuf,
}

/// Whether an inbox entry is still in `new/` (one `stat`, not followed).
fn still_unread(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Whether the inbox copy `name` of `to` (in `new/` or `cur/`) holds the
/// bytes whose fingerprint is `fingerprint`: a delivered message is its
/// file's bytes.
/// What a reused message id means for a file about to be routed.
enum Clash {
    /// No clash (or this file keeps the id): route it.
    None,
    /// Delivered before the clash arose, and its id is reused: nothing more.
    DeliveredBefore,
    /// Refused: the event to emit (its file's path, the event).
    Refused(PathBuf, EventKind),
}

fn delivered_copy_of(
    session_dir: &std::path::Path,
    to: &str,
    name: &str,
    fingerprint: u64,
) -> bool {
    let inbox = crate::inbox::inbox_dir(session_dir, to);
    ["new", "cur"].iter().any(|sub| {
        squad_protocol::fsx::read_regular(&inbox.join(sub).join(name), MAX_FILE_BYTES)
            .is_ok_and(|b| crate::index::fingerprint(&b) == fingerprint)
    })
}
