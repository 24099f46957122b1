//! The task graph as SVG, laid out in Rust (no Graphviz): layered by the
//! longest chain of prerequisites, each layer ordered by where its
//! prerequisites stand (one barycentre pass), the critical path (the
//! longest chain of tasks not completed) and the edges still waited for
//! (blocked) marked. One node per task, each a link to its task page.

use super::html;
use crate::derive::{SessionView, TaskView};
use squad_protocol::model::TaskStatus;
use std::collections::{BTreeMap, BTreeSet};

const W: usize = 180;
const H: usize = 54;
const COL_GAP: usize = 70;
const ROW_GAP: usize = 22;
const PAD: usize = 20;

/// Where each task stands and what is critical.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Layout {
    /// The tasks of each layer, in drawing order.
    pub layers: Vec<Vec<String>>,
    /// The tasks on the critical path.
    pub critical: BTreeSet<String>,
    /// The edges (prerequisite, task) on the critical path.
    pub critical_edges: BTreeSet<(String, String)>,
}

/// The state word a node shows (as `squadctl graph`).
pub(super) fn state_word(t: &TaskView) -> &'static str {
    if t.overdue {
        "overdue"
    } else if t.ready {
        "ready"
    } else {
        t.state.as_str()
    }
}

/// The prerequisites of `t` that are tasks of the graph (not itself).
fn prerequisites<'a>(t: &'a TaskView, ids: &BTreeSet<&str>) -> Vec<&'a str> {
    t.prerequisites
        .iter()
        .map(String::as_str)
        .filter(|p| ids.contains(p) && *p != t.task_id)
        .collect()
}

/// Lays out `view`'s tasks.
pub(super) fn layout(view: &SessionView) -> Layout {
    let ids: BTreeSet<&str> = view.tasks.iter().map(|t| t.task_id.as_str()).collect();
    let preds = |t| prerequisites(t, &ids);
    // Longest chain from a source; a cycle (a validation error) stops
    // growing after as many rounds as there are tasks.
    let mut layer: BTreeMap<&str, usize> = ids.iter().map(|&i| (i, 0)).collect();
    for _ in 0..view.tasks.len() {
        let mut moved = false;
        for t in &view.tasks {
            for p in preds(t) {
                let want = layer.get(p).copied().unwrap_or(0) + 1;
                let cur = layer.get(t.task_id.as_str()).copied().unwrap_or(0);
                if want > cur && want < view.tasks.len().max(1) {
                    layer.insert(t.task_id.as_str(), want);
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let depth = layer.values().copied().max().map_or(0, |d| d + 1);
    let mut layers: Vec<Vec<String>> = vec![Vec::new(); depth];
    let mut row: BTreeMap<&str, f64> = BTreeMap::new();
    for (l, slot) in layers.iter_mut().enumerate() {
        let mut here: Vec<(f64, &str)> = view
            .tasks
            .iter()
            .filter(|t| layer.get(t.task_id.as_str()) == Some(&l))
            .map(|t| {
                let ps: Vec<f64> = preds(t)
                    .iter()
                    .filter_map(|p| row.get(p).copied())
                    .collect();
                let bary = if ps.is_empty() {
                    f64::MAX
                } else {
                    ps.iter().sum::<f64>() / ps.len() as f64
                };
                (bary, t.task_id.as_str())
            })
            .collect();
        here.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
        for (i, (_, id)) in here.iter().enumerate() {
            row.insert(id, i as f64);
        }
        *slot = here.into_iter().map(|(_, id)| id.to_string()).collect();
    }
    // Critical path: the longest chain counting tasks not completed,
    // following edges to lower layers only (so a cycle cannot loop).
    let by_id: BTreeMap<&str, &TaskView> =
        view.tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    let mut dist: BTreeMap<&str, (usize, Option<&str>)> = BTreeMap::new();
    for id in layers.iter().flatten() {
        let Some(t) = by_id.get(id.as_str()) else {
            continue;
        };
        let own = usize::from(t.state != TaskStatus::Completed);
        let lt = layer.get(id.as_str()).copied().unwrap_or(0);
        let best = preds(t)
            .into_iter()
            .filter(|p| layer.get(p).copied().unwrap_or(0) < lt)
            .filter_map(|p| dist.get(p).map(|d| (d.0, p)))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)));
        let entry = match best {
            Some((d, p)) => (d + own, Some(p)),
            None => (own, None),
        };
        dist.insert(t.task_id.as_str(), entry);
    }
    let mut out = Layout {
        layers,
        ..Layout::default()
    };
    let end = dist
        .iter()
        .max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(a.0)))
        .filter(|(_, d)| d.0 > 0)
        .map(|(id, _)| *id);
    let mut at = end;
    while let Some(id) = at {
        out.critical.insert(id.to_string());
        let prev = dist.get(id).and_then(|d| d.1);
        if let Some(p) = prev {
            out.critical_edges.insert((p.to_string(), id.to_string()));
        }
        at = prev;
    }
    out
}

/// `s` cut to `n` characters, `…` marking the cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// The fill of a state word (CSS overrides it for the dark scheme).
fn fill(word: &str) -> &'static str {
    match word {
        "completed" => "#b7e4c7",
        "in_progress" => "#a9d6f5",
        "ready" => "#fff3b0",
        "blocked" => "#f8b4b4",
        "overdue" => "#f4a261",
        _ => "#e9ecef",
    }
}

/// The SVG of `view` (session `session`), nodes linking to task pages.
pub(super) fn svg(view: &SessionView, session: &str) -> String {
    let l = layout(view);
    let mut at: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (li, ids) in l.layers.iter().enumerate() {
        for (ri, id) in ids.iter().enumerate() {
            at.insert(
                id.as_str(),
                (PAD + li * (W + COL_GAP), PAD + ri * (H + ROW_GAP)),
            );
        }
    }
    let cols = l.layers.len().max(1);
    let rows = l.layers.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let width = 2 * PAD + cols * W + (cols - 1) * COL_GAP;
    let height = 2 * PAD + rows * H + (rows - 1) * ROW_GAP;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"graph\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" aria-label=\"task graph of {}\">\n\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker></defs>\n",
        html(session)
    );
    for t in &view.tasks {
        let Some(&(tx, ty)) = at.get(t.task_id.as_str()) else {
            continue;
        };
        for p in &t.prerequisites {
            let Some(&(px, py)) = at.get(p.as_str()) else {
                continue;
            };
            let blocked = t.unmet.contains(p);
            let critical = l.critical_edges.contains(&(p.clone(), t.task_id.clone()));
            let (x1, y1, x2, y2) = (px + W, py + H / 2, tx, ty + H / 2);
            let mid = (x1 + x2) / 2;
            let mut class = String::from("edge");
            if blocked {
                class.push_str(" blocked");
            }
            if critical {
                class.push_str(" critical");
            }
            out.push_str(&format!(
                "<path class=\"{class}\" data-from=\"{pf}\" data-to=\"{to}\" data-blocked=\"{blocked}\" d=\"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{sw}\"{dash} marker-end=\"url(#arrow)\"><title>{pf} → {to}{why}</title></path>\n",
                pf = html(p),
                to = html(&t.task_id),
                stroke = if critical { "#c0392b" } else { "#555" },
                sw = if critical { 3 } else { 2 },
                dash = if blocked { " stroke-dasharray=\"6 4\"" } else { "" },
                why = if blocked { " (blocked: waits for it)" } else { "" },
            ));
        }
    }
    for t in &view.tasks {
        let Some(&(x, y)) = at.get(t.task_id.as_str()) else {
            continue;
        };
        let word = state_word(t);
        let critical = l.critical.contains(&t.task_id);
        out.push_str(&format!(
            "<a href=\"/s/{s}/t/{id}\"><g class=\"node state-{word}{crit}\" data-task=\"{id}\" data-state=\"{word}\" transform=\"translate({x},{y})\"><title>{id}: {agent}, {word}{critt}</title><rect width=\"{W}\" height=\"{H}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"{sw}\"/><text x=\"10\" y=\"21\" class=\"id\" font-weight=\"bold\">{short}</text><text x=\"10\" y=\"42\" class=\"sub\">{sub}</text></g></a>\n",
            s = html(session),
            id = html(&t.task_id),
            crit = if critical { " critical" } else { "" },
            critt = if critical { ", on the critical path" } else { "" },
            agent = html(&t.agent),
            fill = fill(word),
            stroke = if critical { "#c0392b" } else { "#333" },
            sw = if critical { 3 } else { 1 },
            short = html(&cut(&t.task_id, 22)),
            sub = html(&cut(&format!("{} · {word}", t.agent), 26)),
        ));
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use squad_protocol::model::Priority;

    fn task(id: &str, state: TaskStatus, pre: &[&str], unmet: &[&str]) -> TaskView {
        TaskView {
            task_id: id.into(),
            agent: "a".into(),
            priority: Priority::High,
            state,
            prerequisites: pre.iter().map(|s| s.to_string()).collect(),
            unmet: unmet.iter().map(|s| s.to_string()).collect(),
            ready: false,
            violation: false,
            started_at: None,
            due_at: None,
            overdue: false,
            blockers: Vec::new(),
        }
    }

    fn view(tasks: Vec<TaskView>) -> SessionView {
        let mut v: SessionView = serde_json::from_value(serde_json::json!({
            "name": "s", "session_id": null, "status": "active", "phase": null,
            "tasks_total": 0, "tasks_completed": 0, "agents_active": [], "tasks": [],
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        v.tasks = tasks;
        v
    }

    #[test]
    fn layers_follow_prerequisites_and_the_critical_path_is_the_longest_open_chain() {
        use TaskStatus::*;
        let v = view(vec![
            task("a", Completed, &[], &[]),
            task("b", InProgress, &["a"], &[]),
            task("c", Pending, &["b"], &["b"]),
            task("d", Pending, &["a"], &[]),
        ]);
        let l = layout(&v);
        assert_eq!(l.layers, vec![vec!["a"], vec!["b", "d"], vec!["c"]]);
        assert_eq!(
            l.critical,
            ["a", "b", "c"].iter().map(|s| s.to_string()).collect()
        );
        let svg = svg(&v, "s");
        assert_eq!(svg.matches("class=\"node ").count(), 4, "{svg}");
        assert_eq!(svg.matches("data-blocked=\"true\"").count(), 1, "{svg}");
        assert!(svg.contains("href=\"/s/s/t/c\""), "{svg}");
    }

    #[test]
    fn a_cycle_does_not_hang_and_names_are_escaped() {
        use TaskStatus::*;
        let v = view(vec![
            task("x<y", Pending, &["z"], &["z"]),
            task("z", Pending, &["x<y"], &["x<y"]),
        ]);
        let svg = svg(&v, "s");
        assert_eq!(svg.matches("class=\"node ").count(), 2, "{svg}");
        assert!(!svg.contains("x<y"), "{svg}");
    }
}
