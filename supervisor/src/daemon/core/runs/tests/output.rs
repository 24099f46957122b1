//! Unit tests of a run's output as the core's input ([`Input::RunOutput`]):
//! usage priced into the record, the CLI's model warning kept, and the
//! run's budget held (issue 38).

use super::*;
use crate::runners::OutputSeen;
use squad_policies::usage::{Reported, Tokens, Usd};

/// What a CLI reported: `input`, `output` tokens of `model`.
fn said(model: &str, input: u64, output: u64) -> OutputSeen {
    let mut r = Reported::default();
    r.by_model.insert(
        model.to_string(),
        Tokens {
            input,
            cached: 0,
            output,
        },
    );
    OutputSeen {
        reported: Some(r),
        warning: None,
        conversation: None,
    }
}

fn output(r: &mut Root, seen: OutputSeen, at: Now) -> Vec<Effect> {
    step(
        r,
        Input::RunOutput {
            run: key(),
            seen: Box::new(seen),
        },
        at,
    )
}

fn priced(r: &mut Root) {
    let (config, d) = squad_protocol::config::parse(
        Path::new("config.json"),
        r#"{"prices": {"m": {"input": 2, "output": 10}}}"#,
    );
    assert!(d.is_empty(), "{d:?}");
    r.runs.config = config;
}

#[test]
fn usage_is_priced_into_the_record_and_carried_by_agent_exited() {
    let mut r = root(0);
    priced(&mut r);
    dispatch_and_start(&mut r, 42, t(0));
    let effects = output(&mut r, said("m", 1000, 500), t(1));
    let rec = &records(&effects)[0];
    let u = rec.usage.as_ref().unwrap();
    // 1000 * $2/M + 500 * $10/M = $0.007.
    assert_eq!(
        (u.input_tokens, u.output_tokens, u.cost_usd),
        (1000, 500, Some(Usd(7000)))
    );
    // The same figures again: nothing to write.
    assert!(output(&mut r, said("m", 1000, 500), t(2)).is_empty());
    let ended = end(&mut r, Ended::default(), &Facts::default(), t(3));
    let exited = events(&ended);
    assert!(
        matches!(&exited[0], EventKind::AgentExited { usage: Some(u), .. } if u.cost_usd == Some(Usd(7000))),
        "{exited:?}"
    );
}

#[test]
fn a_model_warning_is_recorded_once() {
    let mut r = root(0);
    dispatch_and_start(&mut r, 42, t(0));
    let warned = OutputSeen {
        reported: None,
        warning: Some("model x will be retired".into()),
        conversation: None,
    };
    let effects = output(&mut r, warned.clone(), t(1));
    assert_eq!(
        records(&effects)[0].model_warning.as_deref(),
        Some("model x will be retired")
    );
    assert!(output(&mut r, warned, t(2)).is_empty());
}

#[test]
fn the_clis_conversation_id_is_recorded_and_kept() {
    let mut r = root(0);
    dispatch_and_start(&mut r, 42, t(0));
    let said_id = OutputSeen {
        reported: None,
        warning: None,
        conversation: Some("4b1a7d4e-1111-4222-8333-944455556666".into()),
    };
    let effects = output(&mut r, said_id.clone(), t(1));
    assert_eq!(
        records(&effects)[0].conversation.as_deref(),
        Some("4b1a7d4e-1111-4222-8333-944455556666")
    );
    // Said again: nothing new to record.
    assert!(output(&mut r, said_id, t(2)).is_empty());
    // Later output without an id keeps the one recorded.
    let effects = output(&mut r, said("m", 1, 1), t(3));
    assert_eq!(
        records(&effects)[0].conversation.as_deref(),
        Some("4b1a7d4e-1111-4222-8333-944455556666")
    );
}

#[test]
fn a_run_over_its_budget_is_stopped_like_a_time_limit_held_and_the_lead_told() {
    let mut r = root_with(2, "  budget:\n    run: {tokens: 1000}\n");
    let facts = Facts::default();
    dispatch_and_start(&mut r, 42, t(0));
    // Under the budget: recorded, nothing else.
    let under = output(&mut r, said("m", 600, 300), t(1));
    assert!(signals(&under).is_empty(), "{under:?}");
    // Past it (one model turn later): SIGTERM and `agent-over-budget`.
    let over = output(&mut r, said("m", 800, 400), t(2));
    assert_eq!(signals(&over), vec![(42, Signal::Term)]);
    assert_eq!(
        events(&over),
        vec![EventKind::AgentOverBudget {
            task_id: "task_1".into(),
            agent: "alpha".into(),
            figures: "1200 tokens of a 1000-token budget".into(),
        }]
    );
    // Said once; SIGKILL after the grace as after a time limit.
    assert!(signals(&output(&mut r, said("m", 900, 400), t(3))).is_empty());
    let after_grace = step(&mut r, Input::RunsDue { facts: &facts }, t(12));
    assert_eq!(signals(&after_grace), vec![(42, Signal::Kill)]);
    let ended = end(
        &mut r,
        Ended {
            code: None,
            signal: Some(15),
        },
        &facts,
        t(13),
    );
    let rec = &records(&ended)[0];
    assert_eq!(rec.state, RunState::OverBudget);
    assert!(
        rec.held && rec.retry_at.is_none(),
        "held, not retried: {rec:?}"
    );
    let told = told_lead(&ended);
    assert_eq!(told.len(), 1);
    assert!(
        told[0].contains("was stopped over its budget (1200 tokens of a 1000-token budget)"),
        "{told:?}"
    );
    assert!(spawns(&step(&mut r, Input::DispatchDue { cluster: None }, t(500))).is_empty());
}

#[test]
fn a_retry_carries_the_earlier_runs_usage() {
    let mut r = root(1);
    priced(&mut r);
    dispatch_and_start(&mut r, 42, t(0));
    output(&mut r, said("m", 100, 10), t(1));
    end(
        &mut r,
        Ended {
            code: Some(1),
            signal: None,
        },
        &Facts::default(),
        t(2),
    );
    let effects = step(&mut r, Input::DispatchDue { cluster: None }, t(40));
    let spec = spawns(&effects).remove(0);
    let rec = started_record(&spec, 43, t(40));
    let effects = step(
        &mut r,
        Input::RunSpawned {
            spec: Box::new(spec),
            rec: Box::new(rec),
            dir: run_dir(),
        },
        t(40),
    );
    let rec = &records(&effects)[0];
    assert_eq!(
        rec.earlier_usage.as_ref().map(|u| u.input_tokens),
        Some(100)
    );
    assert_eq!(rec.task_usage().map(|u| u.total_tokens()), Some(110));
}
