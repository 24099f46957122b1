//! `squadctl check` decision cost: 10,000 changed paths against a task with
//! 500 boundary globs (and the default project-wide forbidden set).
//!
//! Run: `cargo bench -p squad-policies --bench check`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_policies::Policy;
use squad_policies::check::{Change, Facts, Task, check_changes};
use std::time::Instant;

fn main() {
    let globs: Vec<String> = (0..500)
        .map(|i| match i % 3 {
            0 => format!("service{i}/src/**"),
            1 => format!("service{i}/*.toml"),
            _ => format!("docs/{i}/**/*.md"),
        })
        .collect();
    let forbidden: Vec<String> = (0..20)
        .map(|i| format!("service{}/src/secret/**", i * 3))
        .collect();
    let facts = Facts {
        tasks: vec![Task {
            task_id: "task_1".into(),
            agent: "dev".into(),
            session: "s".into(),
            allowed: globs,
            forbidden,
        }],
        ..Facts::default()
    };
    let changes: Vec<Change> = (0..10_000)
        .map(|i| Change {
            path: match i % 4 {
                0 => format!("service{}/src/module{}/file{i}.rs", (i % 167) * 3, i % 13),
                1 => format!("service{}/Cargo.toml", (i % 167) * 3 + 1),
                2 => format!("docs/{}/guide/page{i}.md", (i % 166) * 3 + 2),
                _ => format!("unrelated/dir{}/file{i}.txt", i % 50),
            },
            status: 'M',
            commit: Some(format!("{i:040x}")),
            trailer_tasks: vec!["task_1".into()],
            agent: None,
        })
        .collect();
    let policy = Policy::defaults();
    let mut times = Vec::new();
    let mut findings = 0;
    for _ in 0..7 {
        let start = Instant::now();
        findings = check_changes(&policy, &facts, &changes).len();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "check: 10,000 changed paths x 500 globs: p50 {:.1} ms, min {:.1} ms, max {:.1} ms ({findings} findings)",
        times[3].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[6].as_secs_f64() * 1e3,
    );
}
