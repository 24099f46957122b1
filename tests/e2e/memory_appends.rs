//! Issue 41.1: direct appends to decisions.md and histories (Squad's Scribe,
//! an editor, an agent's `cat >>`), which take no memory lock, racing every
//! rewrite of those files: `memory merge`, `convert`, `archive` and squadd's
//! automatic merge, with and without kill -9. Not one appended entry lost.

use crate::memory::run_and_kill;
use crate::support::{code, ctl_root, run, stderr};
use squad_protocol::memory;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The commands that rewrite memory files.
const REWRITES: [&[&str]; 3] = [
    &["memory", "merge"],
    &["memory", "convert"],
    &[
        "memory",
        "archive",
        "--older-than",
        "1d",
        "--max-size",
        "4KB",
    ],
];

/// A SEM entry dated on `day` of January 2026.
fn sem(tag: &str, i: usize, day: u32) -> String {
    let ts = format!("2026-01-{day:02}T10:{:02}:{:02}+0000", i / 60 % 60, i % 60);
    format!(
        "### {ts}: decision: {tag} {i}\n\n**type:** decision\n**timestamp:** {ts}\n**author:** agent{}\n**summary:** {tag} {i}\n\n**details:**\n\nBody of {i}.\n\n---\n",
        i % 7
    )
}

/// What the Scribe appends: a blank line and a whole entry, SEM or a legacy
/// dated heading with By/What/Why (which convert rewrites once it is in).
fn scribe_entry(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!("\n{}", sem("Appended", i, 1 + (i % 28) as u32))
    } else {
        format!(
            "\n### 2026-02-{:02}: Appended {i}\n**By:** Scribe\n**What:** appended thing {i}\n**Why:** it happened\n",
            1 + i % 28
        )
    }
}

/// Appends `text` the way the Scribe and shells do: open for append, one
/// write, close.
fn append(path: &Path, text: &str) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Every file an entry of the team may be in: decisions, their archive, the
/// inbox (set-aside files of a killed merge included), one agent's history
/// and its archive.
fn memory_files(team: &Path) -> Vec<PathBuf> {
    let mut files = vec![
        team.join("decisions.md"),
        team.join("decisions-archive.md"),
        team.join("agents/ann/history.md"),
        team.join("agents/ann/history-archive.md"),
    ];
    if let Ok(rd) = std::fs::read_dir(team.join("decisions/inbox")) {
        files.extend(
            rd.map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "md" || e == "aside")),
        );
    }
    files
}

/// Entry summaries over `files`, counted.
fn summaries(files: &[PathBuf]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for f in files {
        let Ok(src) = std::fs::read_to_string(f) else {
            continue;
        };
        for e in memory::parse(&src).entries() {
            *counts.entry(e.summary()).or_insert(0) += 1;
        }
    }
    counts
}

/// A team with legacy and SEM entries in decisions.md and ann's history,
/// and `inbox` inbox files.
fn team_with_memory(inbox: usize) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let team = tmp.path().join(".squad");
    std::fs::create_dir_all(team.join("decisions/inbox")).unwrap();
    std::fs::create_dir_all(team.join("agents/ann")).unwrap();
    let mut live = String::from("# Decisions\n\n");
    for i in 0..10 {
        live.push_str(&format!(
            "### 2026-01-{:02}: Legacy {i}\n**By:** Ann\n**What:** thing {i}\n\n",
            1 + i
        ));
        live.push_str(&sem("Old", i, 3));
        live.push('\n');
    }
    std::fs::write(team.join("decisions.md"), &live).unwrap();
    let mut history = String::from("# Ann\n\n## Learnings\n\n");
    for i in 0..10 {
        history.push_str(&format!(
            "### 2026-01-{:02}: Learned {i}\nA lesson.\n\n",
            1 + i
        ));
    }
    std::fs::write(team.join("agents/ann/history.md"), history).unwrap();
    for i in 0..inbox {
        std::fs::write(
            team.join(format!("decisions/inbox/agent-{i}.md")),
            sem("Inbox", i, 4),
        )
        .unwrap();
    }
    (tmp, team)
}

/// Every summary expected once: the team's own entries and the appended ones.
fn expected(inbox: usize, appended: &[usize], learned: &[usize]) -> Vec<String> {
    (0..10)
        .flat_map(|i| {
            [
                format!("Legacy {i}"),
                format!("Old {i}"),
                format!("Learned {i}"),
            ]
        })
        .chain((0..inbox).map(|i| format!("Inbox {i}")))
        .chain(appended.iter().map(|i| format!("Appended {i}")))
        .chain(learned.iter().map(|i| format!("Learned later {i}")))
        .collect()
}

fn assert_each_once(team: &Path, want: &[String], what: &str) {
    let counts = summaries(&memory_files(team));
    for s in want {
        assert_eq!(
            counts.get(s).copied().unwrap_or(0),
            1,
            "{what}: `{s}` lost or duplicated: {counts:?}"
        );
    }
    assert_eq!(counts.len(), want.len(), "{what}: {counts:?}");
    // No `.prev` name (nor temporary) stays once settled.
    for dir in [team.to_path_buf(), team.join("agents/ann")] {
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".prev.") || n.contains(".tmp."))
            .collect();
        assert!(left.is_empty(), "{what}: left {left:?}");
    }
}

/// The Scribe and an agent appending, on a thread: `n` entries to
/// decisions.md and `n / 2` to ann's history, one every `pause`.
fn appender(team: &Path, n: usize, pause: Duration) -> std::thread::JoinHandle<()> {
    let team = team.to_path_buf();
    std::thread::spawn(move || {
        for i in 0..n {
            append(&team.join("decisions.md"), &scribe_entry(i));
            if i.is_multiple_of(2) {
                append(
                    &team.join("agents/ann/history.md"),
                    &format!(
                        "\n### 2026-02-{:02}: Learned later {i}\nAnother lesson.\n",
                        1 + i % 28
                    ),
                );
            }
            // Stays (pacing): spreads the appends over the commands' runs.
            std::thread::sleep(pause);
        }
    })
}

#[test]
fn direct_appends_survive_merges_converts_and_archives() {
    // Issue 41.1: a rewrite of decisions.md (merge, convert, archive) that
    // read the file before an append dropped the append. Fails without the
    // re-check before the rename and the carry-over after it.
    let n = 20;
    let appended: Vec<usize> = (0..n).collect();
    let learned: Vec<usize> = (0..n).step_by(2).collect();
    for round in 0..50 {
        let (tmp, team) = team_with_memory(10);
        let writer = appender(&team, n, Duration::from_millis(1));
        let mut runs = 0;
        while !writer.is_finished() || runs < 3 {
            let args = REWRITES[runs % 3];
            let out = run(ctl_root(tmp.path()).args(args));
            assert_eq!(code(&out), 0, "round {round} {args:?}: {}", stderr(&out));
            runs += 1;
        }
        writer.join().unwrap();
        let out = run(ctl_root(tmp.path()).args(["memory", "merge"]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_each_once(
            &team,
            &expected(10, &appended, &learned),
            &format!("round {round} ({runs} runs)"),
        );
    }
}

/// A team whose squadd merges the inbox as it changes (and never on a
/// schedule during a test), with a large decisions.md (200 more entries of
/// ~1 KB), so that each of squadd's writes takes a while.
fn squadd_team() -> (tempfile::TempDir, PathBuf) {
    let (tmp, team) = team_with_memory(0);
    std::fs::write(
        team.join("policies.yaml"),
        "retention:\n  schedule: '0 0 0 1 1 *'\nmemory:\n  merge: true\n",
    )
    .unwrap();
    let body = "Long body text. ".repeat(60);
    let mut live = std::fs::read_to_string(team.join("decisions.md")).unwrap();
    for i in 0..200 {
        live.push_str(&sem("Bulk", i, 5).replace(&format!("Body of {i}."), &body));
    }
    std::fs::write(team.join("decisions.md"), &live).unwrap();
    (tmp, team)
}

#[test]
fn direct_appends_survive_squadds_merges() {
    // Issue 41.1 as measured: squadd's automatic merge rewrote decisions.md
    // over the Scribe's appends (11 and 10 of 40 lost in two runs).
    use crate::daemon::{Daemon, eventually};
    let (tmp, team) = squadd_team();
    let root = tmp.path();
    let _d = Daemon::start(root);
    let mut seed: u64 = 0x4101_0000_5eed_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let rounds = 50;
    for round in 0..rounds {
        for k in 0..2 {
            let i = round * 2 + k;
            std::fs::write(
                team.join(format!("decisions/inbox/agent-{i}.md")),
                sem("Inbox", i, 4),
            )
            .unwrap();
        }
        // Stays (pacing): squadd merges 0.5 s after the inbox went quiet;
        // the Scribe's appends land around then.
        std::thread::sleep(Duration::from_millis(420 + next() % 80));
        for k in 0..2 {
            append(&team.join("decisions.md"), &scribe_entry(round * 2 + k));
            // Stays (pacing): the second append a little later.
            std::thread::sleep(Duration::from_millis(next() % 60));
        }
    }
    eventually("squadd merged the whole inbox", || {
        (std::fs::read_dir(team.join("decisions/inbox"))
            .ok()?
            .count()
            == 0)
            .then_some(())
    });
    let mut want = expected(rounds * 2, &(0..rounds * 2).collect::<Vec<_>>(), &[]);
    want.extend((0..200).map(|i| format!("Bulk {i}")));
    // squadd settles its own rewrites: no squadctl run before the count.
    eventually("squadd settled its last rewrite", || {
        let left = std::fs::read_dir(&team)
            .ok()?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().contains(".prev."));
        (!left).then_some(())
    });
    assert_each_once(&team, &want, "squadd");
}

#[test]
fn direct_appends_survive_kill_9_of_every_rewrite() {
    // Issue 41.1 through kill -9: a rewrite killed between its rename and
    // the carry-over leaves the old file's `.prev` name, which the next
    // memory writer carries over.
    let mut seed: u64 = 0x4101_dead_0000_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let n = 12;
    let appended: Vec<usize> = (0..n).collect();
    let learned: Vec<usize> = (0..n).step_by(2).collect();
    for round in 0..50 {
        let (tmp, team) = team_with_memory(40);
        let args = REWRITES[round % 3];
        let writer = appender(&team, n, Duration::from_micros(500 + next() % 1500));
        // A debug-build rewrite of this team takes 10-40 ms: the kill lands
        // before, during or after it.
        let delay = Duration::from_micros(next() % 40_000);
        run_and_kill(tmp.path(), args, delay);
        writer.join().unwrap();
        // The re-run completes the job; the merge collects the inbox.
        let out = run(ctl_root(tmp.path()).args(args));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let out = run(ctl_root(tmp.path()).args(["memory", "merge"]));
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_each_once(
            &team,
            &expected(40, &appended, &learned),
            &format!("round {round} ({args:?} killed after {delay:?})"),
        );
    }
}

#[test]
fn direct_appends_survive_squadd_killed_mid_merge() {
    // Issue 41.1 through kill -9 of squadd itself: its automatic merge is
    // cut anywhere while the Scribe appends; the next squadd (or squadctl)
    // carries over what reached the replaced file, nothing is lost.
    use crate::daemon::Daemon;
    let (tmp, team) = squadd_team();
    let root = tmp.path();
    let mut seed: u64 = 0x4101_9999_0000_0001;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let rounds = 12;
    for round in 0..rounds {
        let d = Daemon::start(root);
        for k in 0..3 {
            let i = round * 3 + k;
            std::fs::write(
                team.join(format!("decisions/inbox/agent-{i}.md")),
                sem("Inbox", i, 4),
            )
            .unwrap();
        }
        // Stays (pacing): squadd merges 0.5 s after the inbox went quiet;
        // the appends and the kill land around then.
        std::thread::sleep(Duration::from_millis(440 + next() % 100));
        for k in 0..2 {
            append(&team.join("decisions.md"), &scribe_entry(round * 2 + k));
        }
        // Stays: the kill instant, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(next() % 80));
        d.kill9();
    }
    let out = run(ctl_root(root).args(["memory", "merge"]));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut want = expected(rounds * 3, &(0..rounds * 2).collect::<Vec<_>>(), &[]);
    want.extend((0..200).map(|i| format!("Bulk {i}")));
    assert_each_once(&team, &want, "squadd killed");
}
