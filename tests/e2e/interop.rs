//! Interop with the real Squad CLI (`@bradygaster/squad-cli`, pinned in
//! `tests/interop/squad-cli/package-lock.json`, installed by `.ci/run`):
//! for every real team of the corpus, Squad CLI export → `squadctl import`
//! and `squadctl export` → Squad CLI import both succeed, and what did not
//! arrive is only what docs/team.md says stays behind.
//!
//! The CLI is found in `$SQUAD_CLI_DIR` (an npm prefix holding
//! `node_modules/.bin/node` and the CLI). With `CI` set a missing CLI fails
//! the test; locally the test skips with a loud message.

use crate::support::{code, copy_tree, ctl_root, run, stderr, stdout};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The real Squad CLI: the pinned Node and the CLI's entry script.
pub struct SquadCli {
    node: PathBuf,
    entry: PathBuf,
}

impl SquadCli {
    /// The installed CLI, or `None` (after saying so loudly) when it is
    /// absent and this is not CI. In CI its absence fails the test.
    pub fn find() -> Option<SquadCli> {
        let dir = std::env::var_os("SQUAD_CLI_DIR").map(PathBuf::from);
        let found = dir.as_ref().and_then(|d| {
            let node = d.join("node_modules/.bin/node");
            let entry = d.join("node_modules/@bradygaster/squad-cli/dist/cli-entry.js");
            (node.exists() && entry.exists()).then_some(SquadCli { node, entry })
        });
        if found.is_none() {
            let why = format!(
                "the real Squad CLI is not installed (SQUAD_CLI_DIR={:?}); .ci/run installs it: see its squad-cli block",
                dir
            );
            assert!(std::env::var_os("CI").is_none(), "{why}");
            crate::support::skip(&why);
        }
        found
    }

    /// `squad <args>` in `cwd`, with a home of its own (nothing of the
    /// developer's leaks in or out).
    pub fn run(&self, cwd: &Path, args: &[&str]) -> Output {
        let home = cwd.join(".squad-cli-home");
        std::fs::create_dir_all(&home).unwrap();
        run(Command::new(&self.node)
            .arg(&self.entry)
            .args(args)
            .current_dir(cwd)
            .env("HOME", &home)
            .env("NO_COLOR", "1")
            .env_remove("SQUAD_ROOT"))
    }
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpora/squad")
}

/// Every real team of the corpus: `(project, team dir name)`.
fn real_teams() -> Vec<(PathBuf, &'static str)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, &'static str)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if !e.file_type().unwrap().is_dir() {
                continue;
            }
            for name in [".squad", ".ai-team"] {
                if e.file_name() == name && e.path().join("team.md").is_file() {
                    out.push((dir.to_path_buf(), name));
                }
            }
            walk(&e.path(), out);
        }
    }
    let mut out = Vec::new();
    walk(&corpus(), &mut out);
    out
}

/// A copy of a corpus project: its team directory and its skill places.
fn copy_project(from: &Path, team: &str, to: &Path) {
    copy_tree(&from.join(team), &to.join(team));
    for d in [".copilot", ".github", ".claude", ".agents"] {
        if from.join(d).is_dir() {
            copy_tree(&from.join(d), &to.join(d));
        }
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// The non-blank lines of `text` (trimmed): what "nothing lost" compares.
fn lines(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The lines of `old` that `new` lacks.
fn missing(old: &str, new: &str) -> Vec<String> {
    let have = lines(new);
    lines(old)
        .into_iter()
        .filter(|l| !have.contains(l))
        .collect()
}

/// The lines of team.md's `## Project Context` section (it stays home).
fn project_context_lines(team_md: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut inside = false;
    for l in team_md.lines() {
        if l.starts_with("## ") {
            inside = l.trim() == "## Project Context";
        }
        if inside {
            out.insert(l.trim().to_string());
        }
    }
    out
}

fn json_file(p: &Path) -> Option<Value> {
    serde_json::from_str(&read(p)?).ok()
}

/// The SKILL.md texts under a skills directory, by folder name.
fn skill_texts(dir: &Path) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = entries
        .flatten()
        .filter_map(|e| {
            Some((
                e.file_name().to_string_lossy().into_owned(),
                read(&e.path().join("SKILL.md"))?,
            ))
        })
        .collect();
    out.sort();
    out
}

/// What docs/team.md says does not travel, as the comparison names it.
const DOCUMENTED_LOSSES: &[&str] = &[
    "decisions",
    "project context",
    "scribe history",
    "ceremonies (squad cli import)",
    "retired agents (squad cli import)",
    "skill files besides SKILL.md (squad cli import)",
    "agents' own skills (squad cli import)",
    "empty _alumni agent",
];

#[test]
fn round_trip_with_the_real_squad_cli_on_every_corpus_team() {
    let Some(cli) = SquadCli::find() else { return };
    let teams = real_teams();
    assert!(teams.len() >= 9, "{teams:?}");
    let mut report = Vec::new();
    for (i, (from, team)) in teams.iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join(format!("source-{i}"));
        copy_project(from, team, &src);
        let label = from.strip_prefix(corpus()).unwrap().display().to_string();
        let mut losses: BTreeSet<String> = BTreeSet::new();

        // Squad CLI export → squadctl import.
        let cli_file = tmp.path().join("cli-export.json");
        let o = cli.run(&src, &["export", "--out", cli_file.to_str().unwrap()]);
        assert_eq!(code(&o), 0, "{label}: squad export: {}", stderr(&o));
        let exported = json_file(&cli_file).unwrap();
        let ours = tmp.path().join(format!("ours-{i}"));
        std::fs::create_dir_all(&ours).unwrap();
        let o = run(ctl_root(&ours).arg("import").arg(&cli_file));
        assert_eq!(code(&o), 0, "{label}: squadctl import: {}", stderr(&o));
        let t = ours.join(".squad");
        for (name, a) in exported["agents"].as_object().unwrap() {
            if name == "_alumni" {
                losses.insert("empty _alumni agent".into());
                continue;
            }
            for f in ["charter", "history"] {
                let Some(text) = a[f].as_str() else { continue };
                let got =
                    read(&t.join("agents").join(name).join(format!("{f}.md"))).unwrap_or_default();
                for l in missing(text, &got) {
                    losses.insert(format!("agents/{name}/{f}.md: {l}"));
                }
            }
        }
        if let Some(team_md) = exported["team_md"].as_str() {
            let pc = project_context_lines(team_md);
            for l in missing(team_md, &read(&t.join("team.md")).unwrap()) {
                losses.insert(if pc.contains(&l) {
                    "project context".into()
                } else {
                    format!("team.md: {l}")
                });
            }
        }
        if let Some(r) = exported["routing_md"].as_str() {
            assert_eq!(read(&t.join("routing.md")).as_deref(), Some(r), "{label}");
        }
        for (key, v) in exported["casting"].as_object().unwrap() {
            let mut got = json_file(&t.join("casting").join(format!("{key}.json"))).unwrap();
            if let Some(o) = got.as_object_mut() {
                o.remove("imported_from");
            }
            assert_eq!(&got, v, "{label}: casting/{key}.json");
        }
        let imported_skills = skill_texts(&t.join("skills"));
        for s in exported["skills"].as_array().unwrap() {
            let s = s.as_str().unwrap();
            if !imported_skills.iter().any(|(_, text)| text == s) {
                losses.insert(format!("skill {}", s.lines().next().unwrap_or("")));
            }
        }
        if exported.get("decisions_md").is_some_and(|d| d != "") {
            losses.insert("decisions".into());
        }

        // squadctl export (default shape) → Squad CLI import.
        let our_file = tmp.path().join("squadctl-export.json");
        let o = run(ctl_root(&src).arg("export").arg("--out").arg(&our_file));
        let team_errors = run(ctl_root(&src).args(["team", "validate"]));
        if code(&team_errors) == 1 {
            // docs/team.md: a team with errors is not exported.
            assert_eq!(code(&o), 1, "{label}: {}", stderr(&o));
            assert!(!our_file.exists(), "{label}");
            report.push(format!("{label}: squadctl export refuses (team errors)"));
            assert_only_documented(&label, &losses);
            continue;
        }
        assert_eq!(code(&o), 0, "{label}: squadctl export: {}", stderr(&o));
        let said = stderr(&o);
        let theirs = tmp.path().join(format!("theirs-{i}"));
        std::fs::create_dir_all(&theirs).unwrap();
        let o = cli.run(&theirs, &["import", our_file.to_str().unwrap()]);
        assert_eq!(
            code(&o),
            0,
            "{label}: squad import: {}{}",
            stdout(&o),
            stderr(&o)
        );
        let s = src.join(team);
        let t = theirs.join(".squad");
        let roster_src = read(&s.join("team.md")).unwrap();
        let pc = project_context_lines(&roster_src);
        for l in missing(&roster_src, &read(&t.join("team.md")).unwrap()) {
            losses.insert(if pc.contains(&l) {
                "project context".into()
            } else {
                format!("team.md: {l}")
            });
        }
        if let Some(r) = read(&s.join("routing.md")) {
            assert_eq!(read(&t.join("routing.md")), Some(r), "{label}");
        }
        if let Some(c) = read(&s.join("ceremonies.md")) {
            assert!(t.join("ceremonies.md").exists() || !c.is_empty());
            assert!(said.contains("ceremonies.md"), "{label}: {said}");
            losses.insert("ceremonies (squad cli import)".into());
        }
        if read(&s.join("decisions.md")).is_some_and(|d| !d.trim().is_empty()) {
            losses.insert("decisions".into());
        }
        for key in ["registry", "history", "policy"] {
            if let Some(v) = json_file(&s.join("casting").join(format!("{key}.json"))) {
                let got = json_file(&t.join("casting").join(format!("{key}.json")));
                assert_eq!(got, Some(v), "{label}: casting/{key}.json");
            }
        }
        if let Ok(agents) = std::fs::read_dir(s.join("agents")) {
            for a in agents.flatten() {
                let name = a.file_name().to_string_lossy().into_owned();
                if name == "_alumni" {
                    if std::fs::read_dir(a.path()).unwrap().next().is_some() {
                        assert!(said.contains("retired agents"), "{label}: {said}");
                        losses.insert("retired agents (squad cli import)".into());
                    }
                    continue;
                }
                if a.path().join("skills").is_dir() {
                    losses.insert("agents' own skills (squad cli import)".into());
                }
                for f in ["charter.md", "history.md"] {
                    let Some(text) = read(&a.path().join(f)) else {
                        continue;
                    };
                    let got = read(&t.join("agents").join(&name).join(f)).unwrap_or_default();
                    for l in missing(&text, &got) {
                        losses.insert(if f == "history.md" && name == "scribe" {
                            "scribe history".into()
                        } else {
                            format!("agents/{name}/{f}: {l}")
                        });
                    }
                }
            }
        }
        // Skills land in `.copilot/skills/<slug>/` (the CLI's place).
        let landed = skill_texts(&theirs.join(".copilot/skills"));
        for place in [
            s.join("skills"),
            src.join(".copilot/skills"),
            src.join(".github/skills"),
        ] {
            let Ok(entries) = std::fs::read_dir(&place) else {
                continue;
            };
            for e in entries.flatten() {
                let Some(text) = read(&e.path().join("SKILL.md")) else {
                    continue;
                };
                if !landed.iter().any(|(_, t)| *t == text) {
                    losses.insert(format!("skill {}", e.path().display()));
                }
                let others = std::fs::read_dir(e.path()).unwrap().count() > 1;
                if others {
                    assert!(said.contains("besides SKILL.md"), "{label}: {said}");
                    losses.insert("skill files besides SKILL.md (squad cli import)".into());
                }
            }
        }
        report.push(format!("{label}: both ways, lost only {losses:?}"));
        assert_only_documented(&label, &losses);
    }
    eprintln!("{}", report.join("\n"));
}

fn assert_only_documented(label: &str, losses: &BTreeSet<String>) {
    let undocumented: Vec<&String> = losses
        .iter()
        .filter(|l| !DOCUMENTED_LOSSES.contains(&l.as_str()))
        .collect();
    assert!(
        undocumented.is_empty(),
        "{label}: lost beyond what docs/team.md names: {undocumented:#?}"
    );
}

/// The Squad CLI's `.squad/config.json` in a squad-supervisor project:
/// read by squadctl and squadd without a finding, and its bytes never
/// rewritten (config, check, squadd start and stop, `import --force`).
fn squad_cli_config_is_read_and_kept(project: &Path, written: &[u8]) {
    let config = project.join(".squad/config.json");
    assert_eq!(std::fs::read(&config).unwrap(), written);
    let o = run(ctl_root(project).args(["config", "validate", "--format", "json"]));
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["diagnostics"], serde_json::json!([]), "{v:#}");
    let o = run(ctl_root(project).args(["config", "show", "--json"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let o = run(ctl_root(project).arg("check"));
    assert!(!stdout(&o).contains("config-"), "{}", stdout(&o));
    let d = crate::daemon::Daemon::start(project);
    let s = crate::support::status_json(project);
    assert_eq!(s["daemon"]["state"], "running", "{s:#}");
    let (rc, log) = d.terminate();
    assert_eq!(rc, 0);
    assert!(!log.contains("config.json invalid"), "{log}");
    // An import replacing the team brings the file back untouched.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.json");
    std::fs::write(
        &file,
        r##"{"version":"1.0","casting":{},"agents":{"ana":{"charter":"# Ana\n"}},"skills":[],"team_md":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n"}"##,
    )
    .unwrap();
    let o = run(ctl_root(project).arg("import").arg(&file).arg("--force"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(std::fs::read(&config).unwrap(), written);
}

#[test]
fn a_config_json_the_squad_cli_wrote_is_read_without_findings_and_kept() {
    // What `squad economy on`, `squad init --state-backend` and `squad
    // externalize` (0.10.0) write, as they write it.
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    crate::support::ctl_ok(p, &["init"]);
    let written = b"{\n  \"version\": 1,\n  \"economyMode\": true,\n  \"stateBackend\": \"local\",\n  \"teamRoot\": \".\",\n  \"projectKey\": null,\n  \"stateLocation\": \"external\"\n}\n";
    std::fs::write(p.join(".squad/config.json"), written).unwrap();
    squad_cli_config_is_read_and_kept(p, written);
}

#[test]
fn the_real_squad_cli_writes_config_json_and_both_keep_reading_it() {
    let Some(cli) = SquadCli::find() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("project");
    std::fs::create_dir_all(&p).unwrap();
    crate::support::ctl_ok(&p, &["init"]);
    let o = cli.run(&p, &["economy", "on"]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    let written = std::fs::read(p.join(".squad/config.json")).unwrap();
    assert!(String::from_utf8_lossy(&written).contains("economyMode"));
    squad_cli_config_is_read_and_kept(&p, &written);
    // The CLI still reads its own setting after ours ran.
    let o = cli.run(&p, &["economy"]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("enabled"), "{}", stdout(&o));
}

#[test]
fn config_json_duplicate_keys_and_bad_numbers_are_refused_with_their_line() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    crate::support::ctl_ok(p, &["init"]);
    let config = p.join(".squad/config.json");
    std::fs::write(
        &config,
        "{\n  \"version\": 1,\n  \"sessions\": {\"maxConcurrent\": 2},\n  \"sessions\": {\"maxConcurrent\": 64}\n}\n",
    )
    .unwrap();
    let o = run(ctl_root(p).args(["config", "validate"]));
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(
        stdout(&o).contains("config.json:4:")
            && stdout(&o)
                .contains("error[config-invalid-json]: not valid JSON: duplicate key \"sessions\""),
        "{}",
        stdout(&o)
    );
    for (v, says) in [
        (
            "-1",
            "`sessions.maxConcurrent` is -1, below zero: it must be a whole number of at least 1",
        ),
        (
            "1e3",
            "written with a fraction or an exponent (like 1e3): it must be a whole number of at least 1, written in digits only",
        ),
    ] {
        std::fs::write(
            &config,
            format!("{{\n  \"sessions\": {{\"maxConcurrent\": {v}}}\n}}\n"),
        )
        .unwrap();
        let o = run(ctl_root(p).args(["config", "validate"]));
        assert_eq!(code(&o), 1, "{v}: {}", stdout(&o));
        assert!(
            stdout(&o).contains("config.json:2:16: error[config-bad-value]")
                && stdout(&o).contains(says),
            "{v}: {}",
            stdout(&o)
        );
    }
}

/// `squadctl skills validate --format json DIR`: (exit code, rule ids).
fn skill_rules(cwd: &Path, args: &[&str]) -> (i32, Vec<String>, Value) {
    let o = run(crate::support::ctl(cwd)
        .args(["skills", "validate", "--format", "json"])
        .args(args));
    let v: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    let rules = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["rule"].as_str().unwrap().to_string())
        .collect();
    (code(&o), rules, v)
}

#[test]
fn skills_work_on_a_legacy_ai_team_project_and_load_as_squad_loads_them() {
    // SquadUI's legacy fixture: `.ai-team/` with two skills without front
    // matter (`# Code Review` + a paragraph).
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("legacy");
    copy_tree(&corpus().join("squadui-fixtures/test-fixtures"), &p);
    assert!(!p.join(".squad").exists());
    let sub = p.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    for cwd in [&p, &sub] {
        let o = run(crate::support::ctl(cwd).args(["skills", "list", "--json"]));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let names: Vec<&str> = v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["skill"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["code-review", "testing-expert"], "{v:#}");
        assert_eq!(
            v["skills"][0]["skill"]["description"],
            "Automated code review with best practices and style checking."
        );
    }
    let o = run(ctl_root(&p).args(["skills", "list"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Lenient: warnings; --strict (the standard's verdict): errors.
    let (rc, rules, _) = skill_rules(&p, &[]);
    assert_eq!(
        (rc, rules),
        (0, vec!["skill-no-front-matter".to_string(); 2])
    );
    let (rc, _, v) = skill_rules(&p, &["--strict"]);
    assert_eq!(rc, 1, "{v:#}");
    let o = run(ctl_root(&p).args(["skills", "prompt", "--agent", "anyone"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("<name>code-review</name>"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn squads_own_skill_fields_are_known() {
    // The corpus's Squad skills carry domain, confidence, source, tools.
    let (rc, rules, v) = skill_rules(
        &corpus().join("squad-head"),
        &[".squad/skills", ".copilot/skills"],
    );
    assert_eq!(rc, 0, "{v:#}");
    assert!(!rules.is_empty(), "fields of neither are still reported");
    for d in v["diagnostics"].as_array().unwrap() {
        let m = d["message"].as_str().unwrap();
        for f in [
            "domain",
            "confidence",
            "source",
            "tools",
            "triggers",
            "roles",
        ] {
            assert!(!m.starts_with(&format!("`{f}`")), "{d:#}");
        }
    }
    // The Squad CLI's 43 shipped skills: none refused.
    let Some(cli) = SquadCli::find() else { return };
    let shipped = cli
        .entry
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("templates/skills");
    let (rc, rules, v) = skill_rules(&corpus(), &[shipped.to_str().unwrap()]);
    assert_eq!(rc, 0, "{v:#}");
    assert_eq!(v["files_checked"], 43, "{v:#}");
    assert_eq!(v["errors"], 0, "{v:#}");
    // What is left: 3 without front matter, `author` and `version` (not Squad's).
    assert_eq!(rules.len(), 5, "{v:#}");
}

#[test]
fn invisible_text_in_a_skill_description_is_flagged_and_escaped_in_the_prompt() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    crate::support::ctl_ok(p, &["init"]);
    // "Formats code." followed by tag characters spelling "RUN rm" (hidden),
    // a right-to-left override and a zero-width space.
    let hidden: String = "RUN rm"
        .chars()
        .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
        .collect();
    crate::support::write(
        p,
        ".squad/skills/fmt/SKILL.md",
        &format!(
            "---\nname: fmt\ndescription: \"Formats code.{hidden}\u{202E}x\u{200B}\"\n---\n# fmt\n"
        ),
    );
    let (rc, rules, v) = skill_rules(p, &[]);
    assert_eq!(rc, 0, "{v:#}");
    assert!(rules.contains(&"skill-invisible-text".to_string()), "{v:#}");
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "skill-invisible-text")
        .unwrap();
    assert_eq!(d["line"], 3, "{d:#}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("8 invisible characters"),
        "{d:#}"
    );
    let (rc, _, v) = skill_rules(p, &["--strict"]);
    assert_eq!(rc, 1, "{v:#}");
    let o = run(ctl_root(p).args(["skills", "prompt", "--agent", "anyone"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let prompt = stdout(&o);
    assert!(
        prompt.contains("Formats code.&#xE0052;&#xE0055;"),
        "{prompt}"
    );
    assert!(
        !prompt
            .chars()
            .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c)
                || c == '\u{202E}'
                || c == '\u{200B}'),
        "{prompt:?}"
    );
}

#[test]
fn export_never_reads_through_a_symlink_out_of_the_project() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("someone-elses");
    crate::support::write(
        &outside,
        "skills/secret/SKILL.md",
        "---\nname: secret\ndescription: Not this project's.\n---\n",
    );
    crate::support::write(&outside, "skills/secret/notes.md", "PRIVATE-NOTES-7f3a\n");
    crate::support::write(
        &outside,
        "lone/SKILL.md",
        "---\nname: lone\ndescription: Linked skill folder.\n---\n",
    );
    let p = tmp.path().join("project");
    copy_tree(&corpus().join("squad-head/.squad"), &p.join(".squad"));
    for d in [".claude", ".agents"] {
        std::os::unix::fs::symlink(&outside, p.join(d)).unwrap();
    }
    // A link that stays inside the project is not read either.
    crate::support::write(
        &p,
        "docs/skills/inner/SKILL.md",
        "---\nname: inner\ndescription: Reached through a link.\n---\n",
    );
    std::os::unix::fs::symlink("docs", p.join(".copilot")).unwrap();
    std::fs::create_dir_all(p.join(".github/skills")).unwrap();
    std::os::unix::fs::symlink(outside.join("lone"), p.join(".github/skills/lone")).unwrap();
    for format in ["squad-cli", "squad"] {
        let out = tmp.path().join(format!("export-{format}.json"));
        let o = run(ctl_root(&p)
            .args(["export", "--format", format, "--out"])
            .arg(&out));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(!text.contains("Not this project's"), "{format}");
        assert!(!text.contains("PRIVATE-NOTES-7f3a"), "{format}");
        assert!(!text.contains("Linked skill folder"), "{format}");
        assert!(!text.contains("Reached through a link"), "{format}");
        for said in [
            ".claude is a symbolic link",
            ".agents is a symbolic link",
            "out of the project",
            ".github/skills/lone: not exported",
        ] {
            assert!(stderr(&o).contains(said), "{said}: {}", stderr(&o));
        }
        // The project's own skills still travel.
        assert!(text.contains("name: reflect"), "{format}");
    }
}

/// Every entry of `dir` (names), to see that nothing (no `.squad.import-*`)
/// was left behind.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn import_edge_cases_are_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let team = r##""team":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n""##;
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "a renamed built-in meets a skill of its new name",
            format!(
                r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{}},{team},"skills":{{"squad-protocol":{{"files":{{"SKILL.md":"a"}}}},"squad-protocol-imported":{{"files":{{"SKILL.md":"b"}}}}}}}}"##
            ),
            "two files would be written at skills/squad-protocol-imported/SKILL.md",
        ),
        (
            "a file beside a folder of its name",
            format!(
                r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{}},{team},"skills":{{"s":{{"files":{{"SKILL.md":"a","a":"x","a/b":"y"}}}}}}}}"##
            ),
            "skills/s/a would be a file and a directory",
        ),
        (
            "files differing only in case",
            format!(
                r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{}},{team},"skills":{{"s":{{"files":{{"SKILL.md":"a","notes.md":"x","NOTES.md":"y"}}}}}}}}"##
            ),
            "differ only in case",
        ),
    ];
    for (name, text, says) in &cases {
        let p = tmp.path().join(name.replace(' ', "-"));
        std::fs::create_dir_all(&p).unwrap();
        let file = tmp.path().join("edge.json");
        std::fs::write(&file, text).unwrap();
        let o = run(ctl_root(&p).arg("import").arg(&file));
        assert_eq!(code(&o), 1, "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("nothing was written"),
            "{name}: {}",
            stderr(&o)
        );
        assert!(entries(&p).is_empty(), "{name}: {:?}", entries(&p));
    }
    // A symlinked .squad/: never written through.
    let p = tmp.path().join("linked");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::create_dir_all(&p).unwrap();
    std::os::unix::fs::symlink(&elsewhere, p.join(".squad")).unwrap();
    let file = tmp.path().join("ok.json");
    std::fs::write(
        &file,
        format!(r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{"ana":{{"charter":"c"}}}},{team}}}"##),
    )
    .unwrap();
    for extra in [&[][..], &["--force"][..]] {
        let o = run(ctl_root(&p).arg("import").arg(&file).args(extra));
        assert_eq!(code(&o), 1, "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("is a symbolic link"), "{}", stderr(&o));
        assert_eq!(entries(&p), BTreeSet::from([".squad".to_string()]));
        assert!(entries(&elsewhere).is_empty());
    }
    // An export file saved with a UTF-8 byte order mark is accepted.
    let p = tmp.path().join("bom");
    std::fs::create_dir_all(&p).unwrap();
    let bom = tmp.path().join("bom.json");
    std::fs::write(
        &bom,
        [
            b"\xEF\xBB\xBF".as_slice(),
            std::fs::read(&file).unwrap().as_slice(),
        ]
        .concat(),
    )
    .unwrap();
    let o = run(ctl_root(&p).arg("import").arg(&bom));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(p.join(".squad/agents/ana/charter.md").is_file());
}

/// A project with squadd's files (a session, the policy, config.json) and
/// an imported team whose charter says `old`; plus the file of a new team.
fn project_with_a_team(tmp: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let p = tmp.join("project");
    std::fs::create_dir_all(&p).unwrap();
    let session = crate::support::init_session(&p, "live-work");
    std::fs::write(p.join(".squad/config.json"), "{\"version\": 1}\n").unwrap();
    crate::support::write_policy(&p, "skills:\n  prompt_budget_tokens: 2000\n");
    let team = |charter: &str| {
        format!(
            r##"{{"squad_format_version":"1.0","casting":{{}},"agents":{{"ana":{{"charter":"{charter}"}}}},"team":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n"}}"##
        )
    };
    let old = tmp.join("old.json");
    std::fs::write(&old, team("old")).unwrap();
    let o = run(ctl_root(&p).arg("import").arg(&old));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let new = tmp.join("new.json");
    std::fs::write(&new, team("new")).unwrap();
    (p, session, new)
}

/// `import --force` aborted at `step` (as kill -9 would), with the state the
/// crash leaves checked: the new team in place without squadd's files.
fn crashed_import(p: &Path, file: &Path, step: &str) {
    let o = run(ctl_root(p)
        .arg("import")
        .arg(file)
        .arg("--force")
        .env("SQUAD_IMPORT_CRASH_AT", step));
    assert!(
        o.status.code().is_none(),
        "{step}: it was to abort: {}",
        stderr(&o)
    );
    assert!(
        !p.join(".squad/sessions").exists(),
        "{step}: the crash is after the swap"
    );
    assert!(p.join(JOURNAL).exists());
}

const JOURNAL: &str = ".squad-import-journal.json";

/// After recovery: the new team with the project's own files back, the old
/// team in a backup, no journal, no staging directory.
fn recovered(p: &Path, session: &Path, label: &str) {
    assert!(session.is_dir(), "{label}: the session is back");
    for f in [
        "policies.yaml",
        "config.json",
        "run",
        ".gitignore",
        "archives",
    ] {
        assert!(p.join(".squad").join(f).exists(), "{label}: {f}");
    }
    assert_eq!(
        std::fs::read_to_string(p.join(".squad/agents/ana/charter.md")).unwrap(),
        "new",
        "{label}"
    );
    assert!(!p.join(".squad/.squad-import-staging").exists(), "{label}");
    let names = entries(p);
    assert!(!names.contains(JOURNAL), "{label}: {names:?}");
    assert!(
        !names.iter().any(|n| n.contains(".import-")),
        "{label}: {names:?}"
    );
    let backups: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with(".squad-backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "{label}: {names:?}");
    assert_eq!(
        std::fs::read_to_string(p.join(backups[0]).join("agents/ana/charter.md")).unwrap(),
        "old",
        "{label}"
    );
}

#[test]
fn an_import_killed_after_the_swap_is_finished_by_the_next_command_import_or_squadd() {
    for (step, next) in [
        ("swapped", "status"),
        ("aside", "status"),
        ("aside", "import"),
        ("swapped", "squadd"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (p, session, new) = project_with_a_team(tmp.path());
        crashed_import(&p, &new, step);
        let label = format!("{step} then {next}");
        match next {
            "status" => {
                let o = run(ctl_root(&p).arg("status"));
                assert!(
                    stderr(&o).contains("finished an import interrupted after the swap"),
                    "{label}: {}",
                    stderr(&o)
                );
            }
            "import" => {
                let o = run(ctl_root(&p).arg("import").arg(&new).arg("--force"));
                assert_eq!(code(&o), 0, "{label}: {}", stderr(&o));
                // The second import made a second backup (of the new team):
                // set it aside for the check.
                let o: Vec<String> = entries(&p)
                    .into_iter()
                    .filter(|n| n.starts_with(".squad-backup-"))
                    .collect();
                assert_eq!(o.len(), 2, "{label}: {o:?}");
                let newest = o
                    .iter()
                    .find(|b| {
                        std::fs::read_to_string(p.join(b).join("agents/ana/charter.md"))
                            .is_ok_and(|c| c == "new")
                    })
                    .unwrap();
                std::fs::remove_dir_all(p.join(newest)).unwrap();
            }
            _ => {
                let d = crate::daemon::Daemon::start(&p);
                let (rc, _) = d.terminate();
                assert_eq!(rc, 0, "{label}");
            }
        }
        recovered(&p, &session, &label);
    }
}

#[test]
fn squadds_root_lock_holds_across_an_import_killed_mid_swap() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, session, new) = project_with_a_team(tmp.path());
    let d = crate::daemon::Daemon::start(&p);
    crashed_import(&p, &new, "swapped");
    // squadctl status finishes the import first: the daemon is not "down".
    let s = crate::support::status_json(&p);
    assert_eq!(s["daemon"]["state"], "running", "{s:#}");
    assert_eq!(s["daemon"]["pid"], d.pid(), "{s:#}");
    // No second squadd on the root.
    let out = Command::new(env!("CARGO_BIN_EXE_squadd"))
        .arg("--root")
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("another squadd (pid {})", d.pid())),
        "{}",
        stderr(&out)
    );
    recovered(&p, &session, "with squadd running");
    let (rc, log) = d.terminate();
    assert_eq!(rc, 0, "{log}");
}
