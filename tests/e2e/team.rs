//! The team directory (docs/team.md): `squadctl team show|validate`,
//! `export` and `import` on the real corpus and on hostile files, and kill -9
//! during a large import.

use crate::support::{
    code, copy_tree, ctl_root, ctl_run, run, squadctl, status_json, stderr, stdout,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpora/squad")
        .join(rel)
}

/// A temporary project holding a copy of the real squad-head team (and its
/// `.copilot/skills`).
fn real_project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("source-project");
    copy_tree(&corpus("squad-head/.squad"), &p.join(".squad"));
    copy_tree(&corpus("squad-head/.copilot"), &p.join(".copilot"));
    (tmp, p)
}

/// Every path under `dir` with its content (`None` for a directory, the
/// link target for a symlink): compared before and after a refused import.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Option<Vec<u8>>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let e = e.unwrap();
            let rel = e.path().strip_prefix(base).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(e.path()).unwrap();
            if meta.is_dir() {
                out.insert(rel, None);
                walk(base, &e.path(), out);
            } else if meta.file_type().is_symlink() {
                let t = std::fs::read_link(e.path()).unwrap();
                out.insert(rel, Some(t.to_string_lossy().as_bytes().to_vec()));
            } else {
                out.insert(rel, Some(std::fs::read(e.path()).unwrap()));
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

fn export(project: &Path, format: &str, out: &Path) {
    let o = run(ctl_root(project)
        .args(["export", "--format", format, "--out"])
        .arg(out));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

fn import(project: &Path, file: &Path, extra: &[&str]) -> std::process::Output {
    std::fs::create_dir_all(project).unwrap();
    run(ctl_root(project).arg("import").arg(file).args(extra))
}

/// The export's JSON without what differs between two exports of the same
/// team (when, and from which project directory).
fn content(file: &Path) -> Value {
    let mut v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("exported_at");
    o.remove("exported_from");
    v
}

#[test]
fn team_show_and_validate_read_the_real_corpus() {
    let (_tmp, p) = real_project();
    let o = run(ctl_root(&p).args(["team", "show", "--json"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["members"].as_array().unwrap().len(), 21);
    assert_eq!(v["members"][3]["name"], "FIDO");
    assert_eq!(v["members"][3]["charter_role"], "Quality Owner");
    assert_eq!(v["alumni"][0], "kobayashi");
    assert_eq!(v["errors"], 0);
    let o = run(ctl_root(&p).args(["team", "validate"]));
    assert_eq!(code(&o), 0, "{}", stdout(&o));
    assert!(stdout(&o).contains("warning[team-member-without-agent]"));

    // The deliberately broken fixture: invalid casting JSON at line 4 col 3.
    let o = run(
        ctl_root(corpus("squad-head/test-fixtures/dogfood/corrupt-state"))
            .args(["team", "validate", "--format", "json"]),
    );
    assert_eq!(code(&o), 1);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["rule"] == "team-invalid-json")
        .unwrap()
        .clone();
    assert_eq!(
        (d["line"].as_u64(), d["column"].as_u64()),
        (Some(4), Some(3))
    );
}

#[test]
fn validate_includes_team_files_and_ignores_a_sessions_only_squad_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path();
    let o = run(ctl_root(p).arg("init"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(ctl_root(p).arg("validate"));
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("team-"), "{}", stdout(&o));
    std::fs::create_dir_all(p.join(".squad/casting")).unwrap();
    std::fs::write(p.join(".squad/casting/registry.json"), "{\"a\": 1,}").unwrap();
    let o = run(ctl_root(p).arg("validate"));
    assert_eq!(code(&o), 1);
    assert!(
        stdout(&o).contains("registry.json:1:9: error[team-invalid-json]"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("error[team-no-team-md]"),
        "{}",
        stdout(&o)
    );
    // A team file named on the command line is checked as a team file.
    let o = run(squadctl()
        .arg("validate")
        .arg(p.join(".squad/casting/registry.json")));
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("registry.json:1:9: error[team-invalid-json]"),
        "{}",
        stdout(&o)
    );
    assert!(!stdout(&o).contains("team-no-team-md"), "{}", stdout(&o));
}

#[test]
fn round_trip_on_the_real_team_in_both_formats() {
    for format in ["squad", "squad-cli"] {
        let (tmp, a) = real_project();
        let first = tmp.path().join("first.json");
        export(&a, format, &first);
        let b = tmp.path().join("empty-project");
        let o = import(&b, &first, &[]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let second = tmp.path().join("second.json");
        export(&b, format, &second);
        assert_eq!(content(&first), content(&second), "{format}");
        // What the import must create.
        let team = b.join(".squad");
        assert!(team.join("agents/_alumni/kobayashi/history.md").is_file());
        assert!(team.join("decisions/inbox").is_dir());
        assert!(team.join("orchestration-log").is_dir());
        assert!(team.join("log").is_dir());
        assert_eq!(std::fs::read(team.join("decisions.md")).unwrap(), b"");
        let registry: Value =
            serde_json::from_slice(&std::fs::read(team.join("casting/registry.json")).unwrap())
                .unwrap();
        assert_eq!(registry["imported_from"]["project"], "source-project");
        let history = std::fs::read_to_string(team.join("agents/fido/history.md")).unwrap();
        assert!(history.starts_with("<!-- squad-import: imported from project \"source-project\""));
        let roster = std::fs::read_to_string(team.join("team.md")).unwrap();
        assert!(roster.contains("(to be filled on first session)"));
        assert!(
            !roster.contains("TypeScript (strict mode"),
            "the old Project Context stays home"
        );
        // Skills from .squad/skills and .copilot/skills travel.
        assert!(team.join("skills/reflect/SKILL.md").is_file());
        assert!(team.join("skills/git-workflow/SKILL.md").is_file());
        // Decisions stay home.
        assert!(
            !std::fs::read_to_string(&first)
                .unwrap()
                .contains("decisions_md")
        );
    }
}

fn bundle(agents: &str) -> String {
    format!(
        r##"{{"squad_format_version":"1.0","exported_at":"2026-01-01T00:00:00Z","exported_from":{{"project":"p","owner":""}},"casting":{{"registry":{{}}}},"agents":{agents},"team":"# T\n\n## Members\n\n| Name | Role |\n|--|--|\n| Ana | Lead |\n","routing":"r","ceremonies":null}}"##
    )
}

#[test]
fn hostile_files_are_refused_with_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
    let nested = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("dot-dot agent", bundle(r#"{"../evil":{"charter":"c"}}"#).into_bytes(), "agent name"),
        ("absolute agent", bundle(r#"{"/tmp/evil":{"charter":"c"}}"#).into_bytes(), "path separator"),
        ("hidden agent", bundle(r#"{".git":{"charter":"c"}}"#).into_bytes(), "starts with a dot"),
        ("alumni as agent", bundle(r#"{"_alumni":{"charter":"c"}}"#).into_bytes(), "_alumni"),
        ("case twins", bundle(r#"{"Ana":{"charter":"c"},"ana":{"charter":"c"}}"#).into_bytes(), "two agents named \"ana\""),
        (
            "casting key",
            br#"{"version":"1.0","casting":{"../../x":{}},"agents":{},"skills":[]}"#.to_vec(),
            "casting key",
        ),
        (
            "skill file escaping",
            br#"{"squad_format_version":"1.0","casting":{},"agents":{},"skills":{"s":{"files":{"SKILL.md":"x","../../escape.sh":"rm -rf /"}}}}"#.to_vec(),
            "escapes",
        ),
        (
            "agent skill escaping",
            bundle(r#"{"ana":{"charter":"c","skills":{"s":{"files":{"SKILL.md":"x","a/../../../b":"x"}}}}}"#).into_bytes(),
            "escapes",
        ),
        ("charter is a number", bundle(r#"{"ana":{"charter":42}}"#).into_bytes(), "$.agents[\"ana\"].charter: expected a string, found a number"),
        ("agents is a list", bundle(r#"["ana"]"#).into_bytes(), "$.agents: expected an object"),
        (
            "skill list of objects",
            br#"{"version":"1.0","casting":{},"agents":{},"skills":[{"name":"x"}]}"#.to_vec(),
            "$.skills[0]: expected a string",
        ),
        ("deep nesting", format!(r#"{{"squad_format_version":"1.0","x":{nested}}}"#).into_bytes(), "recursion limit"),
        ("invalid utf-8", [bundle(r#"{"ana":{"charter":""#).as_bytes()[..60].to_vec(), vec![0xff, 0xfe]].concat(), "not valid JSON"),
        (
            "duplicate keys",
            br#"{"version":"1.0","casting":{},"agents":{"a":{"charter":"x","charter":"y"}},"skills":[]}"#.to_vec(),
            "duplicate key",
        ),
        ("neither shape", br#"{"agents":{}}"#.to_vec(), "neither export shape"),
        ("unsupported version", br#"{"version":"2.0","casting":{},"agents":{},"skills":[]}"#.to_vec(), "not supported"),
    ];
    let before = snapshot(&project);
    for (name, bytes, expect) in &cases {
        let file = tmp.path().join("hostile.json");
        std::fs::write(&file, bytes).unwrap();
        let o = import(&project, &file, &[]);
        assert_eq!(code(&o), 1, "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("nothing was written"),
            "{name}: {}",
            stderr(&o)
        );
        assert_eq!(snapshot(&project), before, "{name}");
    }
    // A 50 MB file: refused by its size before it is read or parsed.
    let big = tmp.path().join("big.squad");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(50 * 1024 * 1024)
        .unwrap();
    let o = import(&project, &big, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("over the limit"), "{}", stderr(&o));
    assert_eq!(snapshot(&project), before);
    // A symlinked export file is not followed.
    let good = tmp.path().join("good.squad");
    std::fs::write(&good, bundle(r#"{"ana":{"charter":"c"}}"#)).unwrap();
    let link = tmp.path().join("link.squad");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let o = import(&project, &link, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("symbolic link"), "{}", stderr(&o));
    assert_eq!(snapshot(&project), before);
    // The good file imports (so the refusals above are the checks' doing).
    let o = import(&project, &good, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(project.join(".squad/agents/ana/charter.md").is_file());
}

#[test]
fn an_existing_team_is_refused_or_moved_aside_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    let file = tmp.path().join("t.squad");
    std::fs::write(&file, bundle(r#"{"ana":{"charter":"new"}}"#)).unwrap();
    std::fs::create_dir_all(project.join(".squad/agents/old")).unwrap();
    std::fs::write(project.join(".squad/team.md"), "# Old\n").unwrap();
    std::fs::write(project.join(".squad/agents/old/charter.md"), "old").unwrap();
    let before = snapshot(&project);
    let o = import(&project, &file, &[]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(snapshot(&project), before);
    let o = import(&project, &file, &["--force", "--dry-run"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("nothing was written"));
    assert_eq!(snapshot(&project), before);
    let o = import(&project, &file, &["--force", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let backup = PathBuf::from(v["backup"].as_str().unwrap());
    assert!(
        backup
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(".squad-backup-")
    );
    assert_eq!(
        std::fs::read_to_string(backup.join("team.md")).unwrap(),
        "# Old\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join(".squad/agents/ana/charter.md")).unwrap(),
        "new"
    );
    assert!(!project.join(".squad/agents/old").exists());
    // No staging directory is left.
    let left: Vec<_> = std::fs::read_dir(&project)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".import-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_skill_named_like_a_builtin_is_imported_with_a_suffix() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("squad-export.json");
    std::fs::write(
        &file,
        r#"{"version":"1.0","exported_at":"x","squad_version":"0.9","casting":{},"agents":{},"skills":["---\nname: squad-protocol\ndescription: mine\n---\n"],"decisions_md":"D"}"#,
    )
    .unwrap();
    let project = tmp.path().join("p");
    let o = import(&project, &file, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("imported as `squad-protocol-imported`"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("decisions"), "{}", stdout(&o));
    assert!(
        project
            .join(".squad/skills/squad-protocol-imported/SKILL.md")
            .is_file()
    );
    assert!(!project.join(".squad/skills/squad-protocol").exists());
    // The CLI's file names no project: the file's name stands for it.
    let registry: Value = serde_json::from_slice(
        &std::fs::read(project.join(".squad/casting/registry.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(registry["imported_from"]["project"], "squad-export");
}

/// A large team (many agents, sizeable charters) as an export file.
fn large_bundle(agents: usize, tag: &str) -> String {
    let charter = format!(
        "# Agent\n\n- **Role:** Dev\n\n{}\n",
        "lorem ipsum ".repeat(300)
    );
    let mut m = serde_json::Map::new();
    for i in 0..agents {
        m.insert(
            format!("agent{i:04}"),
            serde_json::json!({"charter": format!("{tag} {i}\n{charter}"), "history": "h\n"}),
        );
    }
    bundle(&Value::Object(m).to_string())
}

/// Which team the project holds: `"old"`, `"new"` (complete), or a
/// description of the mix.
fn which_team(project: &Path, agents: usize) -> String {
    let team = project.join(".squad");
    if std::fs::read_to_string(team.join("team.md"))
        .ok()
        .as_deref()
        == Some("# Old\n")
    {
        let n = std::fs::read_dir(team.join("agents")).unwrap().count();
        return if n == 1 {
            "old".into()
        } else {
            format!("old roster with {n} agents")
        };
    }
    for i in 0..agents {
        let c = std::fs::read_to_string(team.join(format!("agents/agent{i:04}/charter.md")));
        if !c.is_ok_and(|c| c.starts_with(&format!("NEW {i}\n"))) {
            return format!("new team missing agent{i:04}");
        }
    }
    if !team.join("casting/registry.json").is_file() {
        return "new team without casting".into();
    }
    "new".into()
}

#[test]
fn kill_9_during_a_large_import_leaves_the_old_team_or_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = 150;
    let file = tmp.path().join("large.squad");
    std::fs::write(&file, large_bundle(agents, "NEW")).unwrap();
    let old_team = |project: &Path| {
        std::fs::create_dir_all(project.join(".squad/agents/old")).unwrap();
        std::fs::write(project.join(".squad/team.md"), "# Old\n").unwrap();
        std::fs::write(project.join(".squad/agents/old/charter.md"), "old").unwrap();
    };
    let import_force = |project: &Path| {
        ctl_root(project)
            .args(["import", "--force"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long one import takes here: kills are spread over 0..130% of it.
    let calibrate = tmp.path().join("calibrate");
    old_team(&calibrate);
    let started = std::time::Instant::now();
    assert!(import_force(&calibrate).wait().unwrap().success());
    let full = started.elapsed().as_millis().max(20) as u64;
    let mut seen = BTreeMap::<String, usize>::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for round in 0..10 {
        let project = tmp.path().join(format!("p{round}"));
        old_team(&project);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let delay = Duration::from_millis(x % (full * 13 / 10));
        let mut child = import_force(&project);
        // Stays: the kill instant, not a wait for an effect.
        std::thread::sleep(delay);
        let _ = child.kill();
        let _ = child.wait();
        let state = which_team(&project, agents);
        assert!(
            state == "old" || state == "new",
            "round {round} ({delay:?} of {full} ms): {state}"
        );
        *seen.entry(state).or_default() += 1;
        // The next import cleans what the kill left and succeeds; the old
        // team is kept as a backup whichever instant the kill came.
        let o = run(ctl_root(&project).args(["import", "--force"]).arg(&file));
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(which_team(&project, agents), "new");
        let names: Vec<String> = std::fs::read_dir(&project)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".import-")), "{names:?}");
        let old_kept = names.iter().any(|n| {
            n.starts_with(".squad-backup-")
                && std::fs::read_to_string(project.join(n).join("team.md"))
                    .ok()
                    .as_deref()
                    == Some("# Old\n")
        });
        assert!(old_kept, "the old team is never lost: {names:?}");
    }
    eprintln!("kill -9 outcomes over an import of {full} ms: {seen:?}");
}

fn team_status(root: &Path) -> Value {
    let v = status_json(root);
    assert_eq!(v["daemon"]["state"], "running", "{v:#}");
    v["roots"][0]["team"].clone()
}

#[test]
fn squadd_watches_the_team_files_and_reports_problems_in_status() {
    use crate::daemon::{Daemon, eventually};
    let (_tmp, r) = real_project();
    std::fs::create_dir_all(r.join(".squad/sessions")).unwrap();
    let daemon = Daemon::start(&r);
    let s = team_status(&r);
    assert_eq!(
        (
            s["present"].as_bool(),
            s["members"].as_u64(),
            s["errors"].as_u64()
        ),
        (Some(true), Some(21), Some(0)),
        "{s}"
    );
    // A casting file broken in place.
    std::fs::write(r.join(".squad/casting/policy.json"), "{\n  \"a\": 1,,\n}\n").unwrap();
    let s = eventually("the broken casting file in status", || {
        let s = team_status(&r);
        (s["errors"] == 1).then_some(s)
    });
    assert!(
        s["problems"][0]
            .as_str()
            .unwrap()
            .starts_with(".squad/casting/policy.json:2:10: error[team-invalid-json]"),
        "{s}"
    );
    let out = ctl_run(&r, &["status", "--check"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    // A new agent's charter without a Role line, in a folder created now.
    std::fs::write(r.join(".squad/casting/policy.json"), "{}\n").unwrap();
    std::fs::create_dir_all(r.join(".squad/agents/eecom")).unwrap();
    std::fs::write(r.join(".squad/agents/eecom/charter.md"), "# EECOM\n").unwrap();
    let s = eventually("the fix and the new charter in status", || {
        let s = team_status(&r);
        (s["errors"] == 0
            && s["problems"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p.as_str().unwrap().contains("team-charter-no-role")))
        .then_some(s)
    });
    assert_eq!(s["warnings"], 17, "{s}");
    let human = stdout(&ctl_run(&r, &["status"]));
    assert!(
        human.contains("team: 21 members, 0 errors, 17 warnings"),
        "{human}"
    );
    let (code, log) = daemon.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn export_agents_review_and_stdout() {
    let (tmp, p) = real_project();
    // --agents takes folder or roster names, any case.
    let out = tmp.path().join("two.squad");
    let o = run(ctl_root(&p)
        .args(["export", "--agents", "FIDO,flight", "--out"])
        .arg(&out));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let agents: Vec<&String> = v["agents"].as_object().unwrap().keys().collect();
    assert_eq!(agents, ["fido", "flight"]);
    // The default shape is the one the Squad CLI imports, with its version
    // fields (not squadctl's version).
    assert_eq!(v["version"], "1.0");
    assert_eq!(v["squad_version"], "0.10.0");
    assert!(v.get("squad_format_version").is_none());
    assert_eq!(v["exported_from"]["owner"], "Brady");
    // It says what the Squad CLI's import leaves out of this team.
    for what in [
        "Project Context",
        "ceremonies.md",
        "retired agents kobayashi",
    ] {
        assert!(stderr(&o).contains(what), "{what}: {}", stderr(&o));
    }
    // Seed 000's shape stays behind --format squad, and says nothing of the CLI.
    let o = run(ctl_root(&p)
        .args(["export", "--format", "squad", "--out"])
        .arg(&out));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stderr(&o).contains("Squad CLI"), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["squad_format_version"], "1.0");
    // An unknown agent is an error that names it; nothing is written.
    let none = tmp.path().join("none.squad");
    let o = run(ctl_root(&p)
        .args(["export", "--agents", "nobody", "--out"])
        .arg(&none));
    assert_ne!(code(&o), 0);
    assert!(stderr(&o).contains("nobody"), "{}", stderr(&o));
    assert!(!none.exists());
    // --review writes nothing and lists the marked sections.
    let before = snapshot(&p);
    let o = run(ctl_root(&p).args(["export", "--review"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("\"Core Context\""), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("scribe: charter 2024 B, history stays home"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("nothing was written"));
    assert_eq!(snapshot(&p), before);
    // --out - writes the squad-cli shape to stdout.
    let o = run(ctl_root(&p).args(["export", "--format", "squad-cli", "--out", "-"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["version"], "1.0");
    assert_eq!(v["team_md"], v["team"]);
    assert_eq!(v["skills"].as_array().unwrap().len(), 5);
    assert!(v.get("decisions_md").is_none());
}

/// Regression: squadd's watches follow directories, and an import puts a
/// new `.squad/` at the old path: squadd kept watching the old one (in the
/// backup) and saw no change to the new team until it restarted.
#[test]
fn squadd_follows_the_team_an_import_puts_in_place() {
    use crate::daemon::{Daemon, eventually};
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p");
    std::fs::create_dir_all(&p).unwrap();
    let o = run(squadctl().arg("--root").arg(&p).arg("init"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let daemon = Daemon::start(&p);
    let file = tmp.path().join("t.squad");
    std::fs::write(&file, bundle(r#"{"ana":{"charter":"- **Role:** Lead\n"}}"#)).unwrap();
    let o = import(&p, &file, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    eventually("the imported team in status", || {
        (team_status(&p)["members"] == 1).then_some(())
    });
    // A second import replaces that team: the old one goes to a backup.
    let rescans = || {
        crate::support::audit_log(&p)
            .unwrap_or_default()
            .matches("\"kind\":\"rescanned\"")
            .count()
    };
    let before = rescans();
    let o = import(&p, &file, &["--force"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // squadd takes the swap in (a rescan, then the team re-read) before
    // the change below: what follows must come through its watches.
    eventually("the swap seen", || (rescans() > before).then_some(()));
    // The re-read has no event: squadd logs it ("skills checked"), then
    // watches the team's directories before its batch ends.
    eventually("the team re-read after the rescan", || {
        let log = daemon.log();
        let rescan = log.rfind("event=\"rescanned\"")?;
        log[rescan..].contains("skills checked").then_some(())
    });
    crate::support::batch_finished(&p);
    assert!(std::fs::read_dir(&p).unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".squad-backup-")
    }));
    // Changes in the new `.squad/` itself: a casting folder created there
    // with a broken file.
    std::fs::create_dir_all(p.join(".squad/casting")).unwrap();
    std::fs::write(p.join(".squad/casting/policy.json"), "{\n  \"a\": 1,,\n}\n").unwrap();
    eventually("the broken casting file in status", || {
        (team_status(&p)["errors"] == 1).then_some(())
    });
    let (code, log) = daemon.terminate();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn import_after_init_keeps_squadds_files_and_needs_no_force() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("p");
    std::fs::create_dir_all(&p).unwrap();
    let o = run(ctl_root(&p).arg("init"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let session = p.join(".squad/sessions/20240115T100000Z");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::write(session.join("session-status.md"), "kept\n").unwrap();
    let before: BTreeMap<PathBuf, Option<Vec<u8>>> = snapshot(&p.join(".squad"));
    let file = tmp.path().join("t.squad");
    std::fs::write(&file, bundle(r#"{"ana":{"charter":"- **Role:** Lead\n"}}"#)).unwrap();
    let o = import(&p, &file, &[]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("kept the project's"), "{}", stdout(&o));
    // Everything init and the session made is still there, at the same place.
    let after = snapshot(&p.join(".squad"));
    for (path, content) in &before {
        assert_eq!(after.get(path), Some(content), "{}", path.display());
    }
    assert!(p.join(".squad/agents/ana/charter.md").is_file());
    let names: Vec<String> = std::fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains("backup") || n.contains(".import-")),
        "{names:?}"
    );
    // Now it holds a team: a second import needs --force; squadd's files
    // still come back, the old team goes to the backup.
    let o = import(&p, &file, &[]);
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    let o = import(&p, &file, &["--force"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(session.join("session-status.md")).unwrap(),
        "kept\n"
    );
    let backup = std::fs::read_dir(&p)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|n| {
            n.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".squad-backup-")
        })
        .unwrap();
    assert!(backup.join("agents/ana/charter.md").is_file());
    assert!(!backup.join("sessions").exists());
}
