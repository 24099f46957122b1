//! The session core's secondary indexes: message ids, structural files,
//! the files each task's plan and reports name, and the dependency edges,
//! kept in step with the files one at a time.

use super::*;

impl SessionCore {
    /// Adds a file to the secondary indexes.
    pub(super) fn index_in(&mut self, file: &str, f: &IndexedFile) {
        if let Some(id) = message_id(f) {
            self.message_ids.insert((id_key(&id), file.to_string()));
        }
        if is_structural(f) {
            self.structural.insert(file.to_string());
        }
        if let Some(key) = rule_key(f, file) {
            if f.kind == FileKind::TaskAssignment {
                self.rule_plans.insert(key);
            } else {
                self.task_members.insert(key);
            }
        }
        match &f.entry {
            Entry::Plan(p) => {
                self.plan_files
                    .entry(p.task_id.clone())
                    .or_default()
                    .insert(file);
            }
            Entry::Progress(p) => {
                self.report_files
                    .entry((p.task_id.clone(), p.agent.clone()))
                    .or_default()
                    .insert(file);
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
            self.structural.remove(file);
        }
        if let Some(key) = rule_key(f, file) {
            if f.kind == FileKind::TaskAssignment {
                self.rule_plans.remove(&key);
            } else {
                self.task_members.remove(&key);
            }
        }
        match &f.entry {
            Entry::Plan(p) => {
                if let Some(s) = self.plan_files.get_mut(&p.task_id) {
                    s.remove(file);
                    if s.is_empty() {
                        self.plan_files.remove(&p.task_id);
                    }
                }
            }
            Entry::Progress(p) => {
                let key = (p.task_id.clone(), p.agent.clone());
                if let Some(s) = self.report_files.get_mut(&key) {
                    s.remove(file);
                    if s.is_empty() {
                        self.report_files.remove(&key);
                    }
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

    /// The assignee's latest progress update on a task.
    pub(super) fn report(&self, task: &str, agent: &str) -> Option<&Progress> {
        let files = self
            .report_files
            .get(&(task.to_string(), agent.to_string()))?;
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
            self.contributed.insert(task.to_string(), new);
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
