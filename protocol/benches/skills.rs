//! Skill discovery and checking: what `squadctl skills list`, `validate`
//! and squadd's re-check after a skill change cost.
//!
//! Generates a project with skills in all five places and in agents' own
//! directories (`SQUAD_BENCH_SKILLS`, default 500, spread evenly), then times
//! full discovery (front matter only) and the check of each real corpus
//! skill. Prints p50/p99; asserts nothing.
//!
//! Run: `cargo bench -p squad-protocol --bench skills`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

use squad_protocol::skill::{check_text, discover};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn main() {
    let n: usize = std::env::var("SQUAD_BENCH_SKILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let places = [
        ".squad/skills",
        ".github/skills",
        ".copilot/skills",
        ".claude/skills",
        ".agents/skills",
        ".squad/agents/ana/skills",
        ".squad/agents/bob/skills",
    ];
    let body = "# Instructions\n\n".to_string() + &"Step and pattern text.\n".repeat(200);
    for i in 0..n {
        let place = places[i % places.len()];
        let name = format!("skill-{i:05}");
        let dir = root.join(place).join(&name);
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: Does task {i} well. Use when the work involves area {i} of the product.\nlicense: MIT\nmetadata:\n  version: \"1.0\"\n  mcp-servers: \"postgres filesystem?\"\n---\n{body}"
            ),
        )
        .unwrap();
    }
    let rounds = 50;
    let mut samples = Vec::with_capacity(rounds);
    let mut found = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let d = discover::discover_all(root, false);
        samples.push(t.elapsed());
        found = d.skills.len();
    }
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    println!(
        "discover_all, {n} skills in 7 places ({found} loaded), {rounds} rounds: p50 {:.2} ms, p99 {:.2} ms ({:.1} µs per skill at p50)",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        p50.as_secs_f64() * 1e6 / n as f64
    );

    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/skills");
    let mut texts = Vec::new();
    for e in fs::read_dir(&corpus).unwrap().flatten() {
        let p = e.path().join("SKILL.md");
        if let Ok(t) = fs::read_to_string(&p) {
            texts.push((p, t));
        }
    }
    let mut samples = Vec::new();
    for _ in 0..200 {
        for (p, t) in &texts {
            let start = Instant::now();
            let r = check_text(p, t, true);
            samples.push(start.elapsed());
            std::hint::black_box(r);
        }
    }
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    println!(
        "check_text (strict), {} real SKILL.md x 200: p50 {:.1} µs, p99 {:.1} µs per file",
        texts.len(),
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
}
