//! Validation throughput: generates a tree of 10,000 protocol files (100
//! sessions × 100 files: plans, progress updates, messages, error reports and
//! a status file each) and validates it single-threaded and on every core.
//!
//! Run: `cargo bench -p squad-protocol --bench validate` (prints numbers;
//! asserts nothing). `SQUAD_BENCH_FILES` changes the tree size.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::tree::{Scope, default_threads, validate_scopes};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

fn plan(i: usize, agent: &str, requires: Option<usize>) -> String {
    let deps = requires
        .map(|r| format!("dependencies:\n  requires:\n    - task_{r:04}\n"))
        .unwrap_or_default();
    format!(
        "# Task Assignment\nmeta:\n  task_id: task_{i:04}\n  agent: {agent}\n  created_at: 2024-01-15T10:30:00Z\n  priority: high\n  timeout: 300\n{deps}instruction: |\n  Create a REST API endpoint for user search with the following requirements:\n  - Support pagination with limit/offset\n  - Filter by name, email\n  - Return proper error responses\nboundaries:\n  allowed:\n    - backend/src/routes/users_{i}.ts\n    - backend/src/services/**\n  forbidden:\n    - frontend/**\n    - .env\noutputs:\n  endpoint: backend/src/routes/users_{i}.ts\nsuccess_criteria:\n  - Endpoint responds with correct data\n  - Tests achieve 80% coverage\n"
    )
}

fn progress(i: usize, agent: &str) -> String {
    format!(
        "# Progress Update\nmeta:\n  task_id: task_{i:04}\n  agent: {agent}\n  updated_at: 2024-01-15T10:35:00Z\nstatus: in_progress\nprogress_percentage: 75\ncurrent_action: Implementing pagination logic\ncompleted_steps:\n  - Created route structure\n  - Added Zod schemas\nremaining_steps:\n  - Unit tests\nartifacts_created:\n  - path: backend/src/routes/users_{i}.ts\n    lines: 86\n    status: draft\nvalidation_results:\n  typescript:\n    status: passing\n    errors: 0\n  tests:\n    status: not_run\n    coverage: 0\ntime_spent: 180\n"
    )
}

fn message(i: usize, from: &str, to: &str, task: usize) -> String {
    format!(
        "# Inter-Agent Message\nmeta:\n  message_id: msg_{i:04}\n  from_agent: {from}\n  to_agent: {to}\n  created_at: 2024-01-15T10:36:00Z\n  priority: high\ntype: question\nsubject: API contract clarification needed\nmessage: |\n  The search endpoint spec shows a 'limit' parameter but no 'offset'.\ncontext:\n  task_id: task_{task:04}\n  file: frontend/src/components/UserSearch.tsx\nresponse_needed: true\nresponse_by: 2024-01-15T10:45:00Z\n"
    )
}

fn generate(root: &Path, files: usize) -> (usize, u64) {
    let per_session = 100;
    let sessions = files.div_ceil(per_session);
    let mut written = 0;
    let mut bytes = 0u64;
    let agents = ["backend-dev", "frontend-dev", "qa-dev", "docs-dev"];
    for s in 0..sessions {
        let dir = root.join(format!(".squad/sessions/20240115T{:06}Z", s));
        fs::create_dir_all(&dir).unwrap();
        let mut put = |name: String, text: String| {
            bytes += text.len() as u64;
            fs::write(dir.join(name), text).unwrap();
            written += 1;
        };
        put(
            "session-status.md".into(),
            "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\nphase: design\n"
                .into(),
        );
        // 40 plans, 40 progress updates, 19 messages.
        for t in 0..40 {
            let agent = agents[t % agents.len()];
            let requires = (t > 0).then(|| t - 1);
            put(
                format!("role-plan-{agent}-task_{t:04}.md"),
                plan(t, agent, requires),
            );
            put(
                format!("role-comm-{agent}-task_{t:04}.md"),
                progress(t, agent),
            );
        }
        for m in 0..19 {
            let (from, to) = (agents[m % 4], agents[(m + 1) % 4]);
            put(
                format!("role-comm-{from}-to-{to}-msg_{m:04}.md"),
                message(m, from, to, m),
            );
        }
    }
    (written, bytes)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let files: usize = std::env::var("SQUAD_BENCH_FILES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let tmp = tempfile::tempdir().unwrap();
    let (written, bytes) = generate(tmp.path(), files);
    let scopes = [Scope::Root(tmp.path().to_path_buf())];
    let cores = default_threads();
    println!(
        "tree: {written} files, {:.1} MB, {cores} cores",
        bytes as f64 / 1e6
    );
    for threads in [1, cores] {
        // Warm the page cache once, then measure.
        let v = validate_scopes(&scopes, threads).unwrap();
        assert_eq!(
            v.errors(),
            0,
            "generated tree must be valid: {:?}",
            v.diagnostics.first()
        );
        let mut times = Vec::new();
        for _ in 0..7 {
            let start = Instant::now();
            let v = validate_scopes(&scopes, threads).unwrap();
            times.push(start.elapsed());
            assert_eq!(v.files_checked, written);
        }
        times.sort();
        let p50 = percentile(&times, 0.5);
        println!(
            "threads={threads}: p50 {:>7.1} ms  min {:>7.1} ms  max {:>7.1} ms  {:>8.0} files/s  {:>6.1} MB/s",
            p50.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            written as f64 / p50.as_secs_f64(),
            bytes as f64 / 1e6 / p50.as_secs_f64(),
        );
    }
}
