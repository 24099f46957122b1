//! What a live run's output said, as the core's input
//! ([`super::super::Input::RunOutput`]): its tokens priced by config.json's
//! `prices` into the run's record, the CLI's own model warning kept there
//! (a needs-attention item, `attention.rs`), and the run's budget
//! (`runners.budget.run`) held: a run past it is stopped like one past its
//! time limit (SIGTERM, SIGKILL after the grace), then held, and the lead
//! told the figures ([`super::decide::exited`]).

use super::{Effect, Live, Now, Root, RootId, RunKey, emit, record};
use crate::events::EventKind;
use crate::runners::{OutputSeen, Signal};
use squad_policies::budget::{self, Budget};
use squad_policies::usage::{self, Usage};

/// A run's output said something new.
pub(crate) fn seen(
    root: &mut Root,
    id: RootId,
    run: &RunKey,
    seen: OutputSeen,
    now: Now,
) -> Vec<Effect> {
    let prices = &root.runs.config.prices;
    let budget = root.policy.runners.budget.run;
    let Some(live) = root.runs.live.get_mut(run) else {
        return Vec::new();
    };
    let before = (
        live.rec.usage.clone(),
        live.rec.model_warning.clone(),
        live.rec.conversation.clone(),
    );
    if let Some(reported) = &seen.reported {
        let now_used = usage::priced(reported, prices, live.rec.model.as_deref());
        live.rec.usage = usage::sum(live.usage_base.iter().chain([&now_used]));
    }
    if live.rec.model_warning.is_none() {
        live.rec.model_warning = seen.warning;
    }
    // What a later run resumes (docs/runners.md, "Resuming the agent's
    // conversation").
    if seen.conversation.is_some() {
        live.rec.conversation = seen.conversation;
    }
    let mut out = Vec::new();
    if let Some(step) = hold_to_budget(live, &budget, now) {
        out.extend(step.into_iter().map(|s| match s {
            Stop::Signal(signal) => Effect::SignalRun {
                root: id,
                pid: live.rec.pid,
                signal,
            },
            Stop::Event(kind) => emit(id, &live.rec.session, &live.dir, kind),
        }));
    }
    let after = (
        live.rec.usage.clone(),
        live.rec.model_warning.clone(),
        live.rec.conversation.clone(),
    );
    if after != before || !out.is_empty() {
        out.insert(0, record(&live.dir, &live.rec));
    }
    out
}

enum Stop {
    Signal(Signal),
    Event(EventKind),
}

/// A live run past its budget, once: SIGTERM and `agent-over-budget`;
/// the grace and SIGKILL then follow as after a time limit
/// ([`super::decide::look`]), and its end holds it.
fn hold_to_budget(live: &mut Live, budget: &Budget, now: Now) -> Option<Vec<Stop>> {
    if live.rec.over_budget.is_some() || live.ended.is_some() || !budget.is_set() {
        return None;
    }
    let used: &Usage = live.rec.usage.as_ref()?;
    let figures = budget::over_budget(budget, used, 1.0)?;
    live.rec.over_budget = Some(figures.clone());
    // An earlier SIGTERM (its time limit) keeps its time: the grace runs
    // from the first one.
    let first = live.watch.term_at.is_none();
    live.watch.term_at.get_or_insert(now.wall);
    let mut steps = Vec::new();
    if first {
        steps.push(Stop::Signal(Signal::Term));
    }
    steps.push(Stop::Event(EventKind::AgentOverBudget {
        task_id: live.rec.task.clone(),
        agent: live.rec.agent.clone(),
        figures,
    }));
    Some(steps)
}
