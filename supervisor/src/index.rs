// Over 800 lines: the index entry of each protocol file kind and the
// session scanners; the scanners are the part to move out next.
//! The in-memory index of a project: sessions and, per session, what each
//! protocol file says, reduced to what derivation needs.
//!
//! Building an entry is pure (bytes in, entry out); reading files happens in
//! [`load_file`] and the scanners, at the edge.

use squad_protocol::model::{
    Document, ErrorSeverity, MessageType, Phase, Priority, SessionState, TaskStatus, Timestamp,
};
use squad_protocol::session::{SessionFinding, SessionMember, check_session};
use squad_protocol::tree::{
    parallel_map, place_session_findings_with, session_dirs, session_files,
};
use squad_protocol::validate::{Facts, ReadFailure, check_bytes, read_checked};
use squad_protocol::{Diagnostic, FileKind, Location};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A session's status file, as far as derivation is concerned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusInfo {
    /// Session id.
    pub session_id: String,
    /// As written.
    pub status: SessionState,
    /// As written (preserved, never derived).
    pub phase: Option<Phase>,
    /// Start of the session.
    pub started_at: Timestamp,
    /// When it completed, if recorded.
    pub completed_at: Option<Timestamp>,
    /// When it failed, if recorded.
    pub failed_at: Option<Timestamp>,
    /// When it was archived, if recorded.
    pub archived_at: Option<Timestamp>,
}

/// A task assignment. Its lists are boxed slices, not `Vec`s: read once,
/// never grown, and a `Vec`'s capacity word is 8 B each of four lists in
/// every plan of the index (issue 23 item 2).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// Task id.
    pub task_id: String,
    /// Assignee.
    pub agent: String,
    /// Priority.
    pub priority: Priority,
    /// Seconds from first `in_progress` until overdue.
    pub timeout: Option<u64>,
    /// Tasks that must complete first.
    pub requires: Box<[String]>,
    /// Tasks that wait for this one.
    pub blocks: Box<[String]>,
    /// Allowed globs.
    pub allowed: Box<[String]>,
    /// Forbidden globs.
    pub forbidden: Box<[String]>,
}

/// A blocker of a progress update.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BlockerInfo {
    /// What blocks.
    pub description: String,
    /// Who can unblock.
    pub requires_agent: Option<String>,
    /// Since when.
    pub since: Option<Timestamp>,
}

/// A decision of a progress update.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DecisionInfo {
    /// Decision type.
    pub kind: String,
    /// The decision.
    pub description: String,
    /// Details, as JSON.
    pub data: serde_json::Value,
}

/// A progress update (its lists boxed slices, as [`Plan`]'s).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    /// Task id.
    pub task_id: String,
    /// Reporting agent.
    pub agent: String,
    /// Reported state.
    pub status: TaskStatus,
    /// When written.
    pub updated_at: Timestamp,
    /// When completed, if reported.
    pub completed_at: Option<Timestamp>,
    /// Paths of artifacts created.
    pub artifacts: Box<[String]>,
    /// Blockers.
    pub blockers: Box<[BlockerInfo]>,
    /// Decisions.
    pub decisions: Box<[DecisionInfo]>,
}

/// An inter-agent message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MessageInfo {
    /// Message id.
    pub message_id: String,
    /// Sender.
    pub from_agent: String,
    /// Recipient.
    pub to_agent: String,
    /// Priority.
    pub priority: Priority,
    /// Type.
    pub kind: MessageType,
    /// When written.
    pub created_at: Timestamp,
    /// Reply due.
    pub response_by: Option<Timestamp>,
    /// Whether a reply is expected.
    pub response_needed: bool,
    /// The message answered.
    pub in_reply_to: Option<String>,
    /// The task it is about (`context.task_id`).
    pub task_id: Option<String>,
}

/// An error report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ErrorInfo {
    /// Error id.
    pub error_id: String,
    /// Reporter.
    pub agent: String,
    /// Task.
    pub task_id: Option<String>,
    /// Severity.
    pub severity: ErrorSeverity,
    /// When.
    pub occurred_at: Timestamp,
    /// Routing request.
    pub requires_intervention: bool,
    /// Routing target.
    pub suggested_agent: Option<String>,
    /// `error.type`.
    pub error_type: String,
    /// `error.message`.
    pub error_message: String,
}

/// What one file contributes, or `Invalid` when it has errors.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Entry {
    /// `session-status.md`.
    Status(Box<StatusInfo>),
    /// A task assignment.
    Plan(Box<Plan>),
    /// A progress update.
    Progress(Box<Progress>),
    /// A message. Boxed like every variant: an entry inline as large as a
    /// message's made each plan, progress and status file of the index as
    /// large too (issue 23 item 2: ~110 B a file, 1.2 MB at 1,000
    /// sessions of 11 files), for one allocation fewer per message.
    Message(Box<MessageInfo>),
    /// An error report.
    Error(Box<ErrorInfo>),
    /// The file has errors; see its diagnostics.
    Invalid,
}

fn yaml_to_json(v: serde_yaml::Value) -> serde_json::Value {
    serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
}

impl Entry {
    /// Reduces a valid document to what derivation needs.
    pub(crate) fn from_document(doc: Document) -> Entry {
        match doc {
            Document::SessionStatus(d) => Entry::Status(Box::new(StatusInfo {
                session_id: d.session_id,
                status: d.status,
                phase: d.phase,
                started_at: d.started_at,
                completed_at: d.completed_at,
                failed_at: d.failed_at,
                archived_at: d.archived_at,
            })),
            Document::TaskAssignment(d) => Entry::Plan(Box::new(Plan {
                requires: d.requires().into(),
                blocks: d.blocks().into(),
                allowed: d.allowed().into(),
                forbidden: d.forbidden().into(),
                task_id: d.meta.task_id,
                agent: d.meta.agent,
                priority: d.meta.priority,
                timeout: d.meta.timeout,
            })),
            Document::ProgressUpdate(d) => Entry::Progress(Box::new(Progress {
                task_id: d.meta.task_id,
                agent: d.meta.agent,
                status: d.status,
                updated_at: d.meta.updated_at,
                completed_at: d.completed_at,
                artifacts: d
                    .artifacts_created
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| a.path)
                    .collect(),
                blockers: d
                    .blockers
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| BlockerInfo {
                        description: b.description,
                        requires_agent: b.requires_agent,
                        since: b.blocking_since,
                    })
                    .collect(),
                decisions: d
                    .decisions
                    .unwrap_or_default()
                    .into_iter()
                    .map(|x| DecisionInfo {
                        kind: x.kind,
                        description: x.description,
                        data: x.data.map_or(serde_json::Value::Null, yaml_to_json),
                    })
                    .collect(),
            })),
            Document::Message(d) => Entry::Message(Box::new(MessageInfo {
                message_id: d.meta.message_id,
                from_agent: d.meta.from_agent,
                to_agent: d.meta.to_agent,
                priority: d.meta.priority,
                kind: d.kind,
                created_at: d.meta.created_at,
                response_by: d.response_by,
                response_needed: d.response_needed.unwrap_or(false),
                in_reply_to: d.in_reply_to,
                task_id: d.context.and_then(|c| c.task_id),
            })),
            Document::ErrorReport(d) => Entry::Error(Box::new(ErrorInfo {
                error_id: d.error_id,
                agent: d.agent,
                task_id: d.task_id,
                severity: d.severity,
                occurred_at: d.occurred_at,
                requires_intervention: d.requires_intervention.unwrap_or(false),
                suggested_agent: d.suggested_agent,
                error_type: d.error.kind,
                error_message: d.error.message,
            })),
        }
    }
}

/// One protocol file in the index.
#[derive(Debug, Clone)]
pub(crate) struct IndexedFile {
    /// The file's name (its directory is the session's: see
    /// [`SessionIndex::path_of`]). Not the whole path: a long session holds
    /// tens of thousands of these.
    pub name: Box<str>,
    /// Its kind.
    pub kind: FileKind,
    /// What it contributes.
    pub entry: Entry,
    /// Identity facts for session rules, when the entry does not say them
    /// (see [`SessionMember`]): a valid message, progress update or error
    /// report reads them from its entry rather than hold a second copy.
    facts: Option<Box<Facts>>,
    /// Its own diagnostics (file rules).
    pub diagnostics: Vec<Diagnostic>,
    /// A hash of the bytes, to tell real changes from repeated events.
    pub fingerprint: u64,
    /// The text as indexed (when UTF-8), kept for plans and status files
    /// only: session findings are placed in it, with the positions of the
    /// bytes the fingerprint names, never by reading the file again.
    pub text: Option<std::sync::Arc<str>>,
    /// For the other kinds (the bulk of a session: messages, progress,
    /// error reports), where each field a session rule can name is, found
    /// when indexed, instead of the text (see [`anchored`]).
    pub anchors: Anchors,
}

/// Where each of a kind's [`anchored`] fields is in a file that keeps no
/// text, in the order `anchored` names them (`None`: not found, or the
/// file keeps its text). Inline: a message's entry holds no allocation for
/// it.
pub(crate) type Anchors = [Option<Location>; 2];

/// Whether a kind keeps its text in the index: the graph rules place
/// findings anywhere in a plan or status file, status edits and runners
/// read them; session rules on the other kinds name a few fields only.
fn keeps_text(kind: FileKind) -> bool {
    matches!(kind, FileKind::TaskAssignment | FileKind::SessionStatus)
}

/// The fields session rules name in a file that keeps no text: the task it
/// refers to (`unknown-task`), its message id (`duplicate-message-id`) and a
/// progress writer (`agent-mismatch`).
pub(crate) fn anchored(kind: FileKind) -> Vec<&'static [&'static str]> {
    let mut fields = vec![squad_protocol::validate::task_ref_field(kind)];
    match kind {
        FileKind::Message => fields.push(&["meta", "message_id"]),
        FileKind::ProgressUpdate => fields.push(&["meta", "agent"]),
        _ => {}
    }
    // [`Anchors`] holds as many.
    debug_assert!(fields.len() <= 2);
    fields
}

/// Where each of a kind's anchored fields is in `text`: the positions
/// placing a finding on it in the text would give.
fn anchors_in(path: &Path, kind: FileKind, text: &str) -> Anchors {
    let fields = anchored(kind);
    let probes = fields
        .iter()
        .map(|field| squad_protocol::validate::Finding {
            rule: squad_protocol::Rule::UnknownTask,
            field: field
                .iter()
                .map(|k| squad_protocol::locate::PathSeg::Key((*k).to_string()))
                .collect(),
            target: squad_protocol::locate::Target::Value,
            message: String::new(),
            hint: String::new(),
        })
        .collect();
    let placed = squad_protocol::tree::place_in_text(path, Some(text), probes);
    let mut anchors = Anchors::default();
    for (slot, d) in anchors.iter_mut().zip(placed) {
        *slot = d.location;
    }
    anchors
}

/// Places session findings on a session's files: in the indexed text of a
/// file that keeps it, at the anchors of one that does not (the same
/// positions), without a position otherwise.
pub(crate) fn place_findings(
    dir: &Path,
    files: &Files,
    findings: Vec<SessionFinding>,
) -> Vec<Diagnostic> {
    let file_of = |path: &Path| files.get(path.file_name()?.to_str()?);
    let mut out = Vec::new();
    let mut rest = Vec::new();
    for mut f in findings {
        // Session rules name the session's files by name (see the
        // `SessionMember` impl of `IndexedFile`).
        f.path = dir.join(&f.path);
        match file_of(&f.path).filter(|i| !f.on_directory && !keeps_text(i.kind)) {
            Some(i) => {
                let at = anchored(i.kind)
                    .into_iter()
                    .zip(i.anchors)
                    .find_map(|(field, at)| {
                        let same = field.len() == f.finding.field.len()
                        && field.iter().zip(&f.finding.field).all(|(k, seg)| {
                            matches!(seg, squad_protocol::locate::PathSeg::Key(s) if s == k)
                        });
                        same.then_some(at)
                    });
                let g = f.finding;
                out.push(Diagnostic::new(&f.path, g.rule, g.message, g.hint).at(at.flatten()));
            }
            None => rest.push(f),
        }
    }
    out.extend(place_session_findings_with(rest, |path| {
        let text = file_of(path)?.text.as_deref()?;
        Some(std::borrow::Cow::Borrowed(text))
    }));
    out
}

/// The identity facts a valid entry says: (task, agent, message id).
fn entry_facts(entry: &Entry) -> Option<(Option<&str>, Option<&str>, Option<&str>)> {
    match entry {
        Entry::Message(m) => Some((
            m.task_id.as_deref(),
            Some(&m.from_agent),
            Some(&m.message_id),
        )),
        Entry::Progress(p) => Some((Some(&p.task_id), Some(&p.agent), None)),
        Entry::Error(e) => Some((e.task_id.as_deref(), Some(&e.agent), None)),
        // A plan's task and assignee (its dependencies, with their list
        // indexes, stay in the facts: the entry keeps the ids only).
        Entry::Plan(p) => Some((Some(&p.task_id), Some(&p.agent), None)),
        Entry::Status(_) | Entry::Invalid => None,
    }
}

/// What an entry keeps of a file's facts: nothing when its entry says
/// them all (checked, so a difference in how the two are read keeps the
/// facts rather than lose them).
fn kept_facts(entry: &Entry, facts: Facts) -> Option<Box<Facts>> {
    let (task, agent, message) = entry_facts(entry).unwrap_or_default();
    let said = facts.requires.is_empty()
        && facts.blocks.is_empty()
        && facts.task_id.as_deref() == task
        && facts.agent.as_deref() == agent
        && facts.message_id.as_deref() == message;
    (!said).then(|| Box::new(facts))
}

impl IndexedFile {
    /// Indexes a file of that kind at `path` from what was found in it.
    pub(crate) fn new(
        path: &Path,
        kind: FileKind,
        entry: Entry,
        facts: Facts,
        diagnostics: Vec<Diagnostic>,
        fingerprint: u64,
    ) -> IndexedFile {
        IndexedFile {
            name: name_of(path),
            kind,
            facts: kept_facts(&entry, facts),
            entry,
            diagnostics,
            fingerprint,
            text: None,
            anchors: Anchors::default(),
        }
    }

    /// The file's path, in the session directory `dir`.
    pub(crate) fn path_in(&self, dir: &Path) -> PathBuf {
        dir.join(&*self.name)
    }

    /// Whether the session rules see both files alike (same kind and
    /// identity facts): if so, a change from one to the other reruns none.
    pub(crate) fn same_identity(&self, other: &IndexedFile) -> bool {
        self.kind == other.kind
            && self.task_id() == other.task_id()
            && self.agent() == other.agent()
            && self.message_id() == other.message_id()
            && self.requires() == other.requires()
            && self.blocks() == other.blocks()
    }
}

/// The file name of a path, as the index keys it.
fn name_of(path: &Path) -> Box<str> {
    path.file_name()
        .map(|n| n.to_string_lossy().into())
        .unwrap_or_default()
}

/// Session rules see a file by its name: the findings they make are
/// joined to the session directory when placed ([`place_findings`]).
impl SessionMember for IndexedFile {
    fn path(&self) -> &Path {
        Path::new(&*self.name)
    }
    fn kind(&self) -> FileKind {
        self.kind
    }
    fn task_id(&self) -> Option<&str> {
        match &self.facts {
            Some(f) => f.task_id.as_deref(),
            None => entry_facts(&self.entry).and_then(|(task, _, _)| task),
        }
    }
    fn agent(&self) -> Option<&str> {
        match &self.facts {
            Some(f) => f.agent.as_deref(),
            None => entry_facts(&self.entry).and_then(|(_, agent, _)| agent),
        }
    }
    fn message_id(&self) -> Option<&str> {
        match &self.facts {
            Some(f) => f.message_id.as_deref(),
            None => entry_facts(&self.entry).and_then(|(_, _, id)| id),
        }
    }
    fn requires(&self) -> &[(usize, String)] {
        self.facts.as_deref().map_or(&[], |f| &f.requires)
    }
    fn blocks(&self) -> &[(usize, String)] {
        self.facts.as_deref().map_or(&[], |f| &f.blocks)
    }
}

/// A stable hash of file bytes.
pub(crate) fn fingerprint(bytes: &[u8]) -> u64 {
    // FNV-1a: stable across runs and processes, unlike std's RandomState.
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Builds an index entry from a file's bytes (pure).
pub(crate) fn index_bytes(path: &Path, kind: FileKind, bytes: &[u8]) -> IndexedFile {
    let report = check_bytes(path, kind, bytes);
    let text = std::str::from_utf8(bytes).ok();
    let entry = report.document.map_or(Entry::Invalid, Entry::from_document);
    IndexedFile {
        text: text.filter(|_| keeps_text(kind)).map(std::sync::Arc::from),
        anchors: match text {
            Some(t) if !keeps_text(kind) => anchors_in(path, kind, t),
            _ => Anchors::default(),
        },
        ..IndexedFile::new(
            path,
            kind,
            entry,
            report.facts,
            report.diagnostics,
            fingerprint(bytes),
        )
    }
}

/// Reads and indexes one file; `Ok(None)` when it no longer exists.
///
/// A failure for lack of file descriptors or memory is an `Err` to retry,
/// never indexed as the file's fault.
pub(crate) fn load_file(path: &Path, kind: FileKind) -> io::Result<Option<IndexedFile>> {
    match read_checked(path) {
        Ok(bytes) => Ok(Some(index_bytes(path, kind, &bytes))),
        Err(ReadFailure::Transient(e)) => Err(e),
        Err(ReadFailure::Refused(d)) => {
            if !path.exists() && std::fs::symlink_metadata(path).is_err() {
                return Ok(None);
            }
            // Unreadable, too large, not a file: indexed as invalid with its reason.
            Ok(Some(IndexedFile::new(
                path,
                kind,
                Entry::Invalid,
                Facts::default(),
                vec![d],
                0,
            )))
        }
    }
}

/// A session's indexed files, by name. The set keys on each file's own
/// [`IndexedFile::name`]: a long session holds each name once, and the
/// B-tree holds a pointer per file (a message's entry is a few hundred
/// bytes; inline, half-full nodes cost as much again).
#[derive(Debug, Clone, Default)]
pub(crate) struct Files(std::collections::BTreeSet<ByName>);

/// An indexed file ordered (and found) by its name.
#[derive(Debug, Clone)]
struct ByName(Box<IndexedFile>);

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.name.cmp(&other.0.name)
    }
}

impl std::borrow::Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        &self.0.name
    }
}

impl Files {
    /// The file of that name.
    pub(crate) fn get(&self, name: &str) -> Option<&IndexedFile> {
        self.0.get(name).map(|f| f.0.as_ref())
    }

    /// Whether a file of that name is indexed.
    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// Indexes a file under its name; returns the entry it replaces.
    pub(crate) fn insert(&mut self, file: IndexedFile) -> Option<IndexedFile> {
        self.0.replace(ByName(Box::new(file))).map(|f| *f.0)
    }

    /// Removes the file of that name.
    pub(crate) fn remove(&mut self, name: &str) -> Option<IndexedFile> {
        self.0.take(name).map(|f| *f.0)
    }

    /// The files, by name.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &IndexedFile> {
        self.0.iter().map(|f| f.0.as_ref())
    }

    /// (name, file) pairs, by name.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &IndexedFile)> {
        self.values().map(|f| (&*f.name, f))
    }

    /// How many files.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// One session directory.
#[derive(Debug, Clone)]
pub(crate) struct SessionIndex {
    /// Directory name.
    pub name: String,
    /// The directory.
    pub dir: PathBuf,
    /// Protocol files by file name.
    pub files: Files,
    /// Session-rule diagnostics, recomputed when files change.
    pub session_diagnostics: Vec<Diagnostic>,
}

impl SessionIndex {
    /// The full task assignment of `task` (the index keeps only what
    /// derivation needs): its plan file parsed again. `squadctl read` and
    /// squadd's runners read plans through it.
    pub(crate) fn full_plan(&self, task: &str) -> Option<squad_protocol::model::TaskAssignment> {
        self.files.values().find_map(|f| match &f.entry {
            Entry::Plan(p) if p.task_id == task => {
                let text = f.text.as_deref()?;
                match check_bytes(
                    &f.path_in(&self.dir),
                    FileKind::TaskAssignment,
                    text.as_bytes(),
                )
                .document
                {
                    Some(squad_protocol::model::Document::TaskAssignment(t)) => Some(t),
                    _ => None,
                }
            }
            _ => None,
        })
    }

    /// An empty session.
    pub(crate) fn new(dir: PathBuf) -> Self {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        SessionIndex {
            name,
            dir,
            files: Files::default(),
            session_diagnostics: Vec::new(),
        }
    }

    /// The indexed file of that name.
    pub(crate) fn file(&self, name: &str) -> Option<&IndexedFile> {
        self.files.get(name)
    }

    /// Indexes (or re-indexes) a file of the session.
    pub(crate) fn insert(&mut self, name: String, mut file: IndexedFile) {
        // The set keys on the file's own name; the caller's wins.
        if *file.name != *name {
            file.name = name.into();
        }
        self.files.insert(file);
    }

    /// Recomputes the session-rule diagnostics, placing findings in the
    /// text each file had when indexed (no reads).
    pub(crate) fn recheck(&mut self) {
        let files: Vec<&IndexedFile> = self.files.values().collect();
        let findings = check_session(&self.dir, &files);
        self.session_diagnostics = place_findings(&self.dir, &self.files, findings);
    }

    /// Every diagnostic of the session: file rules and session rules.
    pub(crate) fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files
            .values()
            .flat_map(|f| f.diagnostics.iter())
            .chain(self.session_diagnostics.iter())
    }

    /// The status file entry, when valid.
    pub(crate) fn status(&self) -> Option<&StatusInfo> {
        match self
            .files
            .get(squad_protocol::kind::SESSION_STATUS_FILE)
            .map(|f| &f.entry)
        {
            Some(Entry::Status(s)) => Some(s),
            _ => None,
        }
    }

    /// Valid task assignments.
    pub(crate) fn plans(&self) -> impl Iterator<Item = &Plan> {
        self.files.values().filter_map(|f| match &f.entry {
            Entry::Plan(p) => Some(p.as_ref()),
            _ => None,
        })
    }

    /// Valid progress updates.
    pub(crate) fn progress(&self) -> impl Iterator<Item = &Progress> {
        self.files.values().filter_map(|f| match &f.entry {
            Entry::Progress(p) => Some(p.as_ref()),
            _ => None,
        })
    }
}

/// Loads every session of a project root, parsing files on `threads` workers.
pub(crate) fn scan_root(root: &Path, threads: usize) -> io::Result<BTreeMap<String, SessionIndex>> {
    // squadd supervises only directories named like sessions (see
    // daemon::intake::classify); `validate` still warns about the others.
    let dirs: Vec<PathBuf> = session_dirs(root)?
        .into_iter()
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(squad_protocol::ids::is_session_dir_name)
        })
        .collect();
    let mut work: Vec<(usize, PathBuf, FileKind)> = Vec::new();
    let mut sessions: Vec<SessionIndex> = Vec::new();
    for (i, dir) in dirs.into_iter().enumerate() {
        // A session removed between listing and reading is simply gone.
        let files = session_files(&dir).unwrap_or_default();
        work.extend(files.into_iter().map(|(p, k)| (i, p, k)));
        sessions.push(SessionIndex::new(dir));
    }
    let loaded = parallel_map(&work, threads, |(_, path, kind)| {
        // Out of file descriptors is the machine's fault, not the file's:
        // wait a little and try again rather than drop or condemn it.
        let mut delay = Duration::from_millis(20);
        loop {
            match load_file(path, *kind) {
                Err(e) if squad_protocol::fsx::is_transient_io(&e) && delay.as_secs() < 2 => {
                    std::thread::sleep(delay);
                    delay *= 2;
                }
                other => return other,
            }
        }
    });
    for ((i, path, _), file) in work.iter().zip(loaded) {
        if let Ok(Some(file)) = file {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            sessions[*i].insert(name, file);
        }
    }
    let mut out = BTreeMap::new();
    for mut s in sessions {
        s.recheck();
        out.insert(s.name.clone(), s);
    }
    Ok(out)
}

/// Loads one session directory.
pub(crate) fn scan_session(dir: &Path) -> io::Result<SessionIndex> {
    load_session(dir, session_files(dir)?)
}

/// Loads the session `dir` from `files` (its protocol files, or a part of
/// them: `squadctl`'s agent commands leave the messages out, whose number
/// grows with the session and which decide nothing they do).
pub(crate) fn load_session(
    dir: &Path,
    files: Vec<(PathBuf, FileKind)>,
) -> io::Result<SessionIndex> {
    let mut s = SessionIndex::new(dir.to_path_buf());
    for (path, kind) in files {
        if let Some(file) = load_file(&path, kind)? {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            s.insert(name, file);
        }
    }
    s.recheck();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// An entry that says a file's identity facts keeps no second copy of
    /// them; what session rules read is the same either way.
    #[test]
    fn identity_facts_read_from_the_entry_equal_the_validators() {
        let dir = Path::new("/p/.squad/sessions/20240115T100000Z");
        let table: &[(&str, &str)] = &[
            (
                "role-comm-bob-to-alice-msg_1.md",
                "meta:\n  message_id: msg_1\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ntype: question\nsubject: s\nmessage: m\ncontext:\n  task_id: task_9\n",
            ),
            (
                "role-comm-bob-to-alice-msg_2.md",
                "meta:\n  message_id: msg_2\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: low\ntype: notification\nsubject: s\nmessage: m\n",
            ),
            // Invalid (no type): its facts come from what could be read.
            (
                "role-comm-bob-to-alice-msg_3.md",
                "meta:\n  message_id: msg_3\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: low\nsubject: s\n",
            ),
            (
                "error-alice-20240115T103800Z.md",
                "error_id: err_20240115T103800Z_ab\nagent: alice\ntask_id: task_alice\nseverity: error\noccurred_at: 2024-01-15T10:38:00Z\nerror:\n  type: BuildBroken\n  message: linker failed\n",
            ),
            (
                "role-comm-carol-task_2.md",
                "meta:\n  task_id: task_2\n  agent: carol\n  updated_at: 2024-01-15T10:00:00Z\nstatus: in_progress\n",
            ),
            (
                "role-plan-carol-task_2.md",
                "meta:\n  task_id: task_2\n  agent: carol\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\ndependencies:\n  requires: [task_1]\n  blocks: [task_3]\n",
            ),
            (
                "session-status.md",
                "session_id: s\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
            ),
            ("role-plan-x-task_5.md", "meta: ["),
            // A plan without dependencies: its entry says task and agent.
            (
                "role-plan-dave-task_4.md",
                "meta:\n  task_id: task_4\n  agent: dave\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n",
            ),
        ];
        let mut held_none = 0;
        for (name, text) in table {
            let path = dir.join(name);
            let kind = FileKind::from_file_name(name).unwrap();
            let report = check_bytes(&path, kind, text.as_bytes());
            let f = index_bytes(&path, kind, text.as_bytes());
            let facts = &report.facts;
            assert_eq!(f.task_id(), facts.task_id.as_deref(), "{name}");
            assert_eq!(f.agent(), facts.agent.as_deref(), "{name}");
            assert_eq!(f.message_id(), facts.message_id.as_deref(), "{name}");
            assert_eq!(f.requires(), &facts.requires[..], "{name}");
            assert_eq!(f.blocks(), &facts.blocks[..], "{name}");
            let no_edges = facts.requires.is_empty() && facts.blocks.is_empty();
            let said = matches!(
                kind,
                FileKind::Message | FileKind::ProgressUpdate | FileKind::ErrorReport
            ) || (kind == FileKind::TaskAssignment && no_edges);
            if said && report.document.is_some() {
                held_none += 1;
                assert!(f.facts.is_none(), "{name}: facts said by its entry");
            } else if !no_edges {
                assert!(f.facts.is_some(), "{name}: its dependencies are facts");
            }
        }
        // Before, a plan kept a second copy of its task id and assignee.
        assert_eq!(
            held_none, 5,
            "two messages, a progress update, an error report, a plan without dependencies"
        );
    }

    /// A message keeps no text, yet its session findings land where placing
    /// them in its text would put them.
    #[test]
    fn findings_on_a_message_land_where_its_text_would_place_them() {
        let dir = Path::new("/p/.squad/sessions/20240115T100000Z");
        let text = "meta:\n  message_id: msg_1\n  from_agent: bob\n  to_agent: alice\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ntype: question\nsubject: s\nmessage: m\ncontext:\n  task_id: task_9\n";
        let mut files = Files::default();
        for name in [
            "role-comm-bob-to-alice-msg_1.md",
            "role-comm-bob-to-carol-msg_1.md",
        ] {
            let f = index_bytes(&dir.join(name), FileKind::Message, text.as_bytes());
            assert!(f.text.is_none(), "messages keep no text");
            files.insert(f);
        }
        let all: Vec<&IndexedFile> = files.values().collect();
        let findings = check_session(dir, &all);
        let rules: BTreeSet<_> = findings.iter().map(|f| f.finding.rule).collect();
        assert!(
            rules.contains(&squad_protocol::Rule::UnknownTask),
            "{findings:?}"
        );
        assert!(
            rules.contains(&squad_protocol::Rule::DuplicateMessageId),
            "{findings:?}"
        );
        // Session rules name the files by name; placed, they are paths.
        let named: Vec<SessionFinding> = findings
            .iter()
            .cloned()
            .map(|mut f| {
                f.path = dir.join(&f.path);
                f
            })
            .collect();
        let from_text =
            place_session_findings_with(named, |_| Some(std::borrow::Cow::Borrowed(text)));
        let sorted = |mut v: Vec<Diagnostic>| {
            v.sort_by_key(|d| format!("{d:?}"));
            v
        };
        let placed = sorted(place_findings(dir, &files, findings));
        let on_files = placed.iter().filter(|d| d.path.extension().is_some());
        assert!(on_files.clone().count() >= 2 && on_files.clone().all(|d| d.location.is_some()));
        assert_eq!(placed, sorted(from_text));
    }
}
