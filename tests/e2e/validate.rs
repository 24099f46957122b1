//! `squadctl validate`, `schema`, `init` and `session new` through the real binary.

use crate::support::*;
use std::fs;
use std::path::Path;

#[test]
fn seed_session_validates_clean() {
    let out = run(squadctl()
        .args(["validate", "--color", "never"])
        .current_dir(fixture("seed")));
    assert_eq!(
        stdout(&out),
        "0 errors, 0 warnings in 8 files (1 session)\n"
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn seed_session_validates_clean_from_a_subdirectory_and_by_path() {
    let session = fixture("seed").join(".squad/sessions/20240115T100000Z-user-search");
    let out = run(squadctl().args(["validate"]).current_dir(&session));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let out = run(squadctl().arg("validate").arg(&session));
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
}

/// Every broken fixture, with its expected human output. Set
/// `UPDATE_SNAPSHOTS=1` to rewrite the expectations after a deliberate change.
#[test]
fn broken_fixtures_match_their_snapshots() {
    let base = fixture("broken");
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut cases: Vec<(String, String)> = Vec::new();
    for group in ["files", "sessions"] {
        let mut dirs: Vec<_> = fs::read_dir(base.join(group))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let target = if group == "files" {
                let file = fs::read_dir(&dir).unwrap().next().unwrap().unwrap();
                format!("{group}/{name}/{}", file.file_name().to_string_lossy())
            } else {
                format!("{group}/{name}")
            };
            cases.push((name, target));
        }
    }
    assert!(cases.len() >= 30, "fixtures went missing: {}", cases.len());
    let mut failures = Vec::new();
    for (name, target) in &cases {
        let out = run(squadctl()
            .args(["validate", "--color", "never", target])
            .current_dir(&base));
        let actual = stdout(&out);
        let expected_path = base.join("expected").join(format!("{name}.txt"));
        if update {
            fs::create_dir_all(expected_path.parent().unwrap()).unwrap();
            fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if actual != expected {
            failures.push(format!(
                "--- {name}: expected\n{expected}--- actual\n{actual}"
            ));
        }
        let errors_expected = !actual.contains("\n0 errors,") && !actual.starts_with("0 errors,");
        let want = if errors_expected { 1 } else { 0 };
        if code(&out) != want {
            failures.push(format!("{name}: exit {} (want {want})", code(&out)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A session holding every kind of hostile input: each file gets its own
/// diagnostic and the valid file next to them is still validated.
#[test]
fn bad_input_yields_diagnostics_and_validation_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let out = ctl_run(root, &["init"]);
    assert_eq!(code(&out), 0);
    let s = root.join(".squad/sessions/20240115T100000Z");
    fs::create_dir(&s).unwrap();
    copy_tree(
        &fixture("seed").join(".squad/sessions/20240115T100000Z-user-search"),
        &s,
    );
    let write = |name: &str, bytes: &[u8]| fs::write(s.join(name), bytes).unwrap();
    write("role-plan-a-task_tabs.md", b"meta:\n\ttask_id: task_tabs\n");
    write(
        "role-plan-a-task_garbage.md",
        &[0x00, 0xff, 0xfe, 0x13, 0x37, 0x80, 0x81],
    );
    write(
        "role-plan-a-task_utf8.md",
        b"meta:\n  task_id: task_utf8\n  agent: \xc3\x28\n",
    );
    write("role-plan-a-task_empty.md", b"");
    write("role-plan-a-task_big.md", &vec![b'#'; 2 * 1024 * 1024]);
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        bomb.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        ));
    }
    write("role-plan-a-task_bomb.md", bomb.as_bytes());
    write(
        "role-plan-a-task_binary.md",
        b"\x7fELF\x02\x01\x01\0\0\0garbage",
    );
    fs::create_dir(s.join("role-plan-a-task_dir.md")).unwrap();

    let out = ctl_run(root, &["validate", "--format", "json"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    let rule_of = |file: &str| -> Vec<String> {
        diags
            .iter()
            .filter(|d| d["path"].as_str().unwrap().ends_with(file))
            .map(|d| d["rule"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(rule_of("task_tabs.md"), ["yaml-syntax"]);
    assert_eq!(rule_of("task_garbage.md"), ["invalid-utf8"]);
    assert_eq!(rule_of("task_utf8.md"), ["invalid-utf8"]);
    assert_eq!(rule_of("task_empty.md"), ["empty-file"]);
    assert_eq!(rule_of("task_big.md"), ["file-too-large"]);
    assert_eq!(rule_of("task_bomb.md"), ["yaml-syntax"]);
    assert_eq!(rule_of("task_binary.md"), ["yaml-syntax"]);
    assert_eq!(rule_of("task_dir.md"), ["not-a-file"]);
    // Lines where meaningful.
    let line_of = |file: &str| {
        diags
            .iter()
            .find(|d| d["path"].as_str().unwrap().ends_with(file))
            .and_then(|d| d["line"].as_u64())
    };
    assert_eq!(line_of("task_tabs.md"), Some(2));
    assert_eq!(line_of("task_utf8.md"), Some(3));
    // The seed's own files are still checked and still clean.
    assert!(
        diags.iter().all(|d| !d["path"]
            .as_str()
            .unwrap()
            .contains("backend-system-architect")),
        "{diags:#?}"
    );
    // 16 session files, the two built-in skills and the commented policy
    // `init` writes.
    assert_eq!(v["files_checked"], 19);
}

#[test]
fn output_formats() {
    let base = fixture("broken");
    let target = "files/bad-enum/role-comm-dev-task_1.md";
    let github = stdout(&run(squadctl()
        .args(["validate", "--format", "github", target])
        .current_dir(&base)));
    assert!(
        github.starts_with("::error file=files/bad-enum/role-comm-dev-task_1.md,line=5,col=9,title=bad-enum::`status` is `done`"),
        "{github}"
    );
    let sarif = stdout(&run(squadctl()
        .args(["validate", "--format", "sarif", target])
        .current_dir(&base)));
    let v: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["results"][0]["ruleId"], "bad-enum");
    let json = stdout(&run(squadctl()
        .args(["validate", "--json", target])
        .current_dir(&base)));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["errors"], 2);
    let colored = stdout(&run(squadctl()
        .args(["validate", "--color", "always", target])
        .current_dir(&base)));
    assert!(colored.contains("\x1b["));
    // Piped output is plain by default.
    let plain = stdout(&run(squadctl()
        .args(["validate", target])
        .current_dir(&base)));
    assert!(!plain.contains("\x1b["));
}

#[test]
fn usage_and_io_failures_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    // No .squad anywhere above a fresh temporary directory.
    let out = ctl_run(tmp.path(), &["validate"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("squadctl init"), "{}", stderr(&out));
    let out = ctl_run(tmp.path(), &["validate", "does-not-exist"]);
    assert_eq!(code(&out), 2);
    fs::write(tmp.path().join("notes.txt"), "x").unwrap();
    let out = ctl_run(tmp.path(), &["validate", "notes.txt"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("not a protocol file name"),
        "{}",
        stderr(&out)
    );
    let out = run(squadctl().args(["validate", "--format", "xml"]));
    assert_eq!(code(&out), 2);
}

#[test]
fn warnings_alone_exit_0() {
    let base = fixture("broken");
    let out = run(squadctl()
        .args(["validate", "files/unknown-field/role-plan-dev-task_1.md"])
        .current_dir(&base));
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("warning[unknown-field]"));
}

#[test]
fn init_and_session_new_create_a_valid_project() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let out = ctl_run(root, &["init"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for dir in [".squad/sessions", ".squad/archives", ".squad/run"] {
        assert!(root.join(dir).is_dir(), "{dir}");
    }
    assert_eq!(run_dir_mode(root), 0o700);
    // Idempotent.
    let out = ctl_run(root, &["init"]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("already initialized"));

    let out = ctl_run(root, &["session", "new", "--slug", "user-search", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let name = v["session"].as_str().unwrap();
    assert!(name.ends_with("-user-search"), "{name}");
    assert!(squad_protocol::ids::is_session_dir_name(name));
    assert!(v["session_id"].as_str().unwrap().starts_with("sess_"));
    let dir = root.join(".squad/sessions").join(name);
    assert!(dir.join("session-status.md").is_file());
    assert!(dir.join("artifacts").is_dir() && dir.join("locks").is_dir());
    // No staging directory left behind.
    assert_eq!(
        fs::read_dir(root.join(".squad/sessions")).unwrap().count(),
        1
    );

    let out = ctl_run(root, &["validate", "--color", "never"]);
    // session-status.md, the two built-in skills and the commented policy
    // `init` writes.
    assert_eq!(
        stdout(&out),
        "0 errors, 0 warnings in 4 files (1 session)\n"
    );
    assert_eq!(code(&out), 0);

    let out = ctl_run(root, &["session", "new", "--slug", "Bad Slug"]);
    assert_eq!(code(&out), 2);
}

#[test]
fn schema_prints_json_schema_per_kind() {
    let out = run(squadctl().args(["schema", "role-plan"]));
    assert_eq!(code(&out), 0);
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["$schema"], "http://json-schema.org/draft-07/schema#");
    assert_eq!(v["properties"]["meta"]["required"][0], "task_id");

    let out = run(squadctl().arg("schema"));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    for kind in [
        "session-status",
        "task-assignment",
        "progress-update",
        "message",
        "error-report",
    ] {
        assert_eq!(v[kind]["type"], "object", "{kind}");
    }

    let tmp = tempfile::tempdir().unwrap();
    let out = run(squadctl()
        .args(["schema", "--out-dir"])
        .arg(tmp.path().join("schemas")));
    assert_eq!(code(&out), 0);
    assert!(Path::new(&tmp.path().join("schemas/message.json")).is_file());

    let out = run(squadctl().args(["schema", "nonsense"]));
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("task-assignment"), "{}", stderr(&out));
}

#[test]
fn help_explains_every_command() {
    let out = run(squadctl().arg("--help"));
    assert_eq!(code(&out), 0);
    let help = stdout(&out);
    for cmd in ["validate", "schema", "init", "session"] {
        assert!(help.contains(cmd), "{cmd} missing from --help");
    }
    let out = run(squadctl().args(["validate", "--help"]));
    let help = stdout(&out);
    for word in ["--format", "human", "sarif", "Exit status"] {
        assert!(help.contains(word), "{word} missing from validate --help");
    }
}

/// Every `squadctl` and `squadd` invocation shown in README.md and
/// docs/daemon.md names a real subcommand and real flags (checked through
/// `--help`), so the docs cannot drift from the binaries.
#[test]
fn commands_in_the_docs_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut checked = 0;
    for doc in [
        "README.md",
        "docs/daemon.md",
        "docs/ci.md",
        "docs/install.md",
        "docs/runners.md",
    ] {
        let text = fs::read_to_string(root.join(doc)).unwrap();
        let mut in_code = false;
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if !in_code {
                continue;
            }
            let (bin, rest) = if let Some(rest) = line.strip_prefix("squadctl ") {
                (env!("CARGO_BIN_EXE_squadctl"), rest)
            } else if let Some(rest) = line.strip_prefix("squadd ") {
                (env!("CARGO_BIN_EXE_squadd"), rest)
            } else {
                continue;
            };
            let mut words: Vec<&str> = rest.split('#').next().unwrap().split_whitespace().collect();
            // The global `--root DIR` may come first.
            if words.first() == Some(&"--root") {
                words.drain(..2.min(words.len()));
            }
            // Subcommands: the leading words that are not flags or values.
            let subcommands: Vec<&str> = words
                .iter()
                .take_while(|w| {
                    w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
                })
                .copied()
                .collect();
            let out = std::process::Command::new(bin)
                .args(&subcommands)
                .arg("--help")
                .output()
                .unwrap();
            assert!(out.status.success(), "{doc}: `{line}`: {}", stderr(&out));
            let help = stdout(&out);
            for flag in words.iter().filter(|w| w.starts_with("--")) {
                let flag = flag
                    .trim_start_matches('[')
                    .split(['=', ']'])
                    .next()
                    .unwrap();
                assert!(
                    help.contains(flag),
                    "{doc}: `{line}`: {flag} is not in --help"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} commands found in the docs");
}
