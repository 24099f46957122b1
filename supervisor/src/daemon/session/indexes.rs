//! The session core's secondary indexes: message ids, structural files,
//! the files each task's plan and reports name, and the dependency edges,
//! kept in step with the files one at a time.

use super::*;
use crate::outputs::ContextFragment;

impl SessionCore {
    /// Adds a file to the secondary indexes.
    pub(super) fn index_in(&mut self, file: &str, f: &IndexedFile) {
        if let Some(id) = message_id(f) {
            self.message_ids.insert((id_key(&id), file.to_string()));
        }
        if is_structural(f) {
            self.structural.insert(file.into());
        }
        if let Some((task, file)) = rule_key(f, file) {
            if f.kind == FileKind::TaskAssignment {
                self.rule_plans.insert((task.into(), file.into()));
            } else {
                self.task_members
                    .insert((task.to_string(), file.to_string()));
            }
        }
        match &f.entry {
            Entry::Plan(p) => {
                self.plan_files
                    .entry_or_default(p.task_id.as_str(), |t| t.into())
                    .insert(file);
            }
            Entry::Progress(p) => {
                let key = (p.task_id.as_str(), p.agent.as_str());
                self.report_files
                    .entry_by_or_default(|k| cmp_pair(k, key), || (key.0.into(), key.1.into()))
                    .insert(file);
                if !p.decisions.is_empty() {
                    self.decision_files.insert((p.updated_at, file.into()));
                    self.decisions_changed = true;
                }
            }
            _ => {}
        }
    }

    /// Removes a file from the secondary indexes.
    pub(super) fn index_out(&mut self, file: &str, f: &IndexedFile) {
        if let Some(id) = message_id(f) {
            self.message_ids.remove(&(id_key(&id), file.to_string()));
        }
        if is_structural(f) {
            self.structural.remove_by(|n| (**n).cmp(file));
        }
        if let Some((task, file)) = rule_key(f, file) {
            if f.kind == FileKind::TaskAssignment {
                self.rule_plans.remove_by(|k| cmp_pair(k, (task, file)));
            } else {
                self.task_members
                    .remove(&(task.to_string(), file.to_string()));
            }
        }
        match &f.entry {
            Entry::Plan(p) => {
                if let Some(s) = self.plan_files.get_mut(p.task_id.as_str()) {
                    s.remove(file);
                    if s.is_empty() {
                        self.plan_files.remove(p.task_id.as_str());
                    }
                }
            }
            Entry::Progress(p) => {
                let key = (p.task_id.as_str(), p.agent.as_str());
                if let Some(s) = self.report_files.get_mut_by(|k| cmp_pair(k, key)) {
                    s.remove(file);
                    if s.is_empty() {
                        self.report_files.remove_by(|k| cmp_pair(k, key));
                    }
                }
                if !p.decisions.is_empty() {
                    let at = p.updated_at;
                    self.decision_files
                        .remove_by(|(t, f)| t.cmp(&at).then_with(|| (**f).cmp(file)));
                    self.decisions_changed = true;
                }
            }
            _ => {}
        }
    }

    /// The tasks a file's entry bears on.
    pub(super) fn touch(&self, f: &IndexedFile, touched: &mut BTreeSet<String>) {
        match &f.entry {
            Entry::Plan(p) => {
                touched.insert(p.task_id.clone());
            }
            Entry::Progress(p) => {
                touched.insert(p.task_id.clone());
            }
            _ => {}
        }
    }

    pub(super) fn plan(&self, task: &str) -> Option<&Plan> {
        let file = self.plan_files.get(task)?.first()?;
        match &self.index.file(file)?.entry {
            Entry::Plan(p) => Some(p),
            _ => None,
        }
    }

    /// An agent's latest progress update on a task (of equally recent
    /// ones, the first by file name): the one that counts for the task's
    /// state and its shared-context entry.
    pub(super) fn report(&self, task: &str, agent: &str) -> Option<&Progress> {
        let files = self.report_files.get_by(|k| cmp_pair(k, (task, agent)))?;
        let mut best: Option<&Progress> = None;
        for name in files.iter() {
            if let Some(Entry::Progress(p)) = self.index.file(name).map(|f| &f.entry)
                && best.is_none_or(|b| p.updated_at > b.updated_at)
            {
                best = Some(p);
            }
        }
        best
    }

    /// Whether the session's part of the shared context is behind (a task
    /// re-derived, or decisions came or went, since it was last brought up
    /// to date): a message changes neither, and its part is left as is
    /// (not copied from under the background writer).
    pub(crate) fn context_changed(&self) -> bool {
        !self.dirty.is_empty() || self.decisions_changed
    }

    /// Brings the session's part of the shared context up to date with
    /// what changed since the last call (everything when `whole`): the
    /// tasks re-derived since, and the decisions when a progress update
    /// with decisions came or went. Work follows the change: the session's
    /// other files are never walked.
    pub(crate) fn refresh_context(&mut self, part: &mut ContextFragment, whole: bool) {
        if !whole && !self.context_changed() {
            return;
        }
        let dirty = std::mem::take(&mut self.dirty);
        let decisions_changed = std::mem::take(&mut self.decisions_changed);
        let decisions = (whole || decisions_changed).then(|| {
            self.decision_files
                .iter()
                .filter_map(|(_, f)| match &self.index.file(f)?.entry {
                    Entry::Progress(p) => Some(&**p),
                    _ => None,
                })
        });
        part.update(
            &self.index.name,
            decisions,
            |task, agent| self.report(task, agent),
            |t| self.tasks.get(t),
            self.tasks.values(),
            (!whole).then_some(&dirty),
        );
    }

    pub(super) fn state_of(&self, task: &str) -> Option<TaskStatus> {
        let plan = self.plan(task)?;
        Some(
            self.report(task, &plan.agent)
                .map_or(TaskStatus::Pending, |p| p.status),
        )
    }

    /// Brings a task's contributed edges in line with its effective plan;
    /// tasks whose prerequisites changed join `touched`.
    pub(super) fn refresh_edges(&mut self, task: &str, touched: &mut BTreeSet<String>) {
        // The edges a task contributes: (t, prerequisite) pairs.
        let contributed = |plan: Option<&Plan>| -> Vec<(String, String)> {
            let Some(p) = plan else {
                return Vec::new();
            };
            let mut v: Vec<(String, String)> = p
                .requires
                .iter()
                .map(|r| (p.task_id.clone(), r.clone()))
                .collect();
            v.extend(p.blocks.iter().map(|b| (b.clone(), p.task_id.clone())));
            v
        };
        let new = contributed(self.plan(task));
        let old = self.contributed.remove(task).unwrap_or_default();
        if old == new {
            // A task contributing no edge (most) has no entry.
            if !new.is_empty() {
                self.contributed.insert(task.to_string(), new);
            }
            return;
        }
        for (t, r) in &old {
            remove_edge(&mut self.prereqs, t, r);
            remove_edge(&mut self.dependents, r, t);
            touched.insert(t.clone());
        }
        for (t, r) in &new {
            add_edge(&mut self.prereqs, t, r);
            add_edge(&mut self.dependents, r, t);
            touched.insert(t.clone());
        }
        if !new.is_empty() {
            self.contributed.insert(task.to_string(), new);
        }
    }
}
