//! Helpers shared by the end-to-end tests: running squadctl, building
//! projects (sessions, plans, messages, policies) and reading what the
//! binaries left. A test file needing one of these uses it from here rather
//! than keeping its own copy; what only one file needs stays in that file.
//! squadd itself is started with `crate::daemon::Daemon`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// ---------------------------------------------------------------------------
// Running squadctl.
// ---------------------------------------------------------------------------

/// The `squadctl` binary under test, with an environment that cannot leak
/// the developer's settings into the test.
pub fn squadctl() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_squadctl"));
    cmd.env_remove("SQUAD_ROOT").env_remove("NO_COLOR");
    cmd
}

/// [`squadctl`] without `SQUAD_AGENT`, `SQUAD_TASK` and `SQUAD_SESSION`.
fn agentless_squadctl() -> Command {
    let mut c = squadctl();
    c.env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .env_remove("SQUAD_SESSION");
    c
}

/// squadctl in `root`, with none of the agent environment (`SQUAD_AGENT`,
/// `SQUAD_TASK`, `SQUAD_SESSION`) leaking in from the test's own.
pub fn ctl(root: &Path) -> Command {
    let mut c = agentless_squadctl();
    c.current_dir(root);
    c
}

/// squadctl given `root` with `--root` (the working directory left as it
/// is), with none of the agent environment leaking in (see [`ctl`]).
pub fn ctl_root(root: impl AsRef<Path>) -> Command {
    let mut c = agentless_squadctl();
    c.arg("--root").arg(root.as_ref());
    c
}

/// Runs a command and returns its output, failing the test if it could not start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("the binary starts")
}

/// Runs a command with `input` on its stdin; its output (stdout and stderr
/// captured).
pub fn run_with_input(cmd: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    if let Some(mut stdin) = child.stdin.take() {
        // A command that exits before reading all its input is not an error here.
        let _ = stdin.write_all(input);
    }
    child.wait_with_output().expect("the binary's output")
}

/// `squadctl <args>` in `root` (see [`ctl`]), run.
pub fn ctl_run(root: &Path, args: &[&str]) -> Output {
    run(ctl(root).args(args))
}

/// `squadctl <args>` in `root` that must succeed (see [`ok`]); its stdout.
pub fn ctl_ok(root: &Path, args: &[&str]) -> String {
    ok(ctl_run(root, args))
}

/// `squadctl task new <args>` in `root`, run.
pub fn task_new(root: &Path, args: &[&str]) -> Output {
    run(ctl(root).args(["task", "new"]).args(args))
}

/// The arguments of a command line written as one string, so that tables
/// of commands read as commands: split at single spaces, except that an
/// argument holding spaces is written in single quotes (`'api shape?'`,
/// quotes dropped).
pub fn words(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let (word, after) = match rest.strip_prefix('\'') {
            Some(quoted) => {
                let end = quoted.find('\'').expect("a closing quote");
                (&quoted[..end], &quoted[end + 1..])
            }
            None => rest.split_at(rest.find(' ').unwrap_or(rest.len())),
        };
        out.push(word);
        rest = after.strip_prefix(' ').unwrap_or(after);
    }
    out
}

/// The stdout of a command that must have succeeded (exit 0); its output
/// is in the failure message otherwise.
pub fn ok(out: Output) -> String {
    assert_eq!(
        code(&out),
        0,
        "stdout: {}\nstderr: {}",
        stdout(&out),
        stderr(&out)
    );
    stdout(&out)
}

/// Stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit code (-1 when killed by a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

// ---------------------------------------------------------------------------
// Other processes.
// ---------------------------------------------------------------------------

/// Whether git is installed (tests of the git integration pass without
/// running where it is not).
pub fn has_git() -> bool {
    Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `git` in `root` with a committer identity (the machine may have none)
/// and none of the squad environment, which the hooks squadctl installs
/// would read.
pub fn git_in(root: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(root)
        .args(["-c", "user.email=ci@example.com", "-c", "user.name=ci"])
        .env_remove("SQUAD_AGENT")
        .env_remove("SQUAD_TASK")
        .env_remove("SQUAD_SESSION")
        .env_remove("SQUAD_ROOT");
    c
}

/// `git <args>` in `root` (see [`git_in`]) that must succeed; its stdout.
pub fn git_ok(root: &Path, args: &[&str]) -> String {
    let out = run(git_in(root).args(args));
    assert_eq!(code(&out), 0, "git {args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Waits for `child` to exit, at most `limit`: its exit code (-1 when
/// killed by a signal), or None (and it is killed) if still running.
pub fn exit_within(child: &mut std::process::Child, limit: std::time::Duration) -> Option<i32> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        // Poll interval of a wait with a deadline (`limit`).
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

// ---------------------------------------------------------------------------
// Building projects.
// ---------------------------------------------------------------------------

/// `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(name)
}

/// Copies a directory tree (fixtures into temporary roots).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `squadctl init` and `squadctl session new --slug <slug>` in `root`, as a
/// new user starts; returns the new session's directory.
pub fn init_session(root: &Path, slug: &str) -> PathBuf {
    ctl_ok(root, &["init"]);
    new_session(root, slug)
}

/// `squadctl session new --slug <slug>` in `root`; returns the new
/// session's directory.
pub fn new_session(root: &Path, slug: &str) -> PathBuf {
    let out = ctl_ok(root, &["session", "new", "--slug", slug]);
    let dir = root.join(out.trim());
    assert!(dir.is_dir(), "{out}");
    dir
}

/// A project with one active session `session` in which `alice` and `bob`
/// each have one high-priority task (`task_alice`, `task_bob`); returns the
/// session directory.
pub fn two_agent_session(root: &Path, session: &str) -> PathBuf {
    let s = root.join(".squad/sessions").join(session);
    std::fs::create_dir_all(&s).unwrap();
    std::fs::create_dir_all(root.join(".squad/run")).unwrap();
    std::fs::write(
        s.join("session-status.md"),
        "session_id: sess_1\nstarted_at: 2024-01-15T10:00:00Z\nstatus: active\n",
    )
    .unwrap();
    for agent in ["alice", "bob"] {
        write_plan(&s, &format!("task_{agent}"), agent, "");
    }
    s
}

/// [`two_agent_session`] in a new temporary root with [`NO_NOTICES`] as its
/// policy, for tests that count what inboxes hold; returns the root and the
/// session directory.
pub fn quiet_two_agent_project(session: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let s = two_agent_session(tmp.path(), session);
    write_policy(tmp.path(), NO_NOTICES);
    (tmp, s)
}

/// A new temporary root holding `session` (no status file) in which `n`
/// agents `agent-<i>` each have a high-priority task `task_<i>`, the plan
/// ending with `extra(i)` (YAML: boundaries).
pub fn numbered_agents_project(
    session: &str,
    n: usize,
    extra: impl Fn(usize) -> String,
) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join(".squad/sessions").join(session);
    std::fs::create_dir_all(&s).unwrap();
    std::fs::create_dir_all(tmp.path().join(".squad/run")).unwrap();
    for i in 0..n {
        write_plan(&s, &format!("task_{i}"), &format!("agent-{i}"), &extra(i));
    }
    tmp
}

/// A policy turning off every notice squadd sends agents, for tests that
/// count what inboxes hold (notices are tested in notices.rs).
pub const NO_NOTICES: &str = "notices:\n  task_ready: false\n  task_overdue: false\n  file_invalid: false\n  dependency_violation: false\n";

/// Writes `text` as the project's `.squad/policies.yaml`.
pub fn write_policy(root: impl AsRef<Path>, text: impl AsRef<[u8]>) {
    std::fs::write(root.as_ref().join(".squad/policies.yaml"), text).unwrap();
}

/// The text of a high-priority plan of `task` for `agent` (instruction `x`),
/// `extra` (YAML: boundaries, dependencies) appended.
pub fn plan_text(task: &str, agent: &str, extra: &str) -> String {
    format!(
        "meta:\n  task_id: {task}\n  agent: {agent}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ninstruction: x\n{extra}"
    )
}

/// Writes [`plan_text`] into `session` under its protocol name.
pub fn write_plan(session: &Path, task: &str, agent: &str, extra: &str) {
    std::fs::write(
        session.join(format!("role-plan-{agent}-{task}.md")),
        plan_text(task, agent, extra),
    )
    .unwrap();
}

/// The text of a notification `id` from alice to bob.
pub fn notification(
    id: &str,
    priority: &str,
    created_at: &str,
    subject: &str,
    message: &str,
) -> String {
    format!(
        "meta:\n  message_id: {id}\n  from_agent: alice\n  to_agent: bob\n  created_at: {created_at}\n  priority: {priority}\ntype: notification\nsubject: {subject}\nmessage: {message}\n"
    )
}

/// Writes `text` as message `id` from alice to bob the way agents do: to a
/// temporary name first, then renamed to its protocol name.
pub fn write_alice_to_bob(session: &Path, id: &str, text: &str) {
    let tmp = session.join(format!(".{id}.partial"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(
        &tmp,
        session.join(format!("role-comm-alice-to-bob-{id}.md")),
    )
    .unwrap();
}

/// Writes notification `i` (`msg_<i:05>`, created `i` seconds after
/// 10:00, subject `s<i>`) from alice to bob with [`write_alice_to_bob`];
/// returns its id.
pub fn write_numbered_message(session: &Path, i: usize, priority: &str) -> String {
    let id = format!("msg_{i:05}");
    let created = format!("2024-01-15T10:{:02}:{:02}Z", (i / 60) % 60, i % 60);
    let text = notification(&id, priority, &created, &format!("s{i}"), &format!("m{i}"));
    write_alice_to_bob(session, &id, &text);
    id
}

/// Writes `text` to `root/rel`, creating the directories on the way.
pub fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

// ---------------------------------------------------------------------------
// Reading what the binaries left.
// ---------------------------------------------------------------------------

/// Every file under `dir` (path relative to it) with its bytes, to show a
/// command changed nothing.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(
                    e.path().strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(e.path()).unwrap(),
                );
            }
        }
    }
    out
}

/// Whether process `pid` holds an inotify watch (its fdinfo lists one):
/// a `--wait` command is waiting on its watches, so a change made now
/// wakes it. Replaces a fixed sleep before the change.
pub fn watching(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .map(|rd| {
            rd.flatten()
                .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("inotify wd:")))
        })
        .unwrap_or(false)
}

/// squadd's recent events (`squadctl events --json` in `root`; the audit
/// log when squadd is down), oldest first.
pub fn events(root: &Path) -> Vec<serde_json::Value> {
    stdout(&ctl_run(root, &["events", "--json"]))
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Waits until one of squadd's recent events (see [`events`]) matches;
/// returns the first that does. The wait for something squadd did is the
/// event that says it did it, never a fixed time; before asserting that
/// something did not happen, wait this way for the event that shows squadd
/// handled the change that could have caused it.
pub fn wait_event(
    root: &Path,
    what: &str,
    matches: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    crate::daemon::eventually(what, || events(root).into_iter().find(|e| matches(e)))
}

/// Returns once squadd has finished the batch it was in: its loop answers
/// the control socket only between batches, so the second of two pings
/// in a row is answered after a whole batch (with what follows its status
/// writes: notices, deliveries, the runners' dispatch). After seeing one
/// effect of a batch, this shows the rest of that batch is done, so an
/// absence asserted next is squadd's decision, not a race.
pub fn batch_finished(root: &Path) {
    use std::io::{BufRead, BufReader, Write};
    let sock = root.join(".squad/run/squadd.sock");
    for _ in 0..2 {
        let mut s = std::os::unix::net::UnixStream::connect(&sock)
            .unwrap_or_else(|e| panic!("squadd's socket {}: {e}", sock.display()));
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        s.write_all(b"{\"protocol_version\":1,\"method\":\"ping\"}\n")
            .unwrap();
        let mut line = String::new();
        BufReader::new(&s)
            .read_line(&mut line)
            .expect("squadd answers a ping");
        assert!(line.contains("pong"), "{line}");
    }
}

/// Whether process `pid` is blocked on a file lock (`flock`, `fcntl`):
/// /proc/locks lists it as a waiter (`->`) behind the holder. The event
/// "it is waiting for the lock", instead of a sleep that hopes so.
pub fn blocked_on_a_lock(pid: u32) -> bool {
    std::fs::read_to_string("/proc/locks").is_ok_and(|t| {
        t.lines().any(|l| {
            let mut f = l.split_whitespace().skip(1);
            f.next() == Some("->") && f.nth(3) == Some(pid.to_string().as_str())
        })
    })
}

/// Whether process `pid` is in a timed sleep (its wait channel is the
/// kernel's nanosleep): a command that polls with a pause (`gc --wait`
/// between two tries of its lock) has reached its wait.
pub fn sleeping(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan")).is_ok_and(|w| w.contains("nanosleep"))
}

/// `squadctl status --json` in `root`, which must succeed, parsed.
pub fn status_json(root: &Path) -> serde_json::Value {
    let out = ctl_run(root, &["status", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// A session's `session-status.md` as YAML (its comment header dropped).
pub fn session_status(session: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(session.join("session-status.md")).unwrap();
    let yaml: String = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    serde_yaml::from_str(&yaml).unwrap()
}

/// The permission bits of `.squad/run` (squadd's and squadctl's private
/// state).
pub fn run_dir_mode(root: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(root.join(".squad/run"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// The audit log of `root` (`.squad/audit.jsonl`), if it can be read.
/// The message ids in an agent's inbox of a session (`new/` and `cur/`),
/// each with how often it occurs there.
pub fn inbox_message_ids(session: &Path, agent: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for sub in ["new", "cur"] {
        let dir = session.join("inbox").join(agent).join(sub);
        for e in std::fs::read_dir(&dir).into_iter().flatten() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            if let Some((_, id)) = name.rsplit_once("-msg_") {
                *out.entry(format!("msg_{}", id.trim_end_matches(".md")))
                    .or_insert(0) += 1;
            }
        }
    }
    out
}

pub fn audit_log(root: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(root.as_ref().join(".squad/audit.jsonl")).ok()
}

/// How many records of `kind` in the audit log name message `id` (0 while
/// there is no log).
pub fn audited_message(root: &Path, kind: &str, id: &str) -> usize {
    audit_log(root)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            l.contains(&format!("\"kind\":\"{kind}\""))
                && l.contains(&format!("\"message_id\":\"{id}\""))
        })
        .count()
}

#[test]
fn words_splits_at_spaces_and_keeps_quoted_arguments_whole() {
    assert_eq!(words("init"), ["init"]);
    assert_eq!(
        words("send --subject 'api shape?' --to bob --message ''"),
        [
            "send",
            "--subject",
            "api shape?",
            "--to",
            "bob",
            "--message",
            ""
        ]
    );
    assert_eq!(words("a 'b c'"), ["a", "b c"]);
}

/// The rule of CONTRIBUTING.md ("Waiting in e2e tests"): a test waits for
/// what happened through the event that says so; a fixed sleep stays only
/// when time is the scenario, and the comment just above it says so,
/// starting `Stays` (or `Poll interval` inside a wait with a deadline).
#[test]
fn every_fixed_sleep_says_why_it_stays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e");
    // Split so that this test's own text is not a match.
    let needle = concat!("thread::", "sleep(");
    let mut unexplained = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    assert!(files.len() > 20, "the e2e files under {}", dir.display());
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.contains(needle) {
                continue;
            }
            let comment: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("//"))
                .collect();
            if !comment
                .iter()
                .any(|l| l.contains("Stays") || l.contains("Poll interval"))
            {
                unexplained.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "fixed sleeps without a `// Stays …` or `// Poll interval …` comment just above (wait for an event instead, CONTRIBUTING.md):\n{}",
        unexplained.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Tests that cannot run here.
// ---------------------------------------------------------------------------

/// The tests that could not run here, with why (issue 40 item 5).
static SKIPPED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// Records that the running test cannot run on this machine (`why`: what
/// is missing and how to get it) before it returns early. libtest would
/// report it as a plain `ok`; every test recorded here is listed by name,
/// with the count, on stderr when the test binary exits (after libtest's
/// own summary), so `cargo test` never passes a skipped test off as one
/// that checked something. In CI a missing tool fails the test instead
/// (each caller asserts that first).
pub fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(a test on the main thread)")
        .to_string();
    eprintln!("SKIPPED {test}: {why}");
    let Ok(mut list) = SKIPPED.lock() else { return };
    if list.is_empty() {
        // SAFETY: registers a plain `extern "C" fn()` to run at exit.
        unsafe { libc::atexit(list_skipped) };
    }
    list.push((test, why.to_string()));
}

/// Prints [`skip`]'s list at exit: after libtest's `test result:` line.
extern "C" fn list_skipped() {
    use std::io::Write;
    let Ok(list) = SKIPPED.lock() else { return };
    let mut out = format!(
        "\nSKIPPED: {} test{} could not run here and checked nothing:\n",
        list.len(),
        if list.len() == 1 { "" } else { "s" }
    );
    for (test, why) in list.iter() {
        out.push_str(&format!("  {test}: {why}\n"));
    }
    out.push_str(&format!(
        "{} skipped. `.ci/test` installs the pinned tools they need and runs the whole suite.\n",
        list.len()
    ));
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// A tool `.ci/run` installs under the CI cache: `$<env_var>` when set, else
/// `~/.cache/squad-ci/<cache_path>`, if running it with `probe` succeeds.
/// None (with a loud SKIPPED message naming `what`) when absent outside CI;
/// in CI its absence fails the test.
pub fn ci_tool(env_var: &str, cache_path: &str, probe: &[&str], what: &str) -> Option<PathBuf> {
    let candidate = std::env::var_os(env_var).map(PathBuf::from).or_else(|| {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/squad-ci").join(cache_path))
    })?;
    let works = Command::new(&candidate)
        .args(probe)
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(candidate);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI: {what} is missing at {} (.ci/run installs it)",
        candidate.display()
    );
    skip(&format!(
        "no {what} at {} (run .ci/test, or set {env_var})",
        candidate.display()
    ));
    None
}

/// An event's `kind` (empty when it has none).
pub fn kind_of(e: &serde_json::Value) -> &str {
    e["kind"].as_str().unwrap_or_default()
}
