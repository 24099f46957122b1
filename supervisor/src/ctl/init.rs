//! `squadctl init` and `squadctl session …`.

use crate::exit;
use crate::layout::create_layout;
use crate::root;
use crate::safefs::write_atomic;
use crate::session_edit::EditError;
use chrono::{SecondsFormat, Utc};
use clap::Subcommand;
use serde_json::json;
use squad_policies::session_edit::SessionEdit;
use squad_protocol::IdKind;
use squad_protocol::model::{Gate, Phase};
use squad_protocol::tree::{SQUAD_DIR, sessions_dir};
use std::path::Path;

/// Create `.squad/` in the project root (default: the current directory).
///
/// Creates `sessions/`, `archives/` and `run/` (mode 0700), a `.gitignore`
/// for runtime state, the project `.gitignore` entries of the files it
/// generates outside `.squad/` (the shared context, the team export), a commented default policy (`policies.yaml`: every
/// setting with its default, commented out), and installs the built-in skills into `.squad/skills/`
/// (squad-protocol teaches agents the command line). Safe to run again:
/// existing directories, an existing `.gitignore` or `policies.yaml` and
/// modified skills are left as they are.
///
/// A project whose team is in the legacy `.ai-team/` (and has no `.squad/`)
/// is first migrated as `squad upgrade --migrate-directory` does:
/// `.ai-team/` becomes `.squad/`, never both.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Make a separate project even inside another one (a directory above
    /// already holds `.squad/`, which squadctl would otherwise use from here).
    #[arg(long)]
    pub nested: bool,
    /// Append a short "working in a squad" section to AGENTS.md (created if
    /// missing; left alone when it already has the section).
    #[arg(long)]
    pub agents_md: bool,
    /// Also lay out a small runnable example: a session with three dependent
    /// tasks and a fake agent (example/agent.sh) that squadd starts for each
    /// one; start squadd and watch it finish in `squadctl top` (under a
    /// minute). For an empty directory: refused where sessions exist or the
    /// policy was edited.
    #[arg(long)]
    pub example: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Session commands.
#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Create a session directory with a valid session-status.md.
    ///
    /// The directory is named YYYYMMDDTHHMMSSZ[-slug] (UTC) and appears
    /// atomically: it is built under a hidden name and renamed into place.
    New(NewArgs),
    /// Mark a session completed (records `completed_at`).
    ///
    /// squadd then wraps it up: releases its locks, writes summary.md and
    /// removes temporary files; retention archives it later.
    ///
    /// The lead's: refused when SQUAD_AGENT names an agent the policy does
    /// not name as a lead (runners.lead, notices.lead). With `cluster:`, on
    /// a follower: applied by the leader (docs/cluster.md).
    Complete(EndArgs),
    /// Mark a session failed (records `failed_at` and the reason).
    ///
    /// squadd wraps it up as for `complete`; retention deletes failed
    /// sessions after `retention.delete_failed_after` (7 days by default).
    ///
    /// The lead's: refused when SQUAD_AGENT names an agent the policy does
    /// not name as a lead (runners.lead, notices.lead). With `cluster:`, on
    /// a follower: applied by the leader (docs/cluster.md).
    Fail(FailArgs),
    /// List sessions: status, phase, done/total tasks, age.
    List(super::read::SessionListArgs),
    /// Set the session's phase (a supervisor-owned field agents may not edit).
    ///
    /// The lead's: refused when SQUAD_AGENT names an agent the policy does
    /// not name as a lead (runners.lead, notices.lead). With `cluster:`, on
    /// a follower: applied by the leader (docs/cluster.md).
    Phase(PhaseArgs),
    /// Set one validation gate: `session gate S design passed`.
    ///
    /// The lead's: refused when SQUAD_AGENT names an agent the policy does
    /// not name as a lead (runners.lead, notices.lead). With `cluster:`, on
    /// a follower: applied by the leader (docs/cluster.md).
    Gate(GateArgs),
}

/// Arguments of `session complete`.
#[derive(Debug, clap::Args)]
pub struct EndArgs {
    /// The session directory name (or its `session_id`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Complete a session that was marked failed.
    #[arg(long)]
    pub force: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `session phase`.
#[derive(Debug, clap::Args)]
pub struct PhaseArgs {
    /// The session directory name (or its `session_id`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// requirements, design, implementation or quality.
    #[arg(value_name = "PHASE", value_parser = parse_phase)]
    pub phase: Phase,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `session gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// The session directory name (or its `session_id`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// The gate: requirements, design, implementation or quality.
    #[arg(value_name = "GATE", value_parser = parse_phase)]
    pub gate: Phase,
    /// passed, in_progress, pending or failed.
    #[arg(value_name = "STATUS", value_parser = parse_gate)]
    pub status: Gate,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_phase(s: &str) -> Result<Phase, String> {
    Phase::parse(s)
        .ok_or_else(|| format!("`{s}`: use requirements, design, implementation or quality"))
}

fn parse_gate(s: &str) -> Result<Gate, String> {
    Gate::parse(s).ok_or_else(|| format!("`{s}`: use passed, in_progress, pending or failed"))
}

/// Arguments of `session fail`.
#[derive(Debug, clap::Args)]
pub struct FailArgs {
    /// The session directory name (or its `session_id`).
    #[arg(value_name = "ID")]
    pub id: String,
    /// Why it failed (recorded as `failure_reason`).
    #[arg(long, value_name = "R")]
    pub reason: String,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `session new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// Suffix for the directory name (lowercase letters, digits and single dashes).
    #[arg(long, value_name = "S")]
    pub slug: Option<String>,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `squadctl init`.
pub(crate) fn init(root_arg: Option<&Path>, args: InitArgs) -> u8 {
    let root = root::here(root_arg);
    if !args.nested
        && !root::fs_path(&root).join(SQUAD_DIR).is_dir()
        && let Some(outer) = root::enclosing_project(&root)
    {
        return super::fail(format!(
            "{} is inside the project at {} (it has {SQUAD_DIR}/): squadctl already works here from that project; pass --nested to make a separate project inside it",
            crate::text::escape(
                &std::fs::canonicalize(root::fs_path(&root))
                    .unwrap_or_else(|_| root.clone())
                    .display()
                    .to_string()
            ),
            crate::text::escape(&outer.display().to_string())
        ));
    }
    // A legacy team (`.ai-team/`) becomes `.squad/` first, as the Squad
    // CLI migrates it: never both (docs/team.md).
    let migrated = match super::migrate::legacy_project(&root) {
        Ok(m) => m,
        Err(e) => return super::fail(e),
    };
    let squad = root.join(SQUAD_DIR);
    let mut created = match create_layout(&root) {
        Ok(c) => c,
        Err(e) => return super::fail(format!("cannot create {}: {e}", squad.display())),
    };
    let gitignore = squad.join(".gitignore");
    if std::fs::symlink_metadata(&gitignore).is_err() {
        if let Err(e) = write_atomic(&gitignore, crate::layout::GITIGNORE.as_bytes()) {
            return super::fail(format!("{}: {e}", gitignore.display()));
        }
        created.push(gitignore);
    }
    // Generated files outside .squad/ that `git add -A` must not take.
    let ignores = match crate::layout::ensure_project_ignores(root::fs_path(&root)) {
        Ok(wrote) => wrote,
        Err(e) => {
            super::warn(format!("{}: {e}", root.join(".gitignore").display()));
            false
        }
    };
    let policy = squad.join("policies.yaml");
    if std::fs::symlink_metadata(&policy).is_err() {
        let text = super::example::commented_default_policy();
        if let Err(e) = write_atomic(&policy, text.as_bytes()) {
            return super::fail(format!("{}: {e}", policy.display()));
        }
        created.push(policy);
    }
    let skills = match crate::skills::install_builtin(&squad, false) {
        Ok(s) => s,
        Err(e) => return super::fail(e),
    };
    let example = if args.example {
        match super::example::lay_out(&root) {
            Ok(ex) => Some(ex),
            Err(super::example::Refused::Refused(e)) => {
                super::fail(e);
                return exit::PROBLEMS;
            }
            Err(super::example::Refused::Failed(e)) => return super::fail(e),
        }
    } else {
        None
    };
    if let Some(ex) = &example {
        created.extend(ex.created.iter().cloned());
    }
    let next_steps: &[(&str, &str)] = if example.is_some() {
        &EXAMPLE_STEPS
    } else {
        &NEXT_STEPS
    };
    let agents_md = if args.agents_md {
        match append_agents_md(&root) {
            Ok(done) => Some(done),
            Err(e) => return super::fail(e),
        }
    } else {
        None
    };
    if args.json {
        let created: Vec<String> = created.iter().map(|p| super::shown(p)).collect();
        let skills: Vec<_> = skills
            .iter()
            .map(|o| json!({"skill": o.skill, "action": o.action, "path": o.path.display().to_string()}))
            .collect();
        return super::print(&format!(
            "{:#}\n",
            json!({"squad_dir": squad.display().to_string(), "migrated": migrated, "created": created, "skills": skills, "agents_md_updated": agents_md, "gitignore_updated": ignores, "example_session": example.as_ref().map(|e| e.session.display().to_string()), "next_steps": next_steps.iter().map(|(cmd, why)| json!({"command": cmd, "why": why})).collect::<Vec<_>>()})
        ));
    }
    let mut out = String::new();
    for m in &migrated {
        out.push_str(m);
        out.push('\n');
    }
    if created.is_empty() {
        out.push_str(&format!("{} already initialized\n", super::shown(&squad)));
    }
    for p in &created {
        out.push_str(&format!("created {}\n", super::shown(p)));
    }
    if ignores {
        out.push_str(&format!(
            ".gitignore: ignores {} (generated)\n",
            crate::layout::PROJECT_IGNORES.join(", ")
        ));
    }
    for o in &skills {
        out.push_str(&format!("skill {}: {}\n", o.skill, o.message));
    }
    match agents_md {
        Some(true) => out.push_str("AGENTS.md: added the squad section\n"),
        Some(false) => out.push_str("AGENTS.md: already has the squad section\n"),
        None => {}
    }
    if example.is_none() {
        out.push_str(POINTERS);
    }
    out.push_str("Next steps:\n");
    for (i, (cmd, why)) in next_steps.iter().enumerate() {
        out.push_str(&format!("  {}. {cmd}\n       {why}\n", i + 1));
    }
    super::print_human(&out)
}

/// What a new lead does after `init`, in order (printed by `init`, and as
/// `next_steps` with `--json`).
const NEXT_STEPS: [(&str, &str); 4] = [
    (
        "squadd --root .",
        "start the supervisor (or: squadctl --root . service install --user)",
    ),
    (
        "squadctl session new --slug my-feature",
        "open a session for a piece of work",
    ),
    (
        "squadctl task new --agent alice --instruction 'build the api' --allow 'src/**'",
        "assign tasks, one per agent, with the files each may change",
    ),
    (
        "squadctl status",
        "see what needs you first (blocked tasks, error reports, held runs), then progress",
    ),
];

/// What to do after `init --example`.
const EXAMPLE_STEPS: [(&str, &str); 3] = [
    (
        "squadd --root . &",
        "start the supervisor: it starts example/agent.sh for each ready task",
    ),
    (
        "squadctl top",
        "watch the three tasks run one after the other and the session complete (q quits)",
    ),
    (
        "kill %1",
        "stop squadd; then read .squad/policies.yaml and docs/runners.md to run real agents",
    ),
];

/// How to show the shipped skill to the agents' tools, printed by `init`.
const POINTERS: &str = "\
Agents learn the protocol from .squad/skills/squad-protocol/SKILL.md. Show it to their tool:
  Claude Code:     mkdir -p .claude/skills && cp -R .squad/skills/squad-protocol .claude/skills/
  Codex:           mkdir -p .agents/skills && cp -R .squad/skills/squad-protocol .agents/skills/
  GitHub Copilot:  mkdir -p .github/skills && cp -R .squad/skills/squad-protocol .github/skills/
  any agent:       squadctl init --agents-md (a short section in AGENTS.md)
(squadctl reports such copies as shadowed by .squad/skills/: expected; refresh them after `squadctl skills upgrade`.)
";

/// The marker of the section `init --agents-md` appends.
const AGENTS_MD_MARKER: &str = "<!-- squad-supervisor -->";

/// The section `init --agents-md` appends to AGENTS.md.
const AGENTS_MD_SECTION: &str = "\
<!-- squad-supervisor -->
## Working in a squad

This project is coordinated by squad-supervisor. Your name, task and session
are in `SQUAD_AGENT`, `SQUAD_TASK` and `SQUAD_SESSION`. Do not write the files
under `.squad/` by hand; use `squadctl`:

- `squadctl next --agent \"$SQUAD_AGENT\"`: your tasks and messages;
- `squadctl progress --task \"$SQUAD_TASK\" --status in_progress|completed|blocked …`;
- `squadctl lock acquire --agent \"$SQUAD_AGENT\" --task \"$SQUAD_TASK\" PATH…` before editing shared files;
- `squadctl send --from \"$SQUAD_AGENT\" --to AGENT …` to ask another agent;
- `squadctl report-error …` when you are stuck.

The full guide is the skill `.squad/skills/squad-protocol/SKILL.md`.
";

/// Appends the squad section to `<root>/AGENTS.md`; `Ok(false)` when it is
/// there already.
fn append_agents_md(root: &Path) -> Result<bool, String> {
    let path = root.join("AGENTS.md");
    let old = match squad_protocol::fsx::read_regular_to_string(&path, 1 << 20) {
        Ok(t) => t,
        Err(squad_protocol::fsx::ReadError::NotFound) => String::new(),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if old.contains(AGENTS_MD_MARKER) {
        return Ok(false);
    }
    let mut text = old;
    if !text.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
    }
    text.push_str(AGENTS_MD_SECTION);
    write_atomic(&path, text.as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(true)
}

/// Runs a `squadctl session` subcommand.
pub(crate) fn session(root_arg: Option<&Path>, cmd: SessionCommand) -> u8 {
    match cmd {
        SessionCommand::New(args) => new_session(root_arg, args),
        SessionCommand::Complete(args) => edit_session(
            root_arg,
            &args.id,
            SessionEdit::Complete { force: args.force },
            args.json,
        ),
        SessionCommand::Fail(args) => edit_session(
            root_arg,
            &args.id,
            SessionEdit::Fail {
                reason: args.reason,
            },
            args.json,
        ),
        SessionCommand::Phase(args) => edit_session(
            root_arg,
            &args.id,
            SessionEdit::Phase { phase: args.phase },
            args.json,
        ),
        SessionCommand::Gate(args) => edit_session(
            root_arg,
            &args.id,
            SessionEdit::Gate {
                gate: args.gate,
                status: args.status,
            },
            args.json,
        ),
        SessionCommand::List(args) => super::read::session_list(root_arg, args),
    }
}

fn new_session(root_arg: Option<&Path>, args: NewArgs) -> u8 {
    if let Some(slug) = &args.slug
        && !IdKind::Agent.matches(slug)
    {
        return super::fail(format!(
            "invalid slug `{slug}`: use lowercase letters, digits and single dashes, e.g. `user-search`"
        ));
    }
    let root = match root::resolve(root_arg) {
        Ok(r) => r,
        Err(e) => return super::fail(e),
    };
    let made = match super::session_dir::create_session(&root, args.slug.as_deref()) {
        Ok(m) => m,
        Err(e) => return super::fail(e),
    };
    if args.json {
        super::print(&format!(
            "{:#}\n",
            json!({
                "session": made.name,
                "session_id": made.session_id,
                "path": super::shown(&made.dir),
                "started_at": made.started_at.to_rfc3339_opts(SecondsFormat::Secs, true),
            })
        ));
    } else {
        super::print_human(&format!("{}\n", super::shown(&made.dir)));
    }
    exit::OK
}

/// Finds a session directory by name or by its `session_id`.
fn find_session(root: &Path, id: &str) -> Option<std::path::PathBuf> {
    // A directory name, validated (`..`, paths and symlinks are not sessions).
    if let Ok(dir) = root::named_session(root, id) {
        return Some(dir);
    }
    squad_protocol::tree::session_dirs(root)
        .ok()?
        .into_iter()
        .find(|d| {
            crate::index::load_file(
                &d.join(squad_protocol::kind::SESSION_STATUS_FILE),
                squad_protocol::FileKind::SessionStatus,
            )
            .ok()
            .flatten()
            .is_some_and(
                |f| matches!(f.entry, crate::index::Entry::Status(ref s) if s.session_id == id),
            )
        })
}

/// Applies an edit of session-status.md's supervisor-owned fields: through
/// squadd when it runs (it applies the edit itself, so it never races its
/// own rewrite of the file), else under the session's lock file
/// (`.squad/run/session-<dir>.lock`, which squadd also takes around its
/// status writes): read, change, validate, write atomically.
fn edit_session(root_arg: Option<&Path>, id: &str, edit: SessionEdit, json: bool) -> u8 {
    let root = match root::resolve(root_arg) {
        Ok(r) => root::fs_path(&r).to_path_buf(),
        Err(e) => return super::fail(e),
    };
    let Some(dir) = find_session(&root, id) else {
        return super::fail(format!(
            "no session `{}` in {}",
            crate::text::escape(id),
            sessions_dir(&root).display()
        ));
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Session edits are the lead's (as task assignments are): an agent
    // could otherwise end the session or pass a gate under the team.
    let refusal = super::write::lead_refusal(
        &root,
        "session edits are the lead's to make",
        "edit the session",
    );
    let result = match refusal {
        Some(why) => Err(EditError::Refused(why)),
        None => match crate::control::session_edit(&root, &name, &edit) {
            Some(r) => r,
            None => edit_file(&root, &dir, &name, &edit),
        },
    };
    match result {
        Ok(o) => {
            if json {
                super::print(&format!("{:#}\n", json!(o)))
            } else {
                // A follower's edit, applied by the leader (docs/cluster.md).
                let by = match (&o.host, o.epoch) {
                    (Some(h), Some(e)) => {
                        format!(
                            " (applied by the leader {}, epoch {e})",
                            crate::text::escape(h)
                        )
                    }
                    (Some(h), None) => format!(" (applied by {})", crate::text::escape(h)),
                    _ => String::new(),
                };
                super::print_human(&format!("{} {}{by}\n", super::shown(&dir), o.said))
            }
        }
        Err(EditError::Refused(why)) => {
            if json {
                super::print(&format!("{:#}\n", json!({ "refused": why })));
            }
            super::eprint_text(&format!("squadctl: {why}\n"));
            exit::PROBLEMS
        }
        Err(EditError::Failed(why)) => super::fail(why),
    }
}

/// The edit made by squadctl itself (squadd not running), under the lock.
fn edit_file(
    root: &Path,
    dir: &Path,
    name: &str,
    edit: &SessionEdit,
) -> Result<crate::session_edit::EditOutcome, EditError> {
    let lock_path = root
        .join(SQUAD_DIR)
        .join(squad_protocol::tree::RUN_DIR)
        .join(crate::session_edit::lock_name(name));
    let _lock = crate::session_edit::lock_session(root, name, true)
        .map_err(|e| EditError::Failed(format!("{}: {e}", lock_path.display())))?;
    let path = dir.join(squad_protocol::kind::SESSION_STATUS_FILE);
    let text = squad_protocol::fsx::read_regular_to_string(
        &path,
        squad_protocol::validate::MAX_FILE_BYTES,
    )
    .map_err(|e| EditError::Failed(format!("{}: {e}", path.display())))?;
    let new = crate::session_edit::apply(&path, &text, edit, Utc::now())?;
    let changed = new != text;
    if changed {
        write_atomic(&path, new.as_bytes())
            .map_err(|e| EditError::Failed(format!("{}: {e}", path.display())))?;
    }
    Ok(crate::session_edit::outcome(
        &path, &new, edit, changed, "file",
    ))
}
