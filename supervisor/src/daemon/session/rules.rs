//! The session-rule findings of a [`SessionCore`]: which files a change\n//! asks to re-check, and the diagnostics assembled from them.

use super::*;

impl SessionCore {
    /// Runs every session rule: the graph rules over plans and status files,
    /// the per-file rules over every other file.
    /// Used where a session is built whole (new, loaded); a change runs
    /// only the rules it can affect (see [`SessionCore::apply`]).
    pub(super) fn recheck_all(&mut self) {
        self.recheck_graph();
        self.recheck_messages();
        self.member_diags.clear();
        let others: Vec<String> = self
            .index
            .files
            .iter()
            .filter(|(_, f)| !matches!(f.kind, FileKind::TaskAssignment | FileKind::SessionStatus))
            .map(|(n, _)| n.to_string())
            .collect();
        for name in others {
            self.recheck_member(&name);
        }
        self.assemble_diagnostics();
    }

    /// Runs the graph rules (duplicate tasks and status files, unknown
    /// dependencies, contradictions, cycles) over plans and status files.
    pub(super) fn recheck_graph(&mut self) {
        let structural: Vec<&IndexedFile> = self
            .structural
            .iter()
            .filter_map(|name| self.index.file(name))
            .collect();
        let findings = check_session(&self.index.dir, &structural);
        self.graph_diags = self.place(findings);
    }

    /// The plan file session rules count for a task: the first by name of
    /// the plan files naming it.
    pub(super) fn rule_plan(&self, task: &str) -> Option<&IndexedFile> {
        let (t, name) = self
            .rule_plans
            .starting_at(|k| cmp_pair(k, (task, "")))
            .first()?;
        (&**t == task).then(|| self.index.file(name))?
    }

    /// Runs the per-file rules of every file naming `task` (its plans
    /// changed).
    pub(super) fn recheck_task_members(&mut self, task: &str) {
        let members: Vec<String> = self
            .task_members
            .range((task.to_string(), String::new())..)
            .take_while(|(t, _)| t == task)
            .map(|(_, name)| name.clone())
            .collect();
        for name in members {
            self.recheck_member(&name);
        }
    }

    /// Runs the per-file session rules for one file that is not a plan.
    pub(super) fn recheck_member(&mut self, file: &str) {
        self.member_checks += 1;
        let Some(f) = self.index.file(file) else {
            self.member_diags.remove(file);
            return;
        };
        let plans: BTreeMap<&str, &IndexedFile> = f
            .task_id()
            .and_then(|t| {
                let plan = self.rule_plan(t)?;
                Some((t, plan))
            })
            .into_iter()
            .collect();
        let found: Vec<_> = member_finding(&plans, f).into_iter().collect();
        let placed = self.place(found);
        if placed.is_empty() {
            self.member_diags.remove(file);
        } else {
            self.member_diags.insert(file.to_string(), placed);
        }
    }

    /// Places findings in the text each file had when indexed (no reads).
    pub(super) fn place(&self, findings: Vec<SessionFinding>) -> Vec<squad_protocol::Diagnostic> {
        crate::index::place_findings(&self.index.dir, &self.index.files, findings)
    }

    /// Runs the message-id rule over the session's messages (only ids
    /// carried by more than one file can have findings).
    pub(super) fn recheck_messages(&mut self) {
        self.message_diags.clear();
        // The ids of every file whose id hash another file shares.
        let mut shared: BTreeSet<String> = BTreeSet::new();
        let mut previous: Option<&(u64, String)> = None;
        for pair in &self.message_ids {
            if let Some(before) = previous.filter(|p| p.0 == pair.0) {
                for (_, name) in [before, pair] {
                    if let Some(id) = self.index.file(name).and_then(message_id) {
                        shared.insert(id);
                    }
                }
            }
            previous = Some(pair);
        }
        self.recheck_message_ids(shared.into_iter().collect());
    }

    /// Runs the message-id rule over the files carrying these ids.
    pub(super) fn recheck_message_ids(&mut self, ids: Vec<String>) {
        for id in ids {
            let files: Vec<&IndexedFile> = self.files_with_id(&id).map(|(_, f)| f).collect();
            let files = if files.len() > 1 { files } else { Vec::new() };
            let placed = self.place(duplicate_message_ids(&files));
            if placed.is_empty() {
                self.message_diags.remove(&id);
            } else {
                self.message_diags.insert(id, placed);
            }
        }
        self.assemble_diagnostics();
    }

    pub(super) fn assemble_diagnostics(&mut self) {
        self.index.session_diagnostics = self
            .graph_diags
            .iter()
            .chain(self.message_diags.values().flatten())
            .chain(self.member_diags.values().flatten())
            .cloned()
            .collect();
    }
}
