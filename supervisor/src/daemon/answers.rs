//! Control-socket answers: what squadd replies to `status`, `events`,
//! `health` and `ping`, built from what it holds in memory, and `record`
//! (lock events squadctl made, emitted like squadd's own).

use super::EventLoop;
use super::core::RootId;
use super::server::Reply;
use crate::control::{Method, Response};
use crate::status::{DaemonReport, RootReport, StatusReport, session_report};
use chrono::Utc;
use squad_protocol::Severity;
use std::path::Path;

/// The one-line summary (systemd `STATUS=`).
pub(crate) fn summary(sup: &EventLoop) -> String {
    let sessions: usize = sup.roots.cores().map(|(_, r)| r.sessions.len()).sum();
    let problems: usize = sup
        .roots
        .cores()
        .flat_map(|(_, r)| r.sessions.values())
        .map(|s| {
            s.index()
                .diagnostics()
                .filter(|d| d.severity == Severity::Error)
                .count()
        })
        .sum();
    let overdue: usize = sup
        .roots
        .cores()
        .flat_map(|(_, r)| r.sessions.values())
        .map(|s| s.tasks().values().filter(|t| t.overdue).count())
        .sum();
    format!(
        "{} root(s), {sessions} session(s), {problems} validation error(s), {overdue} overdue task(s)",
        sup.roots.len()
    )
}

fn root_report(sup: &EventLoop, i: RootId, session: Option<&str>) -> RootReport {
    let r = sup.roots.core(i);
    RootReport {
        root: r.root.display().to_string(),
        missing: r.missing,
        moved_to: r.moved_to.clone(),
        policy_refused: r.policy_refused.clone(),
        next_retention_run: r.next_gc,
        skills: r.skills.clone(),
        team: r.team.clone(),
        hooks: Some(sup.hooks.report(i, &r.policy.messages, &r.policy.hooks)),
        sessions: r
            .sessions
            .iter()
            .filter(|(name, _)| session.is_none_or(|s| s == name.as_str()))
            .map(|(name, s)| {
                let mut report = session_report(
                    s.index(),
                    &s.view(),
                    crate::status::session_locks(&r.locks, name),
                );
                add_messages(
                    &mut report,
                    s,
                    r.mail.get(name),
                    r.state.escalated.get(name),
                    r.policy.notices.lead.as_deref(),
                );
                report
            })
            .collect(),
    }
}

/// Fills in a session report's message figures from the daemon's counters
/// (no inbox is listed).
fn add_messages(
    report: &mut crate::status::SessionReport,
    session: &super::session::SessionCore,
    mail: Option<&super::routing::Mailbox>,
    escalated: Option<&std::collections::BTreeSet<String>>,
    lead: Option<&str>,
) {
    report.recipients_without_task = crate::status::recipients_without_task(session.index());
    let Some(mail) = mail else { return };
    // A notice whose fact is gone is moot, not an overdue reply.
    let live = std::cell::OnceCell::new();
    let moot = |id: &str| {
        let live = live.get_or_init(|| {
            crate::notice_ids::live_notice_ids(
                &session.index().name,
                session.index(),
                session.tasks().values(),
                lead,
            )
        });
        crate::notice_ids::is_moot(id, live)
    };
    let now = Utc::now();
    for (to, name, unread) in mail.unread() {
        *report
            .unread
            .entry(unread.priority.to_string())
            .or_insert(0) += 1;
        let age = (now - unread.delivered_at).num_seconds().max(0) as u64;
        report.oldest_unread_secs = Some(report.oldest_unread_secs.map_or(age, |o| o.max(age)));
        if let Some(escalated) = escalated
            && let Some(id) = mail.message_id(to, name)
            && escalated.contains(&id)
            && !moot(&id)
        {
            report.escalated_to.insert(id.clone(), to.to_string());
            report.escalations.push(id);
        }
    }
}

/// Answers one request that arrived on root `i`'s socket.
pub(crate) fn answer(sup: &mut EventLoop, i: RootId, method: Method) -> Reply {
    let json = |v: Result<serde_json::Value, serde_json::Error>| {
        Reply::Once(match v {
            Ok(v) => Response::ok(v),
            Err(e) => Response::error(e.to_string()),
        })
    };
    match method {
        Method::Ping => json(Ok(serde_json::json!("pong"))),
        Method::Status { session } => {
            let report = StatusReport {
                daemon: DaemonReport::Running {
                    pid: std::process::id(),
                    uptime_secs: sup.started.elapsed().as_secs(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    roots: sup
                        .roots
                        .cores()
                        .map(|(_, r)| r.root.display().to_string())
                        .collect(),
                    last_event: sup.log.last().cloned().map(Box::new),
                    polling: sup.intake.polling(),
                    warnings: super::logging::recent(),
                },
                // The socket belongs to one root; report that root.
                roots: vec![root_report(sup, i, session.as_deref())],
            };
            json(serde_json::to_value(report))
        }
        Method::Events { follow } => {
            // Each socket belongs to one root: its backlog and its live
            // stream carry that root's events only.
            let root = sup.roots.core(i).root.display().to_string();
            let backlog = sup.log.recent_of(&root);
            if follow {
                Reply::Stream {
                    backlog,
                    events: sup.log.subscribe(),
                    root,
                }
            } else {
                json(serde_json::to_value(backlog))
            }
        }
        // Lock events squadctl made: numbered, audited and streamed like
        // squadd's own (other kinds are squadd's alone to report).
        Method::Record { events } => {
            for e in events.into_iter().filter(|e| e.kind.is_lock()) {
                let path = e.path.as_deref().map(Path::new);
                sup.log.emit(i, e.session.as_deref(), path, e.kind);
            }
            json(Ok(serde_json::Value::Null))
        }
        // Cluster call site: on a follower, the edit is the leader's to
        // apply (docs/cluster.md, "Session edits on a follower").
        Method::SessionEdit { session, edit } => match &sup.roots.shell(i).cluster {
            Some(c) if c.leader_epoch().is_none() => Reply::Later(c.forward_edit(&session, &edit)),
            _ => Reply::Once(sup.session_edit(i, &session, edit)),
        },
        Method::ForwardedEdit {
            session,
            edit,
            epoch,
        } => {
            let leading = sup
                .roots
                .shell(i)
                .cluster
                .as_ref()
                .and_then(|c| c.leader_epoch());
            Reply::Once(if crate::cluster::edits::may_apply(leading, epoch) {
                sup.session_edit(i, &session, edit)
            } else {
                crate::cluster::edits::not_leader()
            })
        }
        Method::Runs {
            action,
            session,
            task,
            text,
        } => Reply::Once(sup.answer_runs(
            i,
            &action,
            session.as_deref(),
            task.as_deref(),
            text.as_deref(),
        )),
        // Replication call site: presence registrations and the replication
        // section of `cluster status`, answered from the replication task's
        // shared view (no NATS round trip).
        Method::Cluster { action, agent, .. } if action == "present" || action == "replication" => {
            match (&sup.roots.shell(i).replica, action.as_str()) {
                (Some(r), "present") => {
                    r.present(&agent);
                    json(Ok(serde_json::Value::Null))
                }
                (Some(r), _) => json(Ok(r.status())),
                (None, _) => Reply::Once(Response::error(
                    "this project has no `cluster:` section in .squad/policies.yaml (docs/cluster.md)",
                )),
            }
        }
        // Cluster call site: answered by the root's cluster task, so a slow
        // NATS never holds up squadd's loop.
        Method::Cluster {
            action,
            targets,
            agent,
            task,
            session,
        } => match &sup.roots.shell(i).cluster {
            Some(handle) => Reply::Later(handle.ask(crate::cluster::daemon::Ask {
                action,
                targets,
                agent,
                task,
                session,
            })),
            None if action == "status" => json(Ok(serde_json::json!({"enabled": false}))),
            None => Reply::Once(Response::error(
                "this project has no `cluster:` section in .squad/policies.yaml (docs/cluster.md)",
            )),
        },
        Method::Health => json(serde_json::to_value(super::health::measure(
            &sup.supervision(),
        ))),
    }
}
