//! Session edits on a follower (docs/cluster.md, "Session edits on a
//! follower"): with `cluster:`, session-status.md has one writer, the
//! leader, so a `squadctl session complete|fail|phase|gate` that reaches a
//! follower's squadd is not applied there but forwarded to the leader over
//! NATS core request-reply on [`subject`] (`squad.<project>.edit`).
//!
//! - **Leader side** ([`serve`]): the squadd that leads subscribes to the
//!   subject on its election and unsubscribes on its loss. Each request is
//!   handed to squadd's loop ([`ToLoop`]) as a
//!   [`crate::control::Method::ForwardedEdit`],
//!   applied there with the same code path as a local edit (and only while
//!   the lease it was received under is still valid), and answered with the
//!   outcome, the leader's host and its epoch. The written file reaches
//!   every host through the leader's owned-output publication.
//! - **Follower side** ([`forward`]): squadd sends the request and retries
//!   (same request id) while nobody answers, until [`bound`]; then the edit
//!   is refused with a clear error and nothing is applied locally.
//!
//! Idempotence: the leader remembers the replies of the last
//! [`REMEMBERED`] request ids, so a retried forward (its first attempt
//! applied, its answer lost or late) is answered from memory, never
//! applied twice. A retry that reaches another leader after a failover is
//! applied again: the edits set fixed values (`phase`, `gate`), `complete`
//! keeps the first `completed_at` and `fail` with the same reason keeps the
//! first `failed_at` (policies' `session_edit::plan`), so the file ends the
//! same; only the answer's `changed` may then read `false`.

use super::leader::{Leadership, News};
use crate::control::Response;
use crate::session_edit::EditOutcome;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use squad_policies::cluster::ClusterPolicy;
use squad_policies::session_edit::SessionEdit;
use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// How many answered request ids the leader remembers.
pub(crate) const REMEMBERED: usize = 256;

/// The longest a follower waits for a leader: squadctl gives squadd 10 s
/// for a session edit, and the error must reach it before that.
const MAX_BOUND: Duration = Duration::from_secs(8);

/// The longest one attempt waits for its answer (the leader applies an edit
/// in milliseconds; a longer silence is a lost message or a dead leader).
const ATTEMPT: Duration = Duration::from_secs(3);

/// The subject the project's leader answers edits on.
pub(crate) fn subject(project: &str) -> String {
    format!("squad.{project}.edit")
}

/// How long a follower looks for a leader: the lease TTL (a live leader
/// renews within it; a dead one is replaced within two), at most
/// [`MAX_BOUND`].
pub(crate) fn bound(policy: &ClusterPolicy) -> Duration {
    policy.lease_ttl.min(MAX_BOUND)
}

/// A forwarded edit, as sent on [`subject`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EditRequest {
    /// Unique per edit (the follower's host, its pid, a counter): a retry
    /// carries the same id.
    pub id: String,
    /// The host that forwarded it.
    pub from: String,
    /// The session directory name.
    pub session: String,
    /// The change.
    pub edit: SessionEdit,
}

/// What the leader made of a forwarded edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub(crate) enum Outcome {
    /// Applied (or found already so): what the file now says.
    Applied {
        /// As a local edit answers it.
        result: Box<EditOutcome>,
    },
    /// A rule refused it (exit 1 on the follower).
    Refused {
        /// Why, as the leader said it.
        why: String,
    },
    /// It could not be made (exit 2): an unknown session, an unreadable
    /// file.
    Failed {
        /// Why, as the leader said it.
        error: String,
    },
    /// The squadd that received it does not lead (any more): not applied;
    /// the follower tries again.
    NotLeader,
}

/// The leader's answer, as sent back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EditReply {
    /// The request's id.
    pub id: String,
    /// The host that answered.
    pub host: String,
    /// The epoch it led with when it applied the edit (`None` with
    /// [`Outcome::NotLeader`]).
    pub epoch: Option<u64>,
    /// What it made of it.
    pub outcome: Outcome,
}

/// The key squadd's loop answers a forwarded edit with when the lease it
/// was received under is no longer valid.
const NOT_LEADER: &str = "not_leader";

/// squadd's loop: whether a forwarded edit received under `asked` may be
/// applied now that this host leads with `leading` (the same lease, still
/// valid; a later election of this host is a new epoch: the follower asks
/// again).
pub(crate) fn may_apply(leading: Option<u64>, asked: u64) -> bool {
    leading == Some(asked)
}

/// squadd's loop: the answer to a forwarded edit it may not apply.
pub(crate) fn not_leader() -> Response {
    Response::ok(serde_json::json!({ NOT_LEADER: true }))
}

/// The loop's answer to a forwarded edit (as a local edit answers it) as
/// the outcome sent to the follower.
pub(crate) fn outcome_of(r: Response) -> Outcome {
    if !r.ok {
        return Outcome::Failed {
            error: r.error.unwrap_or_else(|| "no reason given".into()),
        };
    }
    let v = r.result.unwrap_or_default();
    if v.get(NOT_LEADER).is_some() {
        return Outcome::NotLeader;
    }
    if let Some(why) = v.get("refused").and_then(serde_json::Value::as_str) {
        return Outcome::Refused {
            why: why.to_string(),
        };
    }
    match serde_json::from_value::<EditOutcome>(v) {
        Ok(result) => Outcome::Applied {
            result: Box::new(result),
        },
        Err(e) => Outcome::Failed {
            error: format!("squadd answered oddly: {e}"),
        },
    }
}

/// The follower's answer to squadctl for the leader's `reply` (`None`: not
/// an answer; look for the leader again). The same shapes a local edit
/// answers with, the applying host and epoch added.
pub(crate) fn response_of(reply: EditReply) -> Option<Response> {
    let host = crate::text::escape(&reply.host);
    match reply.outcome {
        Outcome::Applied { mut result } => {
            result.host = Some(reply.host);
            result.epoch = reply.epoch;
            Some(match serde_json::to_value(result) {
                Ok(v) => Response::ok(v),
                Err(e) => Response::error(e.to_string()),
            })
        }
        Outcome::Refused { why } => Some(Response::ok(serde_json::json!({
            "refused": format!("{why} (refused by the leader, {host})"),
        }))),
        Outcome::Failed { error } => Some(Response::error(format!(
            "the leader ({host}) did not apply the edit: {error}"
        ))),
        Outcome::NotLeader => None,
    }
}

/// What one attempt of a forward gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// The leader's reply.
    Replied(Box<EditReply>),
    /// Nobody subscribes to the subject: no leader (the server said so at
    /// once, so the request reached nobody).
    NoResponders,
    /// Sent, no answer in time, or another failure after sending: the
    /// leader may have received it.
    Unanswered(String),
    /// Not sent: this host is not connected to NATS.
    NotSent(String),
}

/// The decision after an attempt: the answer for squadctl, or `None` to
/// try again while the bound lasts.
pub(crate) fn decide(attempt: Attempt) -> Option<Response> {
    match attempt {
        Attempt::Replied(r) => response_of(*r),
        Attempt::NoResponders | Attempt::Unanswered(_) | Attempt::NotSent(_) => None,
    }
}

/// The error once the bound ran out: "no leader, not applied" when no
/// attempt may have reached one, else that it may have been applied.
pub(crate) fn gave_up(project: &str, bound: Duration, attempts: &[Attempt]) -> Response {
    let secs = bound.as_secs_f64();
    let maybe = attempts.iter().rev().find_map(|a| match a {
        Attempt::Unanswered(why) => Some(why.clone()),
        _ => None,
    });
    match maybe {
        Some(why) => Response::error(format!(
            "the leader of project {project} did not answer within {secs:.0} s ({why}): the edit may or may not have been applied; look at session-status.md (`squadctl status`) before trying again, and at `squadctl cluster status`"
        )),
        None => {
            let why = attempts
                .iter()
                .rev()
                .find_map(|a| match a {
                    Attempt::NotSent(why) => Some(why.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "no squadd leads it".into());
            Response::error(format!(
                "no leader: the edit was not applied (project {project}: {why} within {secs:.0} s; session edits on a follower are applied by the leader); see `squadctl cluster status`"
            ))
        }
    }
}

/// The replies a leader gave, by request id, the oldest forgotten first.
#[derive(Debug, Default)]
pub(crate) struct Remembered(VecDeque<EditReply>);

impl Remembered {
    /// The reply given to `id`, if remembered.
    pub(crate) fn get(&self, id: &str) -> Option<&EditReply> {
        self.0.iter().find(|r| r.id == id)
    }

    /// Remembers `reply` (a not-leader answer is not an answer: the edit
    /// was not applied, a retry must be).
    pub(crate) fn keep(&mut self, reply: &EditReply) {
        if reply.outcome == Outcome::NotLeader {
            return;
        }
        if self.0.len() >= REMEMBERED {
            self.0.pop_front();
        }
        self.0.push_back(reply.clone());
    }
}

/// Where forwarded edits enter squadd's loop (`daemon/server.rs`,
/// `forwarded_edits`): given the session, the edit and the epoch it was
/// received under, the loop's answer, as a local edit answers.
pub(crate) type ToLoop =
    std::sync::Arc<dyn Fn(String, SessionEdit, u64) -> oneshot::Receiver<Response> + Send + Sync>;

/// What the leader side starts with once connected: the lease's news and
/// the way into squadd's loop.
type LeaderSide = (mpsc::UnboundedReceiver<News>, ToLoop);

/// Both sides of one root's forwarded edits: held by the cluster task's
/// handle (the follower's side) and given the connection once it is made.
#[derive(Clone)]
pub(crate) struct Edits {
    policy: ClusterPolicy,
    host: String,
    client: Arc<OnceLock<async_nats::Client>>,
    news: mpsc::UnboundedSender<News>,
    pending: Arc<std::sync::Mutex<Option<LeaderSide>>>,
}

impl Edits {
    /// The edits of a root with `policy`, this host being `host`; edits it
    /// leads for enter squadd's loop through `to_loop`.
    pub(crate) fn new(policy: ClusterPolicy, host: String, to_loop: ToLoop) -> Edits {
        let (news, rx) = mpsc::unbounded_channel();
        Edits {
            policy,
            host,
            client: Arc::new(OnceLock::new()),
            news,
            pending: Arc::new(std::sync::Mutex::new(Some((rx, to_loop)))),
        }
    }

    /// The lease task's news, heard here too (subscribe on election,
    /// unsubscribe on loss) before `then` hears it.
    pub(crate) fn hear(
        &self,
        then: Box<dyn Fn(News) + Send + Sync>,
    ) -> Box<dyn Fn(News) + Send + Sync> {
        let tx = self.news.clone();
        Box::new(move |n: News| {
            let _ = tx.send(n.clone());
            then(n);
        })
    }

    /// The connection is made: forwards can go, and the leader side starts
    /// (on squadd's runtime). Once; later calls do nothing.
    pub(crate) fn connected(&self, client: async_nats::Client, leadership: Leadership) {
        if self.client.set(client.clone()).is_err() {
            return;
        }
        let taken = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((news, to_loop)) = taken {
            tokio::spawn(serve(
                client,
                subject(&self.policy.project),
                self.host.clone(),
                leadership,
                news,
                to_loop,
            ));
        }
    }

    /// Forwards an edit to the leader: the receiver gets squadctl's answer
    /// (see [`forward`]).
    pub(crate) fn forward(&self, session: &str, edit: &SessionEdit) -> oneshot::Receiver<Response> {
        let (tx, rx) = oneshot::channel();
        let request = EditRequest {
            id: request_id(&self.host),
            from: self.host.clone(),
            session: session.to_string(),
            edit: edit.clone(),
        };
        let client = self.client.clone();
        let project = self.policy.project.clone();
        let bound = bound(&self.policy);
        tokio::spawn(async move {
            let r = forward(client, &project, request, bound).await;
            let _ = tx.send(r);
        });
        rx
    }
}

/// A request id no other edit of any host shares: the host id, squadd's
/// pid, a counter of this squadd and the time.
fn request_id(host: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    format!("{host}|{}|{n}|{nanos}", std::process::id())
}

/// The follower's side: sends `request` to the leader and waits for its
/// answer, trying again (the same id) while no leader answers, for at most
/// `bound`. Never applies anything itself.
pub(crate) async fn forward(
    client: Arc<OnceLock<async_nats::Client>>,
    project: &str,
    request: EditRequest,
    bound: Duration,
) -> Response {
    let deadline = tokio::time::Instant::now() + bound;
    let body = match serde_json::to_vec(&request) {
        Ok(b) => b,
        Err(e) => return Response::error(format!("cannot encode the edit: {e}")),
    };
    let subject = subject(project);
    let mut attempts = Vec::new();
    let mut pause = Duration::from_millis(100);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return gave_up(project, bound, &attempts);
        }
        let attempt = match client.get() {
            None => Attempt::NotSent("this host has no NATS connection".into()),
            // A request sent while disconnected could be delivered after
            // the follower gave up: not sent then.
            Some(c) if c.connection_state() != async_nats::connection::State::Connected => {
                Attempt::NotSent(format!(
                    "this host is not connected to NATS ({:?})",
                    c.connection_state()
                ))
            }
            Some(c) => {
                let asked = async_nats::Request::new()
                    .payload(body.clone().into())
                    .timeout(Some(left.min(ATTEMPT)));
                match c.send_request(subject.clone(), asked).await {
                    Ok(m) => match serde_json::from_slice::<EditReply>(&m.payload) {
                        Ok(r) if r.id == request.id => Attempt::Replied(Box::new(r)),
                        Ok(r) => {
                            Attempt::Unanswered(format!("an answer to another edit ({})", r.id))
                        }
                        Err(e) => Attempt::Unanswered(format!("an unreadable answer: {e}")),
                    },
                    Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => {
                        Attempt::NoResponders
                    }
                    Err(e) => Attempt::Unanswered(e.to_string()),
                }
            }
        };
        if let Some(r) = decide(attempt.clone()) {
            return r;
        }
        attempts.push(attempt);
        // Also after a `not-leader` answer: a lapsed leader answers at
        // once, and asking it again at once would only spin.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// The leader's side of one root: subscribed to the subject while this
/// host leads (from its election to its loss), each edit applied by
/// squadd's loop, one at a time (a retry waits for the first attempt's
/// answer, then is answered from memory).
async fn serve(
    client: async_nats::Client,
    subject: String,
    host: String,
    leadership: Leadership,
    mut news: mpsc::UnboundedReceiver<News>,
    to_loop: ToLoop,
) {
    let mut sub: Option<async_nats::Subscriber> = None;
    let mut remembered = Remembered::default();
    // Elected before this task started (news queued) or not at all yet.
    loop {
        let next = async {
            match sub.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            n = news.recv() => match n {
                Some(News::Elected { epoch }) => {
                    if sub.is_none() {
                        match client.subscribe(subject.clone()).await {
                            Ok(s) => {
                                tracing::info!(epoch, %subject, "cluster: answering session edits");
                                sub = Some(s);
                            }
                            Err(e) => tracing::error!(error = %e, %subject, "cluster: cannot answer session edits"),
                        }
                    }
                }
                Some(News::Lost { .. }) => {
                    if let Some(mut s) = sub.take() {
                        let _ = s.unsubscribe().await;
                        tracing::info!(%subject, "cluster: no longer answering session edits");
                    }
                }
                None => return,
            },
            m = next => match m {
                Some(m) => answer(&client, &host, &leadership, &to_loop, &mut remembered, m).await,
                // Closed under us: subscribed again at the next election.
                None => sub = None,
            },
        }
    }
}

/// Answers one forwarded edit.
async fn answer(
    client: &async_nats::Client,
    host: &str,
    leadership: &Leadership,
    to_loop: &ToLoop,
    remembered: &mut Remembered,
    m: async_nats::Message,
) {
    let Some(to) = m.reply else { return };
    let reply = match serde_json::from_slice::<EditRequest>(&m.payload) {
        Err(e) => EditReply {
            id: String::new(),
            host: host.to_string(),
            epoch: leadership.epoch(),
            outcome: Outcome::Failed {
                error: format!("an unreadable edit request: {e}"),
            },
        },
        Ok(req) => match (remembered.get(&req.id), leadership.epoch()) {
            (Some(r), _) => r.clone(),
            (None, None) => EditReply {
                id: req.id,
                host: host.to_string(),
                epoch: None,
                outcome: Outcome::NotLeader,
            },
            (None, Some(epoch)) => {
                tracing::info!(session = %req.session, from = %req.from, edit = %req.edit.said(), "cluster: a forwarded session edit");
                let r = to_loop(req.session, req.edit, epoch)
                    .await
                    .unwrap_or_else(|_| Response::error("squadd is shutting down"));
                let reply = EditReply {
                    id: req.id,
                    host: host.to_string(),
                    epoch: Some(epoch),
                    outcome: outcome_of(r),
                };
                remembered.keep(&reply);
                reply
            }
        },
    };
    match serde_json::to_vec(&reply) {
        Ok(body) => {
            if let Err(e) = client.publish(to, body.into()).await {
                tracing::warn!(error = %e, "cluster: cannot answer a forwarded session edit");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cluster: cannot encode an edit's answer"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use squad_protocol::model::{Gate, Phase};

    fn outcome() -> EditOutcome {
        EditOutcome {
            session: "20240115T100000Z-x".into(),
            said: "phase design".into(),
            changed: true,
            via: "squadd".into(),
            status: "active".into(),
            phase: Some("design".into()),
            validation_gates: serde_json::Value::Null,
            completed_at: None,
            failed_at: None,
            failure_reason: None,
            host: None,
            epoch: None,
        }
    }

    #[test]
    fn requests_and_replies_round_trip_on_the_wire() {
        let req = EditRequest {
            id: request_id("build-3:/srv/x"),
            from: "build-3:/srv/x".into(),
            session: "20240115T100000Z-x".into(),
            edit: SessionEdit::Gate {
                gate: Phase::Design,
                status: Gate::Passed,
            },
        };
        let line = serde_json::to_string(&req).unwrap();
        assert!(
            line.contains(r#""edit":{"edit":"gate","gate":"design","status":"passed"}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<EditRequest>(&line).unwrap(), req);
        assert_ne!(request_id("h"), request_id("h"), "ids are unique");
        for outcome in [
            Outcome::Applied {
                result: Box::new(outcome()),
            },
            Outcome::Refused { why: "no".into() },
            Outcome::Failed {
                error: "gone".into(),
            },
            Outcome::NotLeader,
        ] {
            let reply = EditReply {
                id: "i".into(),
                host: "h".into(),
                epoch: Some(7),
                outcome,
            };
            let line = serde_json::to_string(&reply).unwrap();
            assert_eq!(serde_json::from_str::<EditReply>(&line).unwrap(), reply);
        }
        assert_eq!(subject("web-shop"), "squad.web-shop.edit");
    }

    /// The follower's answer to `outcome` from leader `h:/a` at epoch 12.
    fn from_leader(outcome: Outcome) -> Option<Response> {
        response_of(EditReply {
            id: "i".into(),
            host: "h:/a".into(),
            epoch: Some(12),
            outcome,
        })
    }

    #[test]
    fn the_loops_answer_becomes_the_outcome_and_back_the_same_answer() {
        // Applied: the local answer, with the host and epoch added.
        let local = Response::ok(serde_json::to_value(outcome()).unwrap());
        let o = outcome_of(local);
        assert_eq!(
            o,
            Outcome::Applied {
                result: Box::new(outcome())
            }
        );
        let v = from_leader(o).unwrap().result.unwrap();
        assert_eq!(v["phase"], "design");
        assert_eq!(v["via"], "squadd");
        assert_eq!(v["host"], "h:/a");
        assert_eq!(v["epoch"], 12);
        // Refused: still a refusal (exit 1), naming the leader.
        let o = outcome_of(Response::ok(
            serde_json::json!({"refused": "failed; pass --force"}),
        ));
        assert_eq!(
            o,
            Outcome::Refused {
                why: "failed; pass --force".into()
            }
        );
        let r = from_leader(o).unwrap();
        assert!(r.ok);
        assert_eq!(
            r.result.unwrap()["refused"],
            "failed; pass --force (refused by the leader, h:/a)"
        );
        // Failed: an error (exit 2), the leader's words kept.
        let o = outcome_of(Response::error("no session `s` is known to squadd"));
        let r = from_leader(o).unwrap();
        assert!(!r.ok);
        assert_eq!(
            r.error.unwrap(),
            "the leader (h:/a) did not apply the edit: no session `s` is known to squadd"
        );
        // Not the leader any more: no answer; the follower asks again.
        let o = outcome_of(not_leader());
        assert_eq!(o, Outcome::NotLeader);
        assert!(from_leader(o).is_none());
    }

    #[test]
    fn the_loop_applies_only_under_the_lease_it_was_asked_under() {
        assert!(may_apply(Some(5), 5));
        assert!(!may_apply(None, 5), "the lease ran out");
        assert!(!may_apply(Some(9), 5), "elected again since: ask again");
    }

    #[test]
    fn no_answer_retries_and_the_error_says_whether_it_may_have_been_applied() {
        assert!(decide(Attempt::NoResponders).is_none());
        assert!(decide(Attempt::Unanswered("timed out".into())).is_none());
        assert!(decide(Attempt::NotSent("down".into())).is_none());
        let bound = Duration::from_secs(3);
        let none = gave_up(
            "web",
            bound,
            &[Attempt::NoResponders, Attempt::NoResponders],
        );
        let e = none.error.unwrap();
        assert!(e.starts_with("no leader: the edit was not applied"), "{e}");
        assert!(e.contains("squadctl cluster status"), "{e}");
        let down = gave_up(
            "web",
            bound,
            &[Attempt::NotSent("this host is not connected".into())],
        );
        assert!(down.error.unwrap().contains("this host is not connected"));
        // Once an attempt may have reached a leader, "not applied" would be
        // a lie.
        let maybe = gave_up(
            "web",
            bound,
            &[
                Attempt::Unanswered("timed out".into()),
                Attempt::NoResponders,
            ],
        );
        let e = maybe.error.unwrap();
        assert!(e.contains("may or may not have been applied"), "{e}");
        assert!(!e.contains("not applied ("), "{e}");
    }

    #[test]
    fn a_retried_id_is_answered_from_memory_and_not_leader_is_never_kept() {
        let mut m = Remembered::default();
        let reply = |id: &str, outcome| EditReply {
            id: id.into(),
            host: "h".into(),
            epoch: Some(1),
            outcome,
        };
        m.keep(&reply("a", Outcome::NotLeader));
        assert!(m.get("a").is_none());
        m.keep(&reply(
            "a",
            Outcome::Applied {
                result: Box::new(outcome()),
            },
        ));
        assert_eq!(
            m.get("a").unwrap().outcome,
            Outcome::Applied {
                result: Box::new(outcome())
            }
        );
        for i in 0..REMEMBERED {
            m.keep(&reply(
                &format!("x{i}"),
                Outcome::Refused { why: "no".into() },
            ));
        }
        assert!(m.get("a").is_none(), "the oldest is forgotten");
        assert!(m.get("x0").is_some());
        assert_eq!(m.0.len(), REMEMBERED);
    }

    #[test]
    fn the_bound_is_the_lease_at_most_eight_seconds() {
        let mut p = ClusterPolicy {
            nats: vec!["nats://127.0.0.1:4222".into()],
            project: "p".into(),
            credentials: None,
            lock_ttl: Duration::from_secs(15),
            replicas: 1,
            lease_ttl: Duration::from_secs(3),
        };
        assert_eq!(bound(&p), Duration::from_secs(3));
        p.lease_ttl = Duration::from_secs(60);
        assert_eq!(bound(&p), MAX_BOUND);
    }

    /// Without a connection, a forward never applies anything and says so
    /// once the bound runs out.
    #[tokio::test]
    async fn a_forward_without_nats_is_refused_not_applied() {
        let req = EditRequest {
            id: "i".into(),
            from: "h".into(),
            session: "s".into(),
            edit: SessionEdit::Phase {
                phase: Phase::Design,
            },
        };
        let r = forward(
            Arc::new(OnceLock::new()),
            "web",
            req,
            Duration::from_millis(300),
        )
        .await;
        let e = r.error.unwrap();
        assert!(e.starts_with("no leader: the edit was not applied"), "{e}");
        assert!(e.contains("no NATS connection"), "{e}");
    }
}
