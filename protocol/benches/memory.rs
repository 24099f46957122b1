//! Team memory: parse and query a 1 MB decisions.md (what `squadctl memory
//! query` and `validate` cost per file). The file mixes SEM entries and the
//! real corpus's legacy decisions.md, repeated to 1 MB. Prints p50/p99;
//! asserts nothing.
//!
//! Run: `cargo bench -p squad-protocol --bench memory`.

#![allow(clippy::unwrap_used)] // a test or bench: a failed unwrap is a failed run

#[path = "support/memory_file.rs"]
mod memory_file;

use squad_protocol::memory;
use std::time::{Duration, Instant};

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i]
}

fn main() {
    let src = memory_file::decisions_md(1024 * 1024);
    let runs = 50;
    let mut parse = Vec::new();
    let mut query = Vec::new();
    let mut moments = Vec::new();
    let mut dated = 0;
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let doc = memory::parse(&src);
        parse.push(t.elapsed());
        let t = Instant::now();
        let doc2 = memory::parse(&src);
        n = doc2
            .entries()
            .filter(|e| e.kind() == "decision")
            .filter(|e| e.author().is_some_and(|a| a.contains("agent3")))
            .filter(|e| e.tags().iter().any(|t| t == "b2"))
            .filter(|e| e.text(&src).contains("details"))
            .count();
        query.push(t.elapsed());
        // What `memory query --after/--before` and sorting add: every
        // entry's moment.
        let t = Instant::now();
        dated += doc.entries().filter_map(|e| e.moment()).count();
        moments.push(t.elapsed());
        drop(doc);
    }
    let entries = memory::parse(&src).entries().count();
    println!(
        "memory: {} bytes, {entries} entries, {n} matches; parse p50 {:?} p99 {:?}; parse+query p50 {:?} p99 {:?}",
        src.len(),
        percentile(&mut parse, 0.5),
        percentile(&mut parse, 0.99),
        percentile(&mut query, 0.5),
        percentile(&mut query, 0.99),
    );
    println!(
        "moments of every entry ({} dated): p50 {:?} p99 {:?}",
        dated / runs,
        percentile(&mut moments, 0.5),
        percentile(&mut moments, 0.99),
    );
}
