//! What needs a human: one model, built by a pure function from facts that
//! `status` (and later `top`) gather from squadd or the files. Each item
//! carries the command that resolves it (docs/daemon.md, "Needs attention").

use crate::runners::{RunRecord, RunState};
use crate::status::StatusReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What kind of thing needs a human. The kebab-case names are what
/// `status --check --allow KIND` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// squadd refused to reload the policy (it runs on the previous one).
    PolicyRefused,
    /// `.squad/policies.yaml` does not parse or validate.
    PolicyInvalid,
    /// `.squad/config.json` has errors.
    ConfigInvalid,
    /// An agent filed an error report.
    ErrorReport,
    /// A task's latest progress says `blocked`.
    BlockedTask,
    /// A run is held: only a human starts the task again.
    RunHeld,
    /// A run could not start, or ended without completing and waits for
    /// nothing.
    RunFailed,
    /// An escalated message nobody acknowledged (a reply is overdue).
    OverdueReply,
    /// A task past its deadline.
    OverdueTask,
    /// A protocol file with validation errors.
    InvalidFile,
    /// An agent CLI warned in a run's output that its model is deprecated
    /// or retiring (docs/runners.md, "Models").
    ModelWarning,
    /// A session has used most of its budget, or all of it
    /// (`runners.budget.session`).
    SessionBudget,
    /// A root squadd supervises lost its `.squad/sessions` (moved away by
    /// another tool's import, deleted).
    RootMissing,
    /// An agent a person runs waits for them: a permission, an answer
    /// (its CLI's hook said so: `squadctl presence`).
    AgentWaiting,
    /// A worktree run's branch is held at merge: its dependents wait and
    /// its session does not complete (docs/worktrees.md, "Hand-over").
    BranchHeld,
    /// Two unmerged worktree runs of a session change the same files, or
    /// a run's branch would conflict with the session's branch
    /// (docs/worktrees.md, "Overlap told before merge").
    BranchOverlap,
    /// A worktree run's branch waits for the lead's review (docs/review.md):
    /// its dependents wait and its session does not complete.
    ReviewWaiting,
}

impl Kind {
    /// Every kind, for `--help` and argument checks.
    pub const ALL: [Kind; 17] = [
        Kind::PolicyRefused,
        Kind::PolicyInvalid,
        Kind::ConfigInvalid,
        Kind::ErrorReport,
        Kind::BlockedTask,
        Kind::RunHeld,
        Kind::RunFailed,
        Kind::OverdueReply,
        Kind::OverdueTask,
        Kind::InvalidFile,
        Kind::ModelWarning,
        Kind::SessionBudget,
        Kind::RootMissing,
        Kind::AgentWaiting,
        Kind::BranchHeld,
        Kind::BranchOverlap,
        Kind::ReviewWaiting,
    ];

    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::PolicyRefused => "policy-refused",
            Kind::PolicyInvalid => "policy-invalid",
            Kind::ConfigInvalid => "config-invalid",
            Kind::ErrorReport => "error-report",
            Kind::BlockedTask => "blocked-task",
            Kind::RunHeld => "run-held",
            Kind::RunFailed => "run-failed",
            Kind::OverdueReply => "overdue-reply",
            Kind::OverdueTask => "overdue-task",
            Kind::InvalidFile => "invalid-file",
            Kind::ModelWarning => "model-warning",
            Kind::SessionBudget => "session-budget",
            Kind::RootMissing => "root-missing",
            Kind::AgentWaiting => "agent-waiting",
            Kind::BranchHeld => "branch-held",
            Kind::BranchOverlap => "branch-overlap",
            Kind::ReviewWaiting => "review-waiting",
        }
    }

    /// Parses a kebab-case name.
    pub fn parse(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// Whether the lead settles an item of this kind by acknowledging it
    /// (`status --ack ID`): its fact is an agent's to change (a blocked or
    /// overdue task, an error report), so no command of the lead's makes
    /// it go; the lead has looked and decided. Every other kind has a
    /// command (or a file to fix) that removes its cause.
    pub fn acknowledged_by_lead(self) -> bool {
        matches!(
            self,
            Kind::ErrorReport | Kind::BlockedTask | Kind::OverdueTask | Kind::BranchOverlap
        )
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a human should look at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Item {
    /// Its id: a hash of its kind, place and summary, so it changes when
    /// the fact does (what `status --ack ID` takes).
    #[serde(default)]
    pub id: String,
    /// What it is.
    pub kind: Kind,
    /// `critical`, `error` or `warning`: the list is sorted by it.
    pub severity: String,
    /// The session, when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The task, when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// One line saying what is wrong.
    pub summary: String,
    /// The command that resolves it (or shows what to do).
    pub command: String,
}

/// The facts the model is built from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts<'a> {
    /// The status report (from squadd or the files).
    pub report: Option<&'a StatusReport>,
    /// Every run record (`sessions/*/runs/*/run.json`).
    pub runs: &'a [RunRecord],
    /// Why the policy file is invalid, when it is.
    pub policy_errors: &'a [String],
    /// The config file's errors, as `file:line:col: rule: message`.
    pub config_errors: &'a [String],
    /// `runners.budget.session` of the policy.
    pub session_budget: squad_policies::budget::Budget,
    /// The agents' presence records (`.squad/run/presence/`).
    pub presence: &'a [crate::agent_presence::Record],
    /// config.json as it is now: a model warning is settled once it pins
    /// another model for the agent (its next run uses that one).
    pub config: Option<&'a squad_protocol::config::RuntimeConfig>,
    /// Worktree runs' branches held at merge.
    pub branches: &'a [HeldBranch],
}

/// A worktree run's branch held at merge (`runs/<task>/worktree.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeldBranch {
    /// The session.
    pub session: String,
    /// The task.
    pub task: String,
    /// Why, in a few words (held), or what it changes (review).
    pub summary: String,
    /// It waits for the lead's review, not held at merge.
    pub review: bool,
}

/// The branches of `runs` held at merge, from their worktree records
/// (only a record naming the run's own worktree and branch counts).
pub(crate) fn held_branches(
    root: &std::path::Path,
    runs: &[(std::path::PathBuf, RunRecord)],
) -> Vec<HeldBranch> {
    runs.iter()
        .filter_map(|(session_dir, r)| {
            let dir = crate::runners::run_dir(session_dir, &r.task);
            match crate::worktree::recorded_state(root, &dir, &r.session, &r.task)? {
                (crate::worktree::TreeState::Held, summary) => Some(HeldBranch {
                    session: r.session.clone(),
                    task: r.task.clone(),
                    summary: summary.unwrap_or_else(|| "see `squadctl runs --all`".into()),
                    review: false,
                }),
                (crate::worktree::TreeState::Review, summary) => Some(HeldBranch {
                    session: r.session.clone(),
                    task: r.task.clone(),
                    summary: summary.unwrap_or_default(),
                    review: true,
                }),
                _ => None,
            }
        })
        .collect()
}

/// A held branch: what waits for it, and the commands that settle it.
fn branch_item(b: &HeldBranch) -> Item {
    let (session, task) = (quote(&b.session), quote(&b.task));
    if b.review {
        return item(
            Kind::ReviewWaiting,
            "warning",
            Some(&b.session),
            Some(&b.task),
            format!(
                "squad/{} of {} waits for your review ({}); the tasks that require it wait and the session does not complete",
                b.task, b.task, b.summary
            ),
            format!(
                "squadctl review show {task} --session {session}; decide (send it back instead: squadctl review changes {task} --session {session} -m TEXT, or reject it: squadctl review reject {task} --session {session} -m TEXT), then: squadctl review approve {task} --session {session}"
            ),
        );
    }
    item(
        Kind::BranchHeld,
        "error",
        Some(&b.session),
        Some(&b.task),
        format!(
            "squad/{} of {} is held at merge: {}; the tasks that require it wait and the session does not complete",
            b.task, b.task, b.summary
        ),
        format!(
            "squadctl runs --all --session {session}; fix the branch squad/{} (or give it up, kept for reference: squadctl merge {task} --session {session} --drop), then: squadctl merge {task} --session {session}",
            b.task
        ),
    )
}

/// The overlaps the runs' records hold: each pair once (whichever of its
/// two records says it), and each run's conflict with its session's
/// branch. The lead decides (a message, `stop`) and acknowledges: the
/// agents' work is theirs to change.
fn overlap_items(runs: &[RunRecord]) -> Vec<Item> {
    let mut pairs: std::collections::BTreeMap<(&str, String, String), &Vec<String>> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for r in runs {
        for (other, files) in &r.overlaps.with {
            let (a, b) = if r.task < *other {
                (r.task.clone(), other.clone())
            } else {
                (other.clone(), r.task.clone())
            };
            pairs.entry((r.session.as_str(), a, b)).or_insert(files);
        }
        if !r.overlaps.conflicts.is_empty() {
            let target = r
                .overlaps
                .target
                .as_deref()
                .unwrap_or("the session's branch");
            out.push(item(
                Kind::BranchOverlap,
                "warning",
                Some(&r.session),
                Some(&r.task),
                format!(
                    "squad/{} of {} would conflict with {target} on {} if merged now",
                    r.task,
                    r.task,
                    r.overlaps.conflicts.join(", ")
                ),
                format!(
                    "tell {task}'s agent to bring {target} in and resolve it, or stop it (squadctl stop {task} --session {session})",
                    task = quote(&r.task),
                    session = quote(&r.session)
                ),
            ));
        }
    }
    for ((session, a, b), files) in pairs {
        out.push(item(
            Kind::BranchOverlap,
            "warning",
            Some(session),
            Some(&a),
            format!(
                "{a} and {b} both change {} on branches not merged yet",
                files.join(", ")
            ),
            format!(
                "decide which of {a} and {b} goes first: tell the other to wait (a message) or stop it (squadctl stop {b} --session {session})",
                a = quote(&a),
                b = quote(&b),
                session = quote(session)
            ),
        ));
    }
    out
}

fn rank(severity: &str) -> u8 {
    match severity {
        "critical" => 0,
        "error" => 1,
        _ => 2,
    }
}

fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A root squadd supervises without its `.squad/sessions`: where it went
/// (another tool's import moves `.squad/` to `.squad-archive-<ts>/`), and
/// the command that brings squadd's entries back into the `.squad/` now in
/// place (squadd resumes when `.squad/sessions` is there).
fn root_missing(root: &crate::status::RootReport) -> Item {
    let at = quote(&root.root);
    let (summary, command) = match &root.moved_to {
        Some(to) => (
            format!(
                "{}: .squad/ was moved to {to}/ (another tool's import?), with squadd's sessions, run/ and policy; squadd waits for .squad/sessions",
                root.root
            ),
            format!(
                "cd {at} && for e in sessions archives policies.yaml config.json audit.jsonl; do if [ -e {to}/$e ] && [ ! -e .squad/$e ]; then mv {to}/$e .squad/; fi; done",
                to = quote(to)
            ),
        ),
        None => (
            format!(
                "{}: .squad/sessions is missing; squadd waits for it",
                root.root
            ),
            format!("squadctl --root {at} init"),
        ),
    };
    item(Kind::RootMissing, "critical", None, None, summary, command)
}

/// Whether a run needs a human, and as what.
fn run_kind(r: &RunRecord) -> Option<Kind> {
    // Rejected in review: the lead's own decision (docs/review.md).
    if r.completed || matches!(r.state, RunState::Running | RunState::Rejected) {
        return None;
    }
    if r.held {
        Some(Kind::RunHeld)
    } else if r.state == RunState::Failed || r.retry_at.is_none() && r.state != RunState::Exited {
        Some(Kind::RunFailed)
    } else {
        None
    }
}

/// An item's id: 16 hex digits of its kind, place and summary.
fn item_id(kind: Kind, session: Option<&str>, task: Option<&str>, summary: &str) -> String {
    let key = format!(
        "{kind}|{}|{}|{summary}",
        session.unwrap_or_default(),
        task.unwrap_or_default()
    );
    format!("{:016x}", crate::index::fingerprint(key.as_bytes()))
}

/// Whether `word` has the shape of an item id (what `status --ack` takes).
pub(crate) fn is_item_id(word: &str) -> bool {
    word.len() == 16
        && word
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// One item of the list; a kind the lead acknowledges gets the command
/// that does it after what shows the item's details.
fn item(
    kind: Kind,
    severity: &str,
    session: Option<&str>,
    task: Option<&str>,
    summary: String,
    command: String,
) -> Item {
    let id = item_id(kind, session, task, &summary);
    let command = if kind.acknowledged_by_lead() {
        format!("{command}; squadctl status --ack {id}")
    } else {
        command
    };
    Item {
        id,
        kind,
        severity: severity.to_string(),
        session: session.map(str::to_string),
        task: task.map(str::to_string),
        summary,
        command,
    }
}

/// Everything that needs a human, most severe first. Pure: the same facts
/// give the same list.
pub(crate) fn needs_attention(facts: &Facts<'_>) -> Vec<Item> {
    let mut items = Vec::new();
    for e in facts.policy_errors {
        items.push(item(
            Kind::PolicyInvalid,
            "error",
            None,
            None,
            format!("policy invalid: {e}"),
            "fix .squad/policies.yaml, then: squadctl validate".into(),
        ));
    }
    for e in facts.config_errors {
        items.push(item(
            Kind::ConfigInvalid,
            "error",
            None,
            None,
            format!("config invalid: {e}"),
            "fix .squad/config.json, then: squadctl config validate".into(),
        ));
    }
    if let Some(report) = facts.report {
        for root in &report.roots {
            // Kept by squadd while it runs on the previous policy (not its
            // latest event: any later event hid it).
            if let Some(error) = &root.policy_refused {
                items.push(item(
                    Kind::PolicyRefused,
                    "error",
                    None,
                    None,
                    format!("squadd refused the policy and runs on the previous one: {error}"),
                    "fix .squad/policies.yaml (squadd reloads it when saved), then: squadctl validate"
                        .into(),
                ));
            }
            if root.missing {
                items.push(root_missing(root));
            }
            for s in &root.sessions {
                session_items(s, &mut items);
            }
        }
    }
    items.extend(facts.runs.iter().filter_map(run_item));
    items.extend(facts.branches.iter().map(branch_item));
    items.extend(overlap_items(facts.runs));
    items.extend(waiting_agents(facts.presence));
    items.extend(model_warnings(facts.runs, facts.config));
    items.extend(session_budgets(facts.runs, &facts.session_budget));
    // Most severe first; within a severity, by kind then place: stable
    // across redraws.
    items.sort_by(|a, b| {
        (rank(&a.severity), a.kind, &a.session, &a.task, &a.summary).cmp(&(
            rank(&b.severity),
            b.kind,
            &b.session,
            &b.task,
            &b.summary,
        ))
    });
    items
}

/// The items of one session of squadd's report: error reports, blocked
/// tasks, overdue replies and tasks, invalid files.
fn session_items(s: &crate::status::SessionReport, items: &mut Vec<Item>) {
    let sn = Some(s.name.as_str());
    let session = quote(&s.name);
    for e in &s.error_reports {
        items.push(item(
            Kind::ErrorReport,
            &e.severity,
            sn,
            e.task_id.as_deref(),
            format!(
                "{} report from {}{}: {}",
                e.severity,
                e.agent,
                e.task_id
                    .as_ref()
                    .map_or_else(String::new, |t| format!(" on {t}")),
                e.message
            ),
            match &e.task_id {
                Some(t) => {
                    format!("squadctl task show {} --session {session}", quote(t))
                }
                None => format!("squadctl inbox next lead --session {session}"),
            },
        ));
    }
    for b in &s.blocked {
        items.push(item(
            Kind::BlockedTask,
            "error",
            sn,
            Some(&b.task_id),
            format!(
                "{} ({}) is blocked{}",
                b.task_id,
                b.agent,
                if b.blockers.is_empty() {
                    String::new()
                } else {
                    format!(": {}", b.blockers.join("; "))
                }
            ),
            format!(
                "squadctl task show {} --session {session}",
                quote(&b.task_id)
            ),
        ));
    }
    for m in &s.escalations {
        // Acknowledged where it waits: the recipient's inbox
        // (`inbox next lead` cleared nothing for an agent's).
        let (summary, command) = match s.escalated_to.get(m) {
            Some(to) => (
                format!("message {m} to {to} escalated and not acknowledged"),
                format!(
                    "squadctl inbox show {to} {m} --session {session}; squadctl inbox ack {to} {m} --session {session}",
                    to = quote(to),
                    m = quote(m)
                ),
            ),
            None => (
                format!("message {m} escalated and not acknowledged"),
                format!("squadctl inbox next lead --session {session}"),
            ),
        };
        items.push(item(
            Kind::OverdueReply,
            "warning",
            sn,
            None,
            summary,
            command,
        ));
    }
    for t in &s.overdue {
        items.push(item(
            Kind::OverdueTask,
            "warning",
            sn,
            Some(t),
            format!("{t} is past its deadline"),
            format!("squadctl task show {} --session {session}", quote(t)),
        ));
    }
    let invalid: BTreeSet<&str> = s
        .problems
        .iter()
        .filter(|p| p.severity == "error")
        .map(|p| p.path.as_str())
        .collect();
    for path in invalid {
        items.push(item(
            Kind::InvalidFile,
            "error",
            sn,
            None,
            format!("{path} is invalid"),
            format!(
                "fix {path}, then: squadctl validate {path}",
                path = quote(path)
            ),
        ));
    }
}

/// Agents a person runs that wait for them (their CLI's hook said so).
fn waiting_agents(presence: &[crate::agent_presence::Record]) -> impl Iterator<Item = Item> + '_ {
    presence
        .iter()
        .filter(|p| p.state == crate::agent_presence::State::Waiting)
        .map(|p| {
            item(
                Kind::AgentWaiting,
                "warning",
                p.session.as_deref(),
                p.task.as_deref(),
                format!(
                    "{} is waiting for you: {}",
                    p.agent,
                    p.detail.as_deref().unwrap_or("an answer")
                ),
                format!(
                    "answer {}'s {} session{}",
                    p.agent,
                    p.cli,
                    p.cwd
                        .as_deref()
                        .map_or_else(String::new, |c| format!(" (in {c})"))
                ),
            )
        })
}

/// A run that needs a human: held (over its budget, or after it ended
/// badly) or failed.
fn run_item(r: &RunRecord) -> Option<Item> {
    let kind = run_kind(r)?;
    let session = quote(&r.session);
    let task = quote(&r.task);
    let (summary, command) = if let (Kind::RunHeld, Some(figures)) = (kind, &r.over_budget) {
        (
            format!(
                "run of {} ({}) is held over its budget: {figures}",
                r.task, r.agent
            ),
            format!("squadctl run {task} --session {session}"),
        )
    } else if kind == Kind::RunHeld {
        (
            format!(
                "run of {} ({}) is held after it {}",
                r.task,
                r.agent,
                r.state.as_str()
            ),
            format!("squadctl run {task} --session {session}"),
        )
    } else {
        (
            format!("run of {} ({}) {}", r.task, r.agent, r.state.as_str()),
            format!(
                "squadctl runs --all --session {session}; squadctl run {task} --session {session}"
            ),
        )
    };
    Some(item(
        kind,
        "error",
        Some(&r.session),
        Some(&r.task),
        summary,
        command,
    ))
}

/// The CLIs' own model warnings: from each agent's newest run (a warning
/// goes away once a run on another model no longer shows it, or once
/// config.json pins the agent another model than the run's), one item per
/// warning.
fn model_warnings(
    runs: &[RunRecord],
    config: Option<&squad_protocol::config::RuntimeConfig>,
) -> Vec<Item> {
    let mut newest: std::collections::BTreeMap<&str, &RunRecord> = Default::default();
    for r in runs {
        let e = newest.entry(r.agent.as_str()).or_insert(r);
        if r.started_at > e.started_at {
            *e = r;
        }
    }
    let mut seen = BTreeSet::new();
    let mut items = Vec::new();
    for r in newest.values() {
        let Some(w) = &r.model_warning else { continue };
        if config.is_some_and(|c| c.model_for(&r.agent) != r.model.as_deref()) {
            continue;
        }
        if !seen.insert(w.as_str()) {
            continue;
        }
        let model = r
            .model
            .as_deref()
            .map_or_else(|| "its default model".to_string(), |m| format!("model {m}"));
        items.push(item(
            Kind::ModelWarning,
            "warning",
            Some(&r.session),
            Some(&r.task),
            format!("{}'s agent CLI warns about {model}: {w}", r.agent),
            format!(
                "pin {} a current model in .squad/config.json `models` (docs/runners.md, Models), or remove the pin to use the CLI's default, then: squadctl config show",
                r.agent
            ),
        ));
    }
    items
}

/// Sessions near (80 %) or past their budget, over every run's usage.
fn session_budgets(runs: &[RunRecord], budget: &squad_policies::budget::Budget) -> Vec<Item> {
    use squad_policies::usage;
    if !budget.is_set() {
        return Vec::new();
    }
    let mut by_session: std::collections::BTreeMap<&str, Vec<usage::Usage>> = Default::default();
    for r in runs {
        if let Some(u) = r.task_usage() {
            by_session.entry(r.session.as_str()).or_default().push(u);
        }
    }
    let mut items = Vec::new();
    for (session, parts) in by_session {
        let Some(total) = usage::sum(&parts) else {
            continue;
        };
        let (severity, figures, what) =
            if let Some(f) = squad_policies::budget::over_budget(budget, &total, 1.0) {
                ("error", f, "is over its budget")
            } else if let Some(f) = squad_policies::budget::over_budget(
                budget,
                &total,
                squad_policies::budget::SESSION_NEAR,
            ) {
                ("warning", f, "is near its budget")
            } else {
                continue;
            };
        items.push(item(
            Kind::SessionBudget,
            severity,
            Some(session),
            None,
            format!("session {session} {what}: {figures}"),
            format!(
                "squadctl runs --all --session {}; raise runners.budget.session in .squad/policies.yaml, then: squadctl validate",
                quote(session)
            ),
        ));
    }
    items
}

/// Drops from each session's active agents those whose only reason to be
/// listed is a run that is held or ended: a killed agent is not active.
pub(crate) fn drop_held_agents(report: &mut StatusReport, runs: &[RunRecord]) {
    for root in &mut report.roots {
        for s in &mut root.sessions {
            s.agents_active.retain(|agent| {
                let mine: Vec<&RunRecord> = runs
                    .iter()
                    .filter(|r| r.session == s.name && &r.agent == agent)
                    .collect();
                mine.is_empty() || !mine.iter().all(|r| r.held && r.state != RunState::Running)
            });
        }
    }
}

/// Splits the items into those that still need attention and those the
/// lead acknowledged (`status --ack ID`; only kinds settled that way). An
/// id names the fact: a changed fact (another blocker, a new report) is a
/// new item and needs attention again.
pub(crate) fn split_acknowledged(
    items: Vec<Item>,
    acknowledged: &BTreeSet<String>,
) -> (Vec<Item>, Vec<Item>) {
    items
        .into_iter()
        .partition(|i| !(i.kind.acknowledged_by_lead() && acknowledged.contains(&i.id)))
}

/// Renders the items for people: one line of what, one of the command.
pub(crate) fn render_human(items: &[Item]) -> String {
    let mut out = String::new();
    if items.is_empty() {
        return out;
    }
    out.push_str(&format!("needs attention ({}):\n", items.len()));
    for i in items {
        let place = match &i.session {
            Some(s) => format!("[{s}] "),
            None => String::new(),
        };
        out.push_str(&format!(
            "  {:<8} {}{}\n           → {}\n",
            i.severity, place, i.summary, i.command
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{BlockedTask, DaemonReport, ErrorReportView, RootReport, SessionReport};
    use chrono::Utc;

    fn session() -> SessionReport {
        SessionReport {
            name: "2026-01-01-demo".into(),
            session_id: None,
            status: squad_protocol::model::SessionState::Active,
            phase: None,
            tasks_completed: 0,
            tasks_total: 3,
            agents_active: vec!["alice".into(), "bob".into()],
            ready: vec![],
            overdue: vec!["t3".into()],
            violations: vec![],
            errors: 0,
            warnings: 0,
            problems: vec![],
            locks: vec![],
            unread: Default::default(),
            oldest_unread_secs: None,
            escalations: vec![],
            escalated_to: Default::default(),
            recipients_without_task: vec![],
            blocked: vec![BlockedTask {
                task_id: "t1".into(),
                agent: "alice".into(),
                blockers: vec!["no database".into()],
            }],
            error_reports: vec![ErrorReportView {
                error_id: "err_1".into(),
                agent: "bob".into(),
                task_id: Some("t2".into()),
                severity: "critical".into(),
                message: "disk full".into(),
            }],
        }
    }

    fn report() -> StatusReport {
        StatusReport {
            daemon: DaemonReport::Down {
                reason: "not running".into(),
            },
            roots: vec![RootReport {
                root: "/p".into(),
                missing: false,
                moved_to: None,
                policy_refused: None,
                next_retention_run: None,
                sessions: vec![session()],
                skills: Default::default(),
                team: Default::default(),
                hooks: None,
            }],
        }
    }

    fn run(task: &str, agent: &str, state: RunState, held: bool) -> RunRecord {
        RunRecord {
            task: task.into(),
            agent: agent.into(),
            session: "2026-01-01-demo".into(),
            attempt: 1,
            state,
            pid: 1,
            process_start: 1,
            started_at: Utc::now(),
            deadline: Utc::now(),
            command: vec![],
            exit: None,
            completed: false,
            retry_at: None,
            held,
            model: None,
            usage: None,
            model_warning: None,
            over_budget: None,
            earlier_usage: None,
            overlaps: Default::default(),
            conversation: None,
        }
    }

    #[test]
    fn every_fact_becomes_an_item_most_severe_first_with_a_command() {
        let report = report();
        let runs = [
            run("t2", "bob", RunState::TimedOut, true),
            run("t4", "carol", RunState::Failed, false),
            run("t5", "dan", RunState::Running, false),
        ];
        let policy = ["policies.yaml:3:1: unknown key".to_string()];
        let items = needs_attention(&Facts {
            report: Some(&report),
            runs: &runs,
            policy_errors: &policy,
            config_errors: &[],
            session_budget: Default::default(),
            presence: &[],
            config: None,
            branches: &[],
        });
        let kinds: Vec<Kind> = items.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::ErrorReport,
                Kind::PolicyInvalid,
                Kind::BlockedTask,
                Kind::RunHeld,
                Kind::RunFailed,
                Kind::OverdueTask,
            ]
        );
        assert!(
            items
                .iter()
                .all(|i| i.command.starts_with("squadctl") || i.command.starts_with("fix "))
        );
        assert_eq!(
            items[3].command,
            "squadctl run t2 --session 2026-01-01-demo"
        );
        let text = render_human(&items);
        assert!(
            text.contains("t1 (alice) is blocked: no database"),
            "{text}"
        );
        assert!(render_human(&[]).is_empty());
    }

    /// Issue 40 item 4: an item the lead acknowledges leaves the list by
    /// its id, and comes back when its fact changes; other kinds cannot be
    /// acknowledged away.
    #[test]
    fn an_acknowledged_item_leaves_the_list_until_its_fact_changes() {
        let report = report();
        let policy = ["policies.yaml:3:1: unknown key".to_string()];
        let facts = Facts {
            report: Some(&report),
            policy_errors: &policy,
            ..Facts::default()
        };
        let items = needs_attention(&facts);
        let ids: BTreeSet<String> = items.iter().map(|i| i.id.clone()).collect();
        assert!(ids.iter().all(|id| is_item_id(id)), "{ids:?}");
        assert_eq!(ids.len(), items.len(), "one id per item");
        let blocked = items.iter().find(|i| i.kind == Kind::BlockedTask).unwrap();
        assert!(
            blocked
                .command
                .ends_with(&format!("; squadctl status --ack {}", blocked.id)),
            "{}",
            blocked.command
        );
        let (left, acked) = split_acknowledged(items.clone(), &ids);
        let kinds: Vec<Kind> = left.iter().map(|i| i.kind).collect();
        assert_eq!(kinds, [Kind::PolicyInvalid], "only the lead's kinds go");
        assert_eq!(acked.len(), 3);
        // Another blocker: a new fact, a new id.
        let mut other = report.clone();
        other.roots[0].sessions[0].blocked[0].blockers = vec!["no network".into()];
        let again = needs_attention(&Facts {
            report: Some(&other),
            ..Facts::default()
        });
        let (left, _) = split_acknowledged(again, &ids);
        let kinds: Vec<Kind> = left.iter().map(|i| i.kind).collect();
        assert_eq!(kinds, [Kind::BlockedTask]);
        assert!(!is_item_id("../../etc") && !is_item_id("ABCDEF0123456789"));
    }

    /// A model warning is settled once config.json pins the agent another
    /// model than the warned run's.
    #[test]
    fn a_model_warning_is_settled_by_a_new_pin() {
        let mut r = run("task_1", "backend", RunState::Exited, false);
        r.completed = true;
        r.model = Some("claude-sonnet-4-5".into());
        r.model_warning = Some("will be retired".into());
        let warned = |config: &str| {
            let (config, _) =
                squad_protocol::config::parse(std::path::Path::new("config.json"), config);
            needs_attention(&Facts {
                runs: std::slice::from_ref(&r),
                config: Some(&config),
                ..Facts::default()
            })
            .len()
        };
        assert_eq!(warned(r#"{"models": {"default": "claude-sonnet-4-5"}}"#), 1);
        assert_eq!(
            warned(r#"{"models": {"roleOverrides": {"backend": "claude-opus-4-8"}}}"#),
            0
        );
        assert_eq!(warned("{}"), 0, "unpinned: the CLI's default");
    }

    #[test]
    fn a_completed_or_retrying_run_needs_nobody() {
        let mut done = run("t1", "a", RunState::Exited, false);
        done.completed = true;
        let mut retry = run("t2", "a", RunState::TimedOut, false);
        retry.retry_at = Some(Utc::now());
        let items = needs_attention(&Facts {
            runs: &[done, retry],
            ..Facts::default()
        });
        assert!(items.is_empty(), "{items:?}");
    }

    /// Issue 38: a CLI's model warning from an agent's newest run, and a
    /// session near or past its budget, need a human.
    #[test]
    fn model_warnings_and_session_budgets_need_a_human() {
        use squad_policies::budget::Budget;
        use squad_policies::usage::{Usage, Usd};
        let mut old = run("task_1", "backend", RunState::Exited, false);
        old.completed = true;
        old.model = Some("claude-sonnet-4-5".into());
        old.model_warning = Some("⚠ Claude Sonnet 4.5 will be retired".into());
        old.usage = Some(Usage {
            input_tokens: 700,
            output_tokens: 150,
            cost_usd: Some(Usd(850)),
            ..Usage::default()
        });
        let items = needs_attention(&Facts {
            runs: std::slice::from_ref(&old),
            session_budget: Budget {
                tokens: Some(1000),
                usd: None,
            },
            ..Facts::default()
        });
        let said: Vec<(Kind, &str, &str)> = items
            .iter()
            .map(|i| (i.kind, i.severity.as_str(), i.summary.as_str()))
            .collect();
        assert_eq!(
            said,
            [
                (
                    Kind::ModelWarning,
                    "warning",
                    "backend's agent CLI warns about model claude-sonnet-4-5: ⚠ Claude Sonnet 4.5 will be retired"
                ),
                (
                    Kind::SessionBudget,
                    "warning",
                    "session 2026-01-01-demo is near its budget: 850 tokens of a 1000-token budget"
                ),
            ]
        );
        // A newer run of the agent without the warning: it is gone; past
        // the budget, an error.
        let mut new = run("task_2", "backend", RunState::Exited, false);
        new.completed = true;
        new.started_at = old.started_at + chrono::Duration::seconds(5);
        new.usage = Some(Usage {
            output_tokens: 200,
            ..Usage::default()
        });
        let items = needs_attention(&Facts {
            runs: &[old, new],
            session_budget: Budget {
                tokens: Some(1000),
                usd: None,
            },
            ..Facts::default()
        });
        let kinds: Vec<(Kind, &str)> = items
            .iter()
            .map(|i| (i.kind, i.severity.as_str()))
            .collect();
        assert_eq!(kinds, [(Kind::SessionBudget, "error")]);
        assert!(items[0].summary.contains("1050 tokens"), "{items:?}");
    }

    #[test]
    fn a_held_runs_agent_is_not_active() {
        let mut report = report();
        drop_held_agents(
            &mut report,
            &[
                run("t2", "bob", RunState::Stopped, true),
                run("t1", "alice", RunState::Running, false),
            ],
        );
        assert_eq!(report.roots[0].sessions[0].agents_active, vec!["alice"]);
    }

    #[test]
    fn a_root_moved_away_is_critical_and_names_where_it_went() {
        let mut r = report();
        r.roots[0].missing = true;
        r.roots[0].moved_to = Some(".squad-archive-20261129T081500Z".into());
        r.roots[0].sessions.clear();
        let items = needs_attention(&Facts {
            report: Some(&r),
            ..Facts::default()
        });
        assert_eq!(items[0].kind, Kind::RootMissing);
        assert_eq!(items[0].severity, "critical");
        assert!(
            items[0]
                .summary
                .contains("moved to .squad-archive-20261129T081500Z/")
        );
        assert!(
            items[0]
                .command
                .contains("mv .squad-archive-20261129T081500Z/$e .squad/"),
            "{}",
            items[0].command
        );
    }

    #[test]
    fn kinds_round_trip_by_name() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
            assert_eq!(serde_json::to_value(k).unwrap_or_default(), k.as_str());
        }
    }
}
