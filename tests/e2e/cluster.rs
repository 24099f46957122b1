//! The cluster (docs/cluster.md) through the real binaries: a three-node
//! NATS JetStream cluster on loopback ports (the pinned `nats-server` that
//! `.ci/run` installs), three checkouts of one repository, each with its
//! own squadd, agents contending for cluster-wide locks, a holder's squadd
//! killed -9, a host without NATS.

use crate::daemon::{Daemon, eventually};
use crate::support::*;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SESSION: &str = "20240115T100000Z-cluster";

/// squadd's debug log without the NATS client's connection chatter.
const QUIET_NATS: &[(&str, &str)] = &[("RUST_LOG", "debug,async_nats=info")];

/// The pinned nats-server: `SQUAD_NATS_SERVER`, else the one `.ci/run`
/// installs. None (with a loud message) when absent outside CI; in CI its
/// absence fails the test.
fn nats_server() -> Option<PathBuf> {
    ci_tool(
        "SQUAD_NATS_SERVER",
        "nats-venv/bin/nats-server",
        &["--version"],
        "nats-server",
    )
}

/// A free loopback port (bound, then released for the server to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One nats-server of the test cluster.
pub(crate) struct Node {
    child: Option<Child>,
    pub(crate) client_port: u16,
    monitor_port: u16,
    log: PathBuf,
}

/// A three-node JetStream cluster on 127.0.0.1, each node with its own
/// store directory; every node is killed when this is dropped.
pub struct NatsCluster {
    pub(crate) nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts the cluster and waits until every node reports JetStream
    /// healthy (a meta leader elected). None when the server is absent
    /// outside CI.
    pub fn start() -> Option<NatsCluster> {
        let server = nats_server()?;
        // A port picked free may be taken before the node binds it (by a
        // test running alongside): a node that exits is a lost race, and
        // the cluster starts again on new ports.
        for _ in 0..5 {
            if let Some(c) = NatsCluster::try_start(&server) {
                return Some(c);
            }
        }
        panic!("the NATS cluster did not start (node logs above)");
    }

    fn try_start(server: &Path) -> Option<NatsCluster> {
        let dir = tempfile::tempdir().unwrap();
        // All nine held at once, so that no two are the same port.
        let held: Vec<TcpListener> = (0..9)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let port = |i: usize| held[i].local_addr().unwrap().port();
        let ports: Vec<(u16, u16, u16)> = (0..3)
            .map(|n| (port(3 * n), port(3 * n + 1), port(3 * n + 2)))
            .collect();
        drop(held);
        let routes: Vec<String> = ports
            .iter()
            .map(|(_, c, _)| format!("\"nats-route://127.0.0.1:{c}\""))
            .collect();
        let mut nodes = Vec::new();
        for (i, (client, route, monitor)) in ports.iter().enumerate() {
            let store = dir.path().join(format!("n{i}"));
            fs::create_dir_all(&store).unwrap();
            let conf = dir.path().join(format!("n{i}.conf"));
            fs::write(
                &conf,
                format!(
                    "server_name: n{i}\nlisten: \"127.0.0.1:{client}\"\nhttp: \"127.0.0.1:{monitor}\"\n\
                     jetstream {{ store_dir: \"{}\" }}\n\
                     cluster {{ name: squadtest\n  listen: \"127.0.0.1:{route}\"\n  routes: [{}]\n}}\n",
                    store.display(),
                    routes.join(", ")
                ),
            )
            .unwrap();
            let log = dir.path().join(format!("n{i}.log"));
            let child = Command::new(server)
                .arg("-c")
                .arg(&conf)
                .stdout(Stdio::null())
                .stderr(fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            nodes.push(Node {
                child: Some(child),
                client_port: *client,
                monitor_port: *monitor,
                log,
            });
        }
        let mut cluster = NatsCluster { nodes, _dir: dir };
        let start = Instant::now();
        while !(0..3).all(|i| cluster.healthy(i)) {
            let exited = cluster.nodes.iter_mut().any(|n| {
                n.child
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some())
            });
            if exited {
                let logs: Vec<String> = cluster
                    .nodes
                    .iter()
                    .map(|n| fs::read_to_string(&n.log).unwrap_or_default())
                    .collect();
                eprintln!("a NATS node exited while starting; again on new ports: {logs:?}");
                return None;
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "the NATS cluster did not become healthy"
            );
            // Poll interval: the cluster's health, asked until a deadline.
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(cluster)
    }

    /// Whether node `i` answers `/healthz` with 200 (JetStream current).
    fn healthy(&self, i: usize) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.nodes[i].monitor_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        if s.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200")
    }

    /// Kills node `i` (SIGKILL), as a crash would.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes node `i` (SIGSTOP): its connections stay open and silent,
    /// as a stalled machine's would.
    pub fn freeze_node(&self, i: usize) {
        if let Some(c) = &self.nodes[i].child {
            crate::daemon::signal(c.id(), "STOP");
        }
    }

    /// Resumes a frozen node (SIGCONT).
    pub fn thaw_node(&self, i: usize) {
        if let Some(c) = &self.nodes[i].child {
            crate::daemon::signal(c.id(), "CONT");
        }
    }

    /// Node `i`'s last sequence of stream `stream` (monitoring `/jsz`),
    /// when it answers and has the stream.
    fn last_seq(&self, i: usize, stream: &str) -> Option<u64> {
        let mut s = TcpStream::connect(("127.0.0.1", self.nodes[i].monitor_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET /jsz?streams=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .ok()?;
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        let body = answer.split_once("\r\n\r\n")?.1;
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        v["account_details"]
            .as_array()?
            .iter()
            .flat_map(|a| a["stream_detail"].as_array().cloned().unwrap_or_default())
            .find(|d| d["name"] == stream)?["state"]["last_seq"]
            .as_u64()
    }

    /// The client URLs, YAML flow list.
    pub fn urls_yaml(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"nats://127.0.0.1:{}\"", n.client_port))
            .collect();
        format!("[{}]", urls.join(", "))
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            if std::thread::panicking() {
                let log = fs::read_to_string(&n.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- {} (last lines) ---", n.log.display());
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}

/// One repository with `n` agents (`agent-<i>`, task `task_<i>`, allowed
/// `shared/**`) and `policy`, cloned into `hosts` checkouts. The temporary
/// directory holds them all.
fn checkouts(hosts: usize, n: usize, policy: &str) -> (tempfile::TempDir, Vec<PathBuf>) {
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("origin");
    fs::create_dir_all(&origin).unwrap();
    let s = origin.join(".squad/sessions").join(SESSION);
    fs::create_dir_all(&s).unwrap();
    for i in 0..n {
        write_plan(
            &s,
            &format!("task_{i}"),
            &format!("agent-{i}"),
            "boundaries:\n  allowed:\n    - shared/**\n",
        );
    }
    fs::write(origin.join(".squad/policies.yaml"), policy).unwrap();
    fs::write(origin.join("README"), "one project\n").unwrap();
    let mut roots = Vec::new();
    if has_git() {
        git_ok(&origin, &["init", "-q"]);
        git_ok(&origin, &["add", "-A"]);
        git_ok(&origin, &["commit", "-q", "-m", "project"]);
        for h in 0..hosts {
            let to = tmp.path().join(format!("host-{h}"));
            git_ok(
                tmp.path(),
                &[
                    "clone",
                    "-q",
                    &origin.display().to_string(),
                    &to.display().to_string(),
                ],
            );
            roots.push(to);
        }
    } else {
        eprintln!("note: no git; the checkouts are copies");
        for h in 0..hosts {
            let to = tmp.path().join(format!("host-{h}"));
            copy_tree(&origin, &to);
            roots.push(to);
        }
    }
    for r in &roots {
        fs::create_dir_all(r.join(".squad/run")).unwrap();
    }
    (tmp, roots)
}

fn cluster_policy(nats: &str, ttl: &str) -> String {
    format!(
        "cluster:\n  nats: {nats}\n  project: e2e\n  lock_ttl: {ttl}\n  replicas: 3\n{NO_NOTICES}"
    )
}

pub(crate) fn status(root: &Path) -> (i32, serde_json::Value) {
    let out = ctl_run(root, &["cluster", "status", "--json"]);
    let v = serde_json::from_str(&stdout(&out)).unwrap_or_default();
    (code(&out), v)
}

/// Waits until the checkout's squadd reports NATS connected.
fn wait_connected(root: &Path) -> serde_json::Value {
    eventually("squadd connected to NATS", || {
        let (c, v) = status(root);
        (c == 0 && v["connection"]["state"] == "connected").then_some(v)
    })
}

fn acquire(root: &Path, i: usize, extra: &[&str]) -> std::process::Output {
    let agent = format!("agent-{i}");
    let task = format!("task_{i}");
    let mut args = vec![
        "lock",
        "acquire",
        "shared/x.rs",
        "--agent",
        &agent,
        "--task",
        &task,
    ];
    args.extend_from_slice(extra);
    ctl_run(root, &args)
}

/// The guard asked, as Claude Code asks it, whether agent-`i` may write
/// `rel` in `root`.
fn guard_write(root: &Path, i: usize, rel: &str) -> std::process::Output {
    let input = serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_input": {"file_path": root.join(rel), "content": "x"}});
    run_with_input(
        ctl(root)
            .arg("guard")
            .env("SQUAD_AGENT", format!("agent-{i}"))
            .env("SQUAD_TASK", format!("task_{i}")),
        input.to_string().as_bytes(),
    )
}

#[test]
fn three_hosts_join_one_nats_cluster_and_see_each_others_locks() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots) = checkouts(3, 3, &cluster_policy(&nats.urls_yaml(), "5s"));
    let _daemons: Vec<Daemon> = roots
        .iter()
        .map(|r| Daemon::start_with_env(r, QUIET_NATS))
        .collect();
    let mut hosts = Vec::new();
    for r in &roots {
        let v = wait_connected(r);
        assert_eq!(v["project"], "e2e");
        hosts.push(v["host"].as_str().unwrap().to_string());
    }
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts.len(), 3, "a host id per checkout: {hosts:?}");

    // Host 0 takes a lock; hosts 1 and 2 see it, named, and are refused.
    let out = acquire(&roots[0], 0, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for (h, r) in roots.iter().enumerate().skip(1) {
        // On a loaded machine one `cluster status` can miss its answer
        // from NATS (it exits non-zero then): asked again until it answers.
        let v = eventually("cluster status answers", || {
            let (c, v) = status(r);
            (c == 0 && v["locks"].is_array()).then_some(v)
        });
        let locks = v["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 1, "{v:#}");
        assert_eq!(locks[0]["target"], "shared/x.rs");
        assert_eq!(locks[0]["agent"], "agent-0");
        let out = acquire(r, h, &[]);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("locked cluster-wide by agent-0 (task task_0)"),
            "{}",
            stderr(&out)
        );
        // The refused acquisition left no local record behind.
        let list = ctl_ok(r, &["lock", "list", "--json"]);
        let list: serde_json::Value = serde_json::from_str(&list).unwrap();
        assert_eq!(list["locks"].as_array().unwrap().len(), 0, "{list:#}");
        assert_eq!(list["cluster_locks"][0]["agent"], "agent-0", "{list:#}");
    }
    // The guard on host 1 refuses agent-1's write to the path host 0
    // holds, and allows a path nobody holds.
    let out = guard_write(&roots[1], 1, "shared/x.rs");
    assert!(
        stdout(&out).contains("deny") && stdout(&out).contains("agent-0 (on host"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let out = guard_write(&roots[1], 1, "shared/y.rs");
    assert_eq!(
        (code(&out), stdout(&out).trim()),
        (0, ""),
        "{}",
        stderr(&out)
    );
    let health = ctl_run(&roots[1], &["health"]);
    assert!(
        stdout(&health).contains("ok       cluster connected to n"),
        "{}",
        stdout(&health)
    );
    // `lock list` on host 2 shows the cluster-wide table after its own.
    let list = ctl_ok(&roots[2], &["lock", "list"]);
    assert!(
        list.contains("no locks\ncluster-wide: 1 lock(s)\n  shared/x.rs  agent-0 (task_0)"),
        "{list}"
    );
    let human = ctl_ok(&roots[1], &["cluster", "status"]);
    assert!(human.contains("NATS: connected"), "{human}");
    assert!(human.contains("shared/x.rs  agent-0 (task_0)"), "{human}");

    // Released on host 0: host 1 takes it at once.
    ctl_ok(
        &roots[0],
        &["lock", "release", "shared/x.rs", "--agent", "agent-0"],
    );
    let out = acquire(&roots[1], 1, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn sixty_agents_on_three_hosts_never_hold_one_path_at_once() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    const PER_HOST: usize = 20;
    let (_tmp, roots) = checkouts(3, 3 * PER_HOST, &cluster_policy(&nats.urls_yaml(), "10s"));
    let _daemons: Vec<Daemon> = roots
        .iter()
        .map(|r| Daemon::start_with_env(r, QUIET_NATS))
        .collect();
    for r in &roots {
        wait_connected(r);
    }
    // Each agent: acquire with a wait, note when it returned, hold briefly,
    // note when it lets go, release. The noted interval lies inside the
    // real holding, so two noted intervals that overlap prove two holders.
    let history: Arc<Mutex<Vec<(Instant, Instant, usize)>>> = Arc::default();
    let threads: Vec<_> = (0..3 * PER_HOST)
        .map(|i| {
            let root = roots[i / PER_HOST].clone();
            let history = history.clone();
            std::thread::spawn(move || {
                let out = acquire(&root, i, &["--wait", "10m"]);
                assert_eq!(code(&out), 0, "agent-{i}: {}", stderr(&out));
                let from = Instant::now();
                // Stays (the scenario): the lock is held a moment, so overlapping holders would show in the history.
                std::thread::sleep(Duration::from_millis(20));
                let to = Instant::now();
                history.lock().unwrap().push((from, to, i));
                let agent = format!("agent-{i}");
                let out = ctl_run(
                    &root,
                    &["lock", "release", "shared/x.rs", "--agent", &agent],
                );
                assert_eq!(code(&out), 0, "agent-{i}: {}", stderr(&out));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut h = history.lock().unwrap().clone();
    assert_eq!(h.len(), 3 * PER_HOST, "every agent held the lock once");
    h.sort();
    for w in h.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "agent-{} and agent-{} held shared/x.rs at once",
            w[0].2,
            w[1].2
        );
    }
    let hosts: std::collections::BTreeSet<usize> = h.iter().map(|(_, _, i)| i / PER_HOST).collect();
    assert_eq!(hosts.len(), 3, "holders on every host");
}

/// Two checkouts with squadds connected to `nats` (lock TTL `ttl`), agent-0
/// on host 0 holding `shared/x.rs` (its local record for an hour).
fn two_hosts_with_a_lock(
    nats: &NatsCluster,
    ttl: &str,
) -> (tempfile::TempDir, Vec<PathBuf>, Daemon, Daemon) {
    let (tmp, roots) = checkouts(2, 2, &cluster_policy(&nats.urls_yaml(), ttl));
    let a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    let b = Daemon::start_with_env(&roots[1], QUIET_NATS);
    wait_connected(&roots[0]);
    wait_connected(&roots[1]);
    let out = acquire(&roots[0], 0, &["--ttl", "1h"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    (tmp, roots, a, b)
}

#[test]
fn a_killed_holders_lock_passes_after_its_ttl_never_before() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    const TTL: Duration = Duration::from_secs(3);
    // squadd renews at a third of the TTL: the last renewal before a kill
    // was at most this long before it.
    const RENEW: Duration = Duration::from_secs(1);
    let (_tmp, roots, a, _b) = two_hosts_with_a_lock(&nats, "3s");
    // Held well past its TTL while its squadd lives (renewed).
    // Stays (the scenario): time past the TTL must pass while squadd renews.
    std::thread::sleep(TTL * 2);
    let out = acquire(&roots[1], 1, &[]);
    assert_eq!(code(&out), 1, "renewed, still held: {}", stderr(&out));

    a.kill9();
    let killed = Instant::now();
    // Before the TTL can have run out, host 1 is still refused (checked
    // only when the whole attempt ended in time: a slow machine proves
    // nothing either way).
    let tried = Instant::now();
    let out = acquire(&roots[1], 1, &[]);
    if tried.elapsed() + (tried - killed) < TTL - RENEW {
        assert_eq!(code(&out), 1, "taken before the TTL: {}", stderr(&out));
    }
    let out = acquire(&roots[1], 1, &["--wait", "2m"]);
    let taken = killed.elapsed();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        taken >= TTL - RENEW,
        "the lock passed {taken:?} after its holder's squadd died, before its TTL"
    );
    let (_, v) = status(&roots[1]);
    assert_eq!(v["locks"][0]["agent"], "agent-1", "{v:#}");
}

#[test]
fn a_host_without_nats_takes_no_cluster_lock() {
    // No server needed: the seed is a port nobody listens on.
    let dead = format!("[\"nats://127.0.0.1:{}\"]", free_port());
    let (_tmp, roots) = checkouts(1, 1, &cluster_policy(&dead, "5s"));
    let root = &roots[0];

    // squadd down: the command says squadd is needed, takes nothing.
    let out = acquire(root, 0, &[]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("squadd is not running"),
        "{}",
        stderr(&out)
    );

    let _d = Daemon::start_with_env(root, QUIET_NATS);
    let out = acquire(root, 0, &[]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not connected to NATS")
            && stderr(&out).contains("no new cluster locks"),
        "{}",
        stderr(&out)
    );
    let list = ctl_ok(root, &["lock", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(
        list["locks"].as_array().unwrap().len(),
        0,
        "nothing held: {list:#}"
    );
    let health = ctl_run(root, &["health"]);
    assert!(
        stdout(&health).contains("CRITICAL cluster NATS"),
        "{}",
        stdout(&health)
    );
    let (c, v) = status(root);
    assert_eq!(c, 1, "{v:#}");
    assert_ne!(v["connection"]["state"], "connected", "{v:#}");
    // Not the leader without NATS: the supervisor-owned outputs are not
    // written (another host's leader writes them).
    assert_eq!(v["leader"]["this_host"], false, "{v:#}");
    let session = root.join(".squad/sessions").join(SESSION);
    assert!(!session.join("session-status.md").exists());
    // A shared lock is local only (docs/cluster.md) and still works.
    let out = acquire(root, 0, &["--shared"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_bad_cluster_section_is_named_with_its_position() {
    let (_tmp, roots) = checkouts(
        1,
        1,
        "cluster:\n  nats: [\"nats://10.0.0.5\"]\n  project: web-shop\n",
    );
    let out = ctl_run(&roots[0], &["validate"]);
    assert_ne!(code(&out), 0);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        all.contains("cluster.nats[0]") && all.contains("no port"),
        "{all}"
    );
    assert!(all.contains("policies.yaml:2:"), "at the URL: {all}");
    assert_eq!(
        all.matches("policy-invalid").count(),
        1,
        "one finding: {all}"
    );
    let (c, v) = status(&roots[0]);
    assert_eq!(c, 2, "{v:#}");
    // Without `cluster:` the status says the cluster is off.
    let (_tmp2, plain) = checkouts(1, 1, "");
    let (c, v) = status(&plain[0]);
    assert_eq!((c, v["enabled"].clone()), (0, serde_json::json!(false)));
}

#[test]
fn a_restarted_squadd_keeps_renewing_its_checkouts_locks() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    const TTL: Duration = Duration::from_secs(6);
    let (_tmp, roots, a, _b) = two_hosts_with_a_lock(&nats, "6s");
    // Restarted: the new squadd finds the key its checkout holds (the local
    // record is live) and renews it; well past its TTL it is still held.
    // (A restart slower than two thirds of the TTL would let it lapse.)
    a.kill9();
    let _a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    wait_connected(&roots[0]);
    // Stays (the scenario): time past the TTL must pass after the restart.
    std::thread::sleep(TTL + TTL / 2);
    let out = acquire(&roots[1], 1, &[]);
    assert_eq!(code(&out), 1, "adopted and renewed: {}", stderr(&out));
    let (_, v) = status(&roots[0]);
    assert_eq!(v["held_here"], 1, "{v:#}");
}

#[test]
fn a_killed_nats_node_leaves_the_locks_exclusive_and_working() {
    let Some(mut nats) = NatsCluster::start() else {
        return;
    };
    // A TTL longer than a stream leader election: renewals that fail while
    // the cluster elects must not let the lock lapse.
    let (_tmp, roots, _a, _b) = two_hosts_with_a_lock(&nats, "20s");
    nats.kill_node(0);
    // Until the client has reconnected and the stream has a leader, an
    // attempt fails (exit 2, never a grant); then it is refused: held.
    let out = eventually("an answer from the two live nodes", || {
        let out = acquire(&roots[1], 1, &[]);
        (code(&out) != 2).then_some(out)
    });
    assert_eq!(code(&out), 1, "still held by agent-0: {}", stderr(&out));
    assert!(stderr(&out).contains("by agent-0"), "{}", stderr(&out));
    // Released on host 0 (its squadd reconnected too), taken on host 1.
    eventually("host 0 releases through the live nodes", || {
        let out = ctl_run(
            &roots[0],
            &["lock", "release", "shared/x.rs", "--agent", "agent-0"],
        );
        (code(&out) == 0).then_some(())
    });
    let out = eventually("host 1 takes the released lock", || {
        let out = acquire(&roots[1], 1, &[]);
        (code(&out) == 0).then_some(out)
    });
    assert_eq!(code(&out), 0);
    let (_, v) = status(&roots[0]);
    assert_eq!(v["locks"][0]["agent"], "agent-1", "{v:#}");
}

// ---------------------------------------------------------------------------
// Replication of protocol files and cross-host delivery (docs/cluster.md,
// "Replication", "Cross-host delivery").
// ---------------------------------------------------------------------------

pub(crate) fn session_of(root: &Path) -> PathBuf {
    root.join(".squad/sessions").join(SESSION)
}

/// The replication section of `cluster status --json` (null while squadd
/// cannot answer).
pub(crate) fn replication(root: &Path) -> serde_json::Value {
    status(root).1["replication"].clone()
}

/// Two checkouts (agents agent-0 and agent-1) whose squadds are connected;
/// host 1's squadd is started only when `both`.
fn two_replicas(
    nats: &NatsCluster,
    both: bool,
) -> (tempfile::TempDir, Vec<PathBuf>, Daemon, Option<Daemon>) {
    let (tmp, roots) = checkouts(2, 2, &cluster_policy(&nats.urls_yaml(), "20s"));
    let a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    wait_connected(&roots[0]);
    let b = both.then(|| {
        let b = Daemon::start_with_env(&roots[1], QUIET_NATS);
        wait_connected(&roots[1]);
        b
    });
    (tmp, roots, a, b)
}

#[test]
fn a_plan_written_on_one_host_shows_on_the_other_and_its_completion_comes_back() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _a, _b) = two_replicas(&nats, true);
    let (s0, s1) = (session_of(&roots[0]), session_of(&roots[1]));
    write_plan(&s0, "task_9", "agent-9", "");
    let plan = fs::read(s0.join("role-plan-agent-9-task_9.md")).unwrap();
    // Host 1's squadd indexed it: its status counts the task.
    eventually("the plan on host 1's status", || {
        let v = status_json(&roots[1]);
        let s = &v["roots"][0]["sessions"][0];
        (s["tasks_total"] == 3).then_some(())
    });
    assert_eq!(
        fs::read(s1.join("role-plan-agent-9-task_9.md")).unwrap(),
        plan
    );
    // Host 1's agent completes it; host 0 sees the task completed.
    fs::write(
        s1.join("role-comm-agent-9-task_9.md"),
        crate::daemon::progress("task_9", "agent-9", "completed"),
    )
    .unwrap();
    eventually("the completion on host 0's status", || {
        let v = status_json(&roots[0]);
        let s = &v["roots"][0]["sessions"][0];
        (s["tasks_completed"] == 1).then_some(())
    });
    // Never echoed: each version was published once, no conflict, nothing
    // pending; the identical cloned files were noted as synced, not
    // published twice.
    for r in &roots {
        let rep = eventually("replication settled", || {
            let rep = replication(r);
            (rep["pending"] == 0).then_some(rep)
        });
        assert_eq!(rep["conflicts_total"], 0, "{rep:#}");
        assert!(!session_of(r).join("conflicts").exists());
    }
    // The leader's own outputs (its session-status.md, published once it
    // is elected, which may or may not fall inside this test) aside.
    let published: u64 = roots
        .iter()
        .map(|r| {
            let rep = replication(r);
            rep["published"].as_u64().unwrap() - rep["published_outputs"].as_u64().unwrap()
        })
        .sum();
    // Two plans of the clone (once, by whichever host came first), the new
    // plan, the progress update.
    assert_eq!(published, 4, "{:#}", replication(&roots[0]));
    // Replication lag: each host's heartbeat carries the revision it
    // applied; once both applied every version, each host's row on every
    // host says 0 (the old code had null here).
    for r in &roots {
        eventually("both hosts' replication lag is 0", || {
            let (_, v) = status(r);
            let rows = v["hosts"].as_array()?.clone();
            let files = v["files_revision"].as_u64()?;
            (files > 0
                && rows.len() == 2
                && rows
                    .iter()
                    .all(|h| h["replication_lag"] == 0 && h["applied_revision"] == files))
            .then_some(())
        });
    }
    let human = ctl_ok(&roots[0], &["cluster", "status"]);
    assert!(
        human.contains("replication lag: 0 revisions (applied "),
        "{human}"
    );
    let st = ctl_ok(&roots[1], &["status"]);
    assert!(st.contains("; replication lag: max 0 revisions"), "{st}");
    let st = status_json(&roots[1]);
    let lags = &st["cluster"]["replication_lag"];
    assert_eq!(lags.as_object().map(|m| m.len()), Some(2), "{st:#}");
    let health = ctl_run(&roots[0], &["health"]);
    assert!(
        stdout(&health).contains("; replication lag: max 0 revisions"),
        "{}",
        stdout(&health)
    );
}

/// Two checkouts (agents agent-0 and agent-1, lock TTL 5 s, lease 3 s),
/// their squadds connected, and the index of the one elected leader.
fn two_with_a_leader(nats: &NatsCluster) -> (tempfile::TempDir, Vec<PathBuf>, Vec<Daemon>, usize) {
    two_with_a_leader_on(&leader_policy(&nats.urls_yaml(), "5s", "3s"))
}

/// [`two_with_a_leader`] with `policy`.
fn two_with_a_leader_on(policy: &str) -> (tempfile::TempDir, Vec<PathBuf>, Vec<Daemon>, usize) {
    let (tmp, roots) = checkouts(2, 2, policy);
    let daemons: Vec<Daemon> = roots
        .iter()
        .map(|r| Daemon::start_with_env(r, QUIET_NATS))
        .collect();
    for r in &roots {
        wait_connected(r);
    }
    let leader = eventually("one leader", || sole_leader(&roots, &[0, 1]));
    (tmp, roots, daemons, leader)
}

#[test]
fn the_leaders_session_status_reaches_the_host_a_plan_was_written_on() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _daemons, leader) = two_with_a_leader(&nats);
    let follower = 1 - leader;
    // A plan written on the follower: replicated to the leader, which
    // renders session-status.md; that replicates back with its epoch.
    write_plan(&session_of(&roots[follower]), "task_9", "agent-9", "");
    let counted = eventually("the follower's session-status.md counts the plan", || {
        crate::daemon::counters(&session_of(&roots[follower])).filter(|c| c.1 == 3)
    });
    assert_eq!(counted.0, 0, "{counted:?}");
    eventually("the same file on both hosts", || {
        let read = |h: usize| fs::read(session_of(&roots[h]).join("session-status.md")).ok();
        (read(leader).is_some() && read(leader) == read(follower)).then_some(())
    });
    // Written by the leader alone, never by the follower (the old code had
    // no session-status.md on a follower at all).
    assert!(wrote_status(&roots[leader]));
    assert!(!wrote_status(&roots[follower]));
    // The leader published it with its epoch; nothing was fenced or in
    // conflict.
    let rep = replication(&roots[follower]);
    assert_eq!(rep["conflicts_total"], 0, "{rep:#}");
    assert_eq!(rep["dropped"], 0, "{rep:#}");
}

#[test]
fn a_concurrent_write_to_one_file_keeps_both_versions_and_reports_the_conflict() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _a, _) = two_replicas(&nats, false);
    let (s0, s1) = (session_of(&roots[0]), session_of(&roots[1]));
    let file = "role-comm-agent-0-task_0.md";
    // The same file written on both hosts from the same (absent) version:
    // host 0's squadd commits its version; host 1 wrote its own while its
    // squadd was down and publishes when it starts.
    let ours = crate::daemon::progress("task_0", "agent-0", "in_progress");
    let theirs = crate::daemon::progress("task_0", "agent-0", "blocked");
    fs::write(s0.join(file), &ours).unwrap();
    eventually("host 0 published", || {
        (replication(&roots[0])["published"].as_u64() >= Some(3)).then_some(())
    });
    fs::write(s1.join(file), &theirs).unwrap();
    let _b = Daemon::start_with_env(&roots[1], QUIET_NATS);
    wait_connected(&roots[1]);
    let rep = eventually("host 1 reports the conflict", || {
        let rep = replication(&roots[1]);
        (rep["conflicts_total"] == 1).then_some(rep)
    });
    // Resolved by revision: host 0's version (committed first) is the
    // file on both hosts; host 1's is kept beside it, outside the
    // protocol's read set.
    let kept = rep["conflicts"][0]["kept"].as_str().unwrap().to_string();
    assert!(kept.starts_with(&format!("conflicts/{file}.")), "{rep:#}");
    assert_eq!(fs::read_to_string(s1.join(&kept)).unwrap(), theirs);
    assert_eq!(fs::read_to_string(s1.join(file)).unwrap(), ours);
    assert_eq!(fs::read_to_string(s0.join(file)).unwrap(), ours);
    assert_eq!(rep["conflicts"][0]["file"], file, "{rep:#}");
    let human = ctl_ok(&roots[1], &["cluster", "status"]);
    assert!(
        human.contains(&format!("conflict  {SESSION}/{file}")),
        "{human}"
    );
    eventually("the conflict in host 1's audit log", || {
        audit_log(&roots[1])
            .is_some_and(|l| l.contains("\"kind\":\"replica-conflict\""))
            .then_some(())
    });
    // Only the contested file: the cloned plans were identical.
    assert_eq!(rep["conflicts_total"], 1, "{rep:#}");
    assert_eq!(replication(&roots[0])["conflicts_total"], 0);
    // Host 1's version never came back over host 0's.
    // Stays (an absence): a replication sweep runs every 3 s; one has run by then.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(fs::read_to_string(s0.join(file)).unwrap(), ours);
}

/// Message `i` from agent-0 (host 0) to agent-1 (host 1), written as an
/// agent writes it; its id.
fn write_cross_message(session: &Path, i: usize) -> String {
    let id = format!("msg_x{i:03}");
    let text = format!(
        "meta:\n  message_id: {id}\n  from_agent: agent-0\n  to_agent: agent-1\n  created_at: 2024-01-15T10:00:{:02}Z\n  priority: high\ntype: notification\nsubject: s{i}\nmessage: m{i}\n",
        i % 60
    );
    let tmp = session.join(format!(".{id}.partial"));
    fs::write(&tmp, text).unwrap();
    fs::rename(
        &tmp,
        session.join(format!("role-comm-agent-0-to-agent-1-{id}.md")),
    )
    .unwrap();
    id
}

/// The names in an agent's inbox (new/ and cur/).
fn inbox_names(root: &Path, agent: &str) -> Vec<String> {
    let mut names = Vec::new();
    for sub in ["new", "cur"] {
        let dir = session_of(root).join("inbox").join(agent).join(sub);
        if let Ok(entries) = fs::read_dir(dir) {
            names.extend(entries.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()));
        }
    }
    names.sort();
    names
}

#[test]
fn a_message_to_an_agent_on_another_host_is_delivered_there_once_through_kills() {
    let Some(mut nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, a, b) = two_replicas(&nats, true);
    let b = b.unwrap();
    let s0 = session_of(&roots[0]);
    // agent-1 works on host 1: its squadctl call registers it there.
    let host1 = status(&roots[1]).1["host"].as_str().unwrap().to_string();
    let out = run(ctl(&roots[1])
        .args(["inbox", "list"])
        .env("SQUAD_AGENT", "agent-1"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    eventually("host 0 knows agent-1 is on host 1", || {
        (replication(&roots[0])["agents"]["agent-1"] == host1.as_str()).then_some(())
    });
    let mut ids = Vec::new();
    ids.extend((0..5).map(|i| write_cross_message(&s0, i)));
    // A NATS node dies (kill -9).
    nats.kill_node(0);
    ids.extend((5..10).map(|i| write_cross_message(&s0, i)));
    // The sender's squadd dies; messages are written meanwhile.
    a.kill9();
    ids.extend((10..15).map(|i| write_cross_message(&s0, i)));
    let _a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    ids.extend((15..20).map(|i| write_cross_message(&s0, i)));
    // The recipient's squadd dies; messages are written meanwhile.
    b.kill9();
    ids.extend((20..25).map(|i| write_cross_message(&s0, i)));
    let _b = Daemon::start_with_env(&roots[1], QUIET_NATS);
    ids.extend((25..30).map(|i| write_cross_message(&s0, i)));
    let what = "every message in agent-1's inbox on host 1";
    let names = crate::daemon::eventually_within(what, Duration::from_secs(120), || {
        let names = inbox_names(&roots[1], "agent-1");
        (names.len() >= ids.len()).then_some(names)
    });
    // 0 lost, 0 duplicated: each id once in the inbox on host 1, none on
    // host 0 (the sender's host, which has every file too).
    for id in &ids {
        let n = names
            .iter()
            .filter(|n| n.ends_with(&format!("-{id}.md")))
            .count();
        assert_eq!(n, 1, "{id} in host 1's inbox: {names:?}");
        assert!(
            audited_message(&roots[1], "message-delivered", id) <= 1,
            "{id}"
        );
    }
    assert_eq!(names.len(), ids.len(), "{names:?}");
    assert_eq!(inbox_names(&roots[0], "agent-1"), Vec::<String>::new());
    for id in &ids {
        assert_eq!(
            audited_message(&roots[0], "message-delivered", id),
            0,
            "{id}"
        );
    }
}

/// Message `id` from `from` to `to`, written into `session` as an agent
/// writes it (temporary name, then rename), priority high, created at
/// 10:00:00; the path its delivery lands at in `to`'s inbox under `inbox_root`.
fn write_timed_message(
    session: &Path,
    inbox_root: &Path,
    id: &str,
    from: &str,
    to: &str,
) -> PathBuf {
    let text = format!(
        "meta:\n  message_id: {id}\n  from_agent: {from}\n  to_agent: {to}\n  created_at: 2024-01-15T10:00:00Z\n  priority: high\ntype: notification\nsubject: s\nmessage: m\n"
    );
    let tmp = session.join(format!(".{id}.partial"));
    fs::write(&tmp, text).unwrap();
    fs::rename(
        &tmp,
        session.join(format!("role-comm-{from}-to-{to}-{id}.md")),
    )
    .unwrap();
    let created = chrono::DateTime::parse_from_rfc3339("2024-01-15T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let name =
        squad_policies::messages::inbox_name(squad_protocol::model::Priority::High, created, id);
    session_of(inbox_root)
        .join("inbox")
        .join(to)
        .join("new")
        .join(name)
}

/// Waits (polling every 100 µs, no timeout beyond 30 s) until `path`
/// exists; how long it took since `from`.
fn seen_after(path: &Path, from: Instant) -> Duration {
    loop {
        if path.exists() {
            return from.elapsed();
        }
        assert!(
            from.elapsed() < Duration::from_secs(30),
            "never delivered: {}",
            path.display()
        );
        // Poll interval: the inbox path, looked at until a deadline (the benchmark's resolution).
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

/// The cross-host delivery benchmark (docs/performance.md, "Cross-host
/// delivery"): prints numbers, asserts nothing about time. A message from
/// agent-0 on host 0 to agent-1 on host 1 (registered there): rename on
/// host 0 → its file in agent-1's inbox on host 1, through replication over
/// a three-node loopback NATS cluster. Beside it, in the same run and
/// interleaved, the local path: a message written on host 0 to agent-0
/// (no presence record: delivered where it was written) → its file in
/// host 0's inbox. Run once, in release:
/// `cargo test --release -p squad-supervisor --test e2e cluster::cross_host_delivery_benchmark -- --ignored --nocapture`
/// (`SQUAD_BENCH_SAMPLES`, default 200).
#[test]
#[ignore]
fn cross_host_delivery_benchmark() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let samples: usize = std::env::var("SQUAD_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let (_tmp, roots, _a, _b) = two_replicas(&nats, true);
    let s0 = session_of(&roots[0]);
    let host1 = status(&roots[1]).1["host"].as_str().unwrap().to_string();
    let out = run(ctl(&roots[1])
        .args(["inbox", "list"])
        .env("SQUAD_AGENT", "agent-1"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    eventually("host 0 knows agent-1 is on host 1", || {
        (replication(&roots[0])["agents"]["agent-1"] == host1.as_str()).then_some(())
    });
    let (mut cross, mut local) = (Vec::new(), Vec::new());
    for i in 0..samples + 10 {
        let id = format!("msg_bx{i:05}");
        let at = write_timed_message(&s0, &roots[1], &id, "agent-0", "agent-1");
        let t = seen_after(&at, Instant::now());
        let id = format!("msg_bl{i:05}");
        let start = Instant::now();
        let at = write_timed_message(&s0, &roots[0], &id, "agent-1", "agent-0");
        let l = seen_after(&at, start);
        // The first ten warm up (buckets, connections, caches).
        if i >= 10 {
            cross.push(t);
            local.push(l);
        }
        // Stays (pacing): samples one after the other, not a burst.
        std::thread::sleep(Duration::from_millis(20));
    }
    cross.sort();
    local.sort();
    println!(
        "cross-host delivery ({samples} messages, 3-node loopback NATS): p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        percentile(&cross, 0.5),
        percentile(&cross, 0.99),
        percentile(&cross, 1.0)
    );
    println!(
        "local delivery, same run, interleaved:                 p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
        percentile(&local, 0.5),
        percentile(&local, 0.99),
        percentile(&local, 1.0)
    );
}

/// A cluster policy with a leader lease of `lease`.
pub(crate) fn leader_policy(nats: &str, lock_ttl: &str, lease: &str) -> String {
    format!(
        "cluster:\n  nats: {nats}\n  project: e2e\n  lock_ttl: {lock_ttl}\n  lease_ttl: {lease}\n  replicas: 3\n{NO_NOTICES}"
    )
}

/// The host index whose squadd says it leads, when exactly one of `live`
/// says so.
fn sole_leader(roots: &[PathBuf], live: &[usize]) -> Option<usize> {
    let leaders: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&h| status(&roots[h]).1["leader"]["this_host"] == true)
        .collect();
    (leaders.len() == 1).then(|| leaders[0])
}

/// One host's audit log (`.squad/audit.jsonl`), read from the file: it
/// outlives a squadd killed -9.
pub(crate) fn audit(root: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(root.join(".squad/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Whether a host's squadd wrote session-status.md itself (its audit log
/// says so): a follower's copy is the leader's, replicated, never written
/// by it.
fn wrote_status(root: &Path) -> bool {
    audit(root)
        .iter()
        .any(|e| e["kind"] == "output-written" && e["output"] == "session-status")
}

/// The leader history of every host, checked: elections come in rising
/// epochs, and every supervisor-owned write (session-status.md, the shared
/// context) of a host lies between its own election and the next election
/// of any host (or its own loss): never two writers at once. Returns the
/// elections as (time, host, epoch).
fn check_one_writer(roots: &[PathBuf]) -> Vec<(String, usize, u64)> {
    // (time, host, what, epoch)
    let mut all: Vec<(String, usize, String, u64)> = Vec::new();
    for (h, r) in roots.iter().enumerate() {
        for e in audit(r) {
            let at = e["at"].as_str().unwrap_or_default().to_string();
            let kind = e["kind"].as_str().unwrap_or_default();
            let epoch = e["epoch"].as_u64().unwrap_or(0);
            let what = match kind {
                "leader-elected" | "leader-lost" => kind.to_string(),
                "output-written"
                    if matches!(
                        e["output"].as_str(),
                        Some("session-status" | "shared-context")
                    ) =>
                {
                    format!("write {}", e["path"].as_str().unwrap_or_default())
                }
                _ => continue,
            };
            all.push((at, h, what, epoch));
        }
    }
    // RFC 3339 in UTC with a fixed format: text order is time order.
    all.sort();
    let mut leader: Option<(usize, u64)> = None;
    let mut elections = Vec::new();
    for (at, h, what, epoch) in &all {
        match what.as_str() {
            "leader-elected" => {
                if let Some((_, e)) = leader {
                    assert!(
                        *epoch > e,
                        "epoch {epoch} at {at} after epoch {e}: {all:#?}"
                    );
                }
                leader = Some((*h, *epoch));
                elections.push((at.clone(), *h, *epoch));
            }
            "leader-lost" => {
                if leader.is_some_and(|(l, _)| l == *h) {
                    leader = None;
                }
            }
            _ => assert!(
                leader.is_some_and(|(l, _)| l == *h),
                "host {h} wrote ({what}) at {at} while the leader was {leader:?}: {all:#?}"
            ),
        }
    }
    elections
}

#[test]
fn the_leader_killed_9_hands_the_outputs_to_one_other_host_within_two_leases() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    const LEASE: Duration = Duration::from_secs(4);
    let (_tmp, roots) = checkouts(3, 2, &leader_policy(&nats.urls_yaml(), "5s", "4s"));
    let mut daemons: Vec<Option<Daemon>> = roots
        .iter()
        .map(|r| Some(Daemon::start_with_env(r, QUIET_NATS)))
        .collect();
    for r in &roots {
        wait_connected(r);
    }
    let status_md = |h: usize| {
        roots[h]
            .join(".squad/sessions")
            .join(SESSION)
            .join("session-status.md")
    };
    let first = eventually("one leader", || sole_leader(&roots, &[0, 1, 2]));
    eventually("the leader writes session-status.md", || {
        wrote_status(&roots[first]).then_some(())
    });
    // Every host saw the session at its start-up scan: without the lease
    // each would have written its own session-status.md. The followers
    // have the leader's, replicated.
    let followers: Vec<usize> = (0..3).filter(|&h| h != first).collect();
    for &h in &followers {
        eventually("the leader's session-status.md replicated", || {
            status_md(h).is_file().then_some(())
        });
        assert!(
            !wrote_status(&roots[h]),
            "follower {h} wrote session-status.md"
        );
    }
    // Each host's heartbeat comes on its own schedule: all three are seen
    // within a beat.
    let v = eventually("three hosts seen", || {
        let (_, v) = status(&roots[followers[0]]);
        (v["hosts"].as_array().map(Vec::len) == Some(3)).then_some(v)
    });
    assert_eq!(v["leader"]["this_host"], false, "{v:#}");
    let epoch = v["leader"]["epoch"].as_u64().unwrap();
    let human = ctl_ok(&roots[first], &["cluster", "status"]);
    assert!(
        human.contains(&format!("(epoch {epoch}), this host")),
        "{human}"
    );
    let health = ctl_run(&roots[followers[0]], &["health"]);
    assert!(
        stdout(&health).contains(&format!("(epoch {epoch})")),
        "{}",
        stdout(&health)
    );
    let st = ctl_ok(&roots[followers[1]], &["status"]);
    assert!(st.contains("cluster: NATS connected; leader: "), "{st}");

    // Work goes on on every host while the leader dies: each host sees new
    // tasks and would re-render its status.
    let (stop, writer) = keep_planning(&roots);
    if let Some(d) = daemons[first].take() {
        d.kill9();
    }
    let killed = chrono::Utc::now();
    let second = eventually("another host leads", || sole_leader(&roots, &followers));
    eventually("the new leader writes session-status.md", || {
        wrote_status(&roots[second]).then_some(())
    });
    // Stays (the scenario): one more lease for a second writer to show, if there were one.
    std::thread::sleep(LEASE);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    let other = followers.iter().copied().find(|&h| h != second).unwrap();
    assert!(
        !wrote_status(&roots[other]),
        "host {other} wrote session-status.md but never led"
    );
    // The new leader's outputs replicate: the third host's copy converges
    // on the new leader's file.
    eventually(
        "the third host has the new leader's session-status.md",
        || {
            let (a, b) = (fs::read(status_md(second)), fs::read(status_md(other)));
            (a.is_ok() && a.ok() == b.ok()).then_some(())
        },
    );

    let elections = check_one_writer(&roots);
    let (at, h, new_epoch) = elections.last().cloned().unwrap();
    assert_eq!(h, second, "{elections:?}");
    assert!(new_epoch > epoch, "{elections:?}");
    let at: chrono::DateTime<chrono::Utc> = at.parse().unwrap();
    let took = (at - killed).to_std().unwrap_or_default();
    eprintln!("failover: host {second} elected {took:?} after the leader's kill -9");
    assert!(
        took <= 2 * LEASE,
        "host {second} took over {took:?} after the kill, more than two leases"
    );
}

/// Writes a new plan on every host every 100 ms until stopped: each host
/// then wants to re-render its session-status.md.
fn keep_planning(
    roots: &[PathBuf],
) -> (
    Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<()>,
) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let roots = roots.to_vec();
    let flag = stop.clone();
    let t = std::thread::spawn(move || {
        let mut n = 0;
        while !flag.load(std::sync::atomic::Ordering::SeqCst) {
            for r in &roots {
                let s = r.join(".squad/sessions").join(SESSION);
                write_plan(&s, &format!("task_p{n}"), "agent-0", "");
            }
            n += 1;
            // Stays (pacing): a planner writing steadily while the leader changes.
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (stop, t)
}

#[test]
fn a_frozen_leader_is_deposed_and_writes_nothing_when_it_wakes() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, daemons, first) = two_with_a_leader(&nats);
    let other = 1 - first;
    // The leader's squadd stalls (SIGSTOP: a long GC pause, a swapped-out
    // VM) past its lease; the other host takes over and writes. It is
    // stopped while idle: a write it had decided as leader and was still
    // carrying out (its fsync) when stopped would land when it wakes, which
    // no lease can fence on the local disk (receivers fence by epoch); what
    // is tested is that nothing it decides after waking is written. The
    // planning starts once it is stopped, so it wakes with events queued.
    eventually("the leader's outputs written", || {
        wrote_status(&roots[first]).then_some(())
    });
    crate::daemon::signal(daemons[first].pid(), "STOP");
    let (stop, planner) = keep_planning(&roots);
    eventually("the other host leads", || sole_leader(&roots, &[other]));
    eventually("the new leader writes", || {
        wrote_status(&roots[other]).then_some(())
    });
    // It wakes with file events queued and a lease it thinks it held: the
    // gate refuses every late write, and it learns it was deposed.
    crate::daemon::signal(daemons[first].pid(), "CONT");
    eventually("the woken host says it lost the lead", || {
        audit(&roots[first])
            .iter()
            .any(|e| e["kind"] == "leader-lost")
            .then_some(())
    });
    // Stays (the scenario): the planner keeps writing a moment after the lead changed hands.
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    planner.join().unwrap();
    let elections = check_one_writer(&roots);
    assert_eq!(elections.last().map(|e| e.1), Some(other), "{elections:?}");
    let (_, v) = status(&roots[first]);
    assert_eq!(v["leader"]["this_host"], false, "{v:#}");
    // Whatever the woken host still had queued to publish carried its old
    // epoch: the new leader's session-status.md is the file on both hosts,
    // counting every plan written.
    let status_of = |h: usize| fs::read(session_of(&roots[h]).join("session-status.md")).ok();
    let planned = fs::read_dir(session_of(&roots[other]))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("role-plan-")
        })
        .count() as u64;
    eventually("both hosts have the new leader's session-status.md", || {
        let (a, b) = (status_of(other), status_of(first));
        let total = crate::daemon::counters(&session_of(&roots[first])).map(|c| c.1);
        (a.is_some() && a == b && total == Some(planned)).then_some(())
    });
}

#[test]
fn a_frozen_nats_node_leaves_one_lock_holder_one_writer_and_converging_replicas() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    const PER_HOST: usize = 4;
    let (_tmp, roots) = checkouts(
        3,
        3 * PER_HOST,
        &leader_policy(&nats.urls_yaml(), "6s", "3s"),
    );
    let _daemons: Vec<Daemon> = roots
        .iter()
        .map(|r| Daemon::start_with_env(r, QUIET_NATS))
        .collect();
    for r in &roots {
        wait_connected(r);
    }
    eventually("one leader", || sole_leader(&roots, &[0, 1, 2]));
    let (stop, planner) = keep_planning(&roots);
    // Each agent takes and gives back the path three times; an attempt that
    // fails on NATS (exit 2: the frozen node does not answer) is retried.
    let history: Arc<Mutex<Vec<(Instant, Instant, usize)>>> = Arc::default();
    let threads: Vec<_> = (0..3 * PER_HOST)
        .map(|i| {
            let root = roots[i / PER_HOST].clone();
            let history = history.clone();
            std::thread::spawn(move || {
                let agent = format!("agent-{i}");
                let mut held = 0;
                let started = Instant::now();
                while held < 3 {
                    assert!(
                        started.elapsed() < Duration::from_secs(300),
                        "agent-{i} starved"
                    );
                    let out = acquire(&root, i, &["--wait", "30s"]);
                    if code(&out) != 0 {
                        // Poll interval: a refused acquire is tried again, until the deadline above.
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    }
                    let from = Instant::now();
                    // Stays (the scenario): the lock is held a moment, so overlapping holders would show in the history.
                    std::thread::sleep(Duration::from_millis(20));
                    let to = Instant::now();
                    history.lock().unwrap().push((from, to, i));
                    held += 1;
                    // A release that fails on NATS leaves the key to lapse
                    // at its TTL: never a second holder either way.
                    let _ = ctl_run(
                        &root,
                        &["lock", "release", "shared/x.rs", "--agent", &agent],
                    );
                }
            })
        })
        .collect();
    // Stays (the scenario): contention runs before the node freezes, and while it is frozen.
    std::thread::sleep(Duration::from_secs(2));
    nats.freeze_node(0);
    // Stays (the scenario): the node stays frozen past the locks' TTL.
    std::thread::sleep(Duration::from_secs(8));
    nats.thaw_node(0);
    for t in threads {
        t.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    planner.join().unwrap();
    let mut h = history.lock().unwrap().clone();
    h.sort();
    for w in h.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "agent-{} and agent-{} held shared/x.rs at once",
            w[0].2,
            w[1].2
        );
    }
    check_one_writer(&roots);
    // The frozen node catches up: every node ends with the same last
    // sequence of both project buckets.
    for stream in ["KV_squad-e2e-locks", "KV_squad-e2e-leader"] {
        eventually(&format!("{stream} converges on the three nodes"), || {
            let seqs: Vec<Option<u64>> = (0..3).map(|i| nats.last_seq(i, stream)).collect();
            (seqs[0].is_some() && seqs.iter().all(|s| *s == seqs[0])).then_some(())
        });
    }
}

/// An agent command that runs until the checkout it is given is gone (the
/// test's end), so no process outlives the test; in a temporary directory
/// held by the first value.
fn lingering_agent() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent.sh");
    fs::write(
        &agent,
        "#!/bin/sh\nwhile [ -d \"$1\" ]; do sleep 0.2; done\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    }
    (tmp, agent)
}

/// squadd on two checkouts as hosts `host-a` and `host-b` (SQUAD_HOST),
/// both connected to NATS.
fn start_named(roots: &[PathBuf]) -> Vec<Daemon> {
    let daemons: Vec<Daemon> = roots
        .iter()
        .zip(["host-a", "host-b"])
        .map(|(r, n)| {
            Daemon::start_with_env(
                r,
                &[("RUST_LOG", "debug,async_nats=info"), ("SQUAD_HOST", n)],
            )
        })
        .collect();
    for r in roots {
        wait_connected(r);
    }
    daemons
}

#[test]
fn runs_start_only_on_the_agents_host_or_the_leaders() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp_agent, agent) = lingering_agent();
    let policy = format!(
        "{}runners:\n  dispatch: true\n  grace: 1s\n  agents:\n    \"*\":\n      command: [\"{a}\", \"{{root}}\"]\n      max_retries: 0\n    agent-0:\n      command: [\"{a}\", \"{{root}}\"]\n      max_retries: 0\n      host: host-b\n",
        leader_policy(&nats.urls_yaml(), "5s", "3s"),
        a = agent.display()
    );
    let (_tmp, roots) = checkouts(2, 2, &policy);
    let _daemons = start_named(&roots);
    let leader = eventually("one leader", || sole_leader(&roots, &[0, 1]));
    let run = |h: usize, task: &str| {
        roots[h]
            .join(".squad/sessions")
            .join(SESSION)
            .join("runs")
            .join(task)
            .join("run.json")
    };
    // agent-0's runner names host-b; agent-1's names none: the leader's.
    eventually("host-b starts agent-0's run", || {
        run(1, "task_0").is_file().then_some(())
    });
    eventually("the leader starts agent-1's run", || {
        run(leader, "task_1").is_file().then_some(())
    });
    assert!(!run(0, "task_0").exists(), "host-a started agent-0's run");
    assert!(
        !run(1 - leader, "task_1").exists(),
        "a follower started agent-1's run"
    );
}

/// The runs `squadctl runs --all --json` lists on a host, as (task, state).
fn runs_of(root: &Path) -> Vec<(String, String)> {
    let v: serde_json::Value =
        serde_json::from_str(&ctl_ok(root, &["runs", "--all", "--json"])).unwrap_or_default();
    v.as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["task"].as_str().unwrap_or_default().to_string(),
                r["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Issue 30's scenario end to end: a plan written on host A shows in host
/// B's `status`; B's agent completes it; the dependent task becomes ready
/// and A's runner (the dependent's agent is A's) starts it. B never starts
/// it, and nothing starts it before the completion.
#[test]
fn a_completion_on_one_host_readies_a_task_the_other_hosts_runner_starts() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp_agent, agent) = lingering_agent();
    // Only the dependent's agent has a runner, on host-a; agent-b (host
    // B's) works by hand.
    let policy = format!(
        "{}runners:\n  dispatch: true\n  grace: 1s\n  agents:\n    agent-a:\n      command: [\"{a}\", \"{{root}}\"]\n      max_retries: 0\n      host: host-a\n",
        leader_policy(&nats.urls_yaml(), "5s", "3s"),
        a = agent.display()
    );
    // agent-0's task_0 (from the clone) has no runner: nobody starts it.
    let (_tmp, roots) = checkouts(2, 1, &policy);
    let _daemons = start_named(&roots);
    let (a, b) = (&roots[0], &roots[1]);
    // Host A: the plan for B's agent, and the dependent task of A's agent.
    let sa = session_of(a);
    fs::write(
        sa.join("role-plan-agent-b-task_1.md"),
        crate::daemon::plan("task_1", "agent-b", &[]),
    )
    .unwrap();
    fs::write(
        sa.join("role-plan-agent-a-task_2.md"),
        crate::daemon::plan("task_2", "agent-a", &["task_1"]),
    )
    .unwrap();
    // It shows in B's status.
    eventually("both plans in host B's status", || {
        let v = status_json(b);
        (v["roots"][0]["sessions"][0]["tasks_total"] == 3).then_some(())
    });
    let human = ctl_ok(b, &["status"]);
    assert!(human.contains(SESSION), "{human}");
    // Not ready yet: no host has started the dependent.
    for r in &roots {
        assert!(
            !runs_of(r).iter().any(|(t, _)| t == "task_2"),
            "task_2 started before task_1 completed: {:?}",
            runs_of(r)
        );
    }
    // B's agent completes task_1 on host B.
    fs::write(
        session_of(b).join("role-comm-agent-b-task_1.md"),
        crate::daemon::progress("task_1", "agent-b", "completed"),
    )
    .unwrap();
    // The completion replicates to A, task_2 becomes ready there, and A's
    // runner starts it.
    // Its state is read while the process starts: wait for `running`
    // (a run record seen an instant before its process is live reads
    // `gone`).
    crate::daemon::eventually_within(
        "host A's runner starts task_2",
        Duration::from_secs(60),
        || {
            runs_of(a)
                .iter()
                .any(|(t, s)| t == "task_2" && s == "running")
                .then_some(())
        },
    );
    assert!(
        audit(a)
            .iter()
            .any(|e| e["kind"] == "agent-spawned" && e.to_string().contains("task_2")),
        "no agent-spawned event for task_2 on host A"
    );
    // Only on the agent's host: B never starts it; and tasks without a
    // runner start nowhere.
    assert!(
        runs_of(b).is_empty(),
        "host B started runs: {:?}",
        runs_of(b)
    );
    assert_eq!(runs_of(a).len(), 1, "{:?}", runs_of(a));
}

/// The notice files to `agent` in a checkout's session.
fn notices_to(root: &Path, agent: &str) -> Vec<String> {
    let prefix = format!("role-comm-squadd-to-{agent}-");
    let mut names: Vec<String> = fs::read_dir(session_of(root))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix) && n.ends_with(".md"))
        .collect();
    names.sort();
    names
}

/// A notice the leader writes (a task became ready) replicates with its
/// epoch and is delivered once, on the host its recipient works on; not
/// on the leader's, which wrote it.
#[test]
fn a_leaders_notice_is_delivered_once_on_the_recipients_host() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    // Notices on (the default): no NO_NOTICES here.
    let policy = format!(
        "cluster:\n  nats: {}\n  project: e2e\n  lock_ttl: 5s\n  lease_ttl: 3s\n  replicas: 3\n",
        nats.urls_yaml()
    );
    let (_tmp, roots, _daemons, leader) = two_with_a_leader_on(&policy);
    let follower = 1 - leader;
    // agent-1 works on the follower.
    let host = status(&roots[follower]).1["host"]
        .as_str()
        .unwrap()
        .to_string();
    let out = run(ctl(&roots[follower])
        .args(["inbox", "list"])
        .env("SQUAD_AGENT", "agent-1"));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    eventually("the leader knows agent-1 is on the follower", || {
        (replication(&roots[leader])["agents"]["agent-1"] == host.as_str()).then_some(())
    });
    let before = notices_to(&roots[leader], "agent-1");
    // A new ready task for agent-1, planned on the leader's checkout.
    write_plan(&session_of(&roots[leader]), "task_7", "agent-1", "");
    let notice = eventually("the leader's task-ready notice to agent-1", || {
        notices_to(&roots[leader], "agent-1")
            .into_iter()
            .find(|n| !before.contains(n))
    });
    let id = notice
        .trim_start_matches("role-comm-squadd-to-agent-1-")
        .trim_end_matches(".md")
        .to_string();
    eventually("the notice replicated to the follower", || {
        notices_to(&roots[follower], "agent-1")
            .contains(&notice)
            .then_some(())
    });
    eventually("the notice in agent-1's inbox on the follower", || {
        (audited_message(&roots[follower], "message-delivered", &id) == 1).then_some(())
    });
    let delivered = |h: usize| {
        inbox_names(&roots[h], "agent-1")
            .iter()
            .filter(|n| n.ends_with(&format!("-{id}.md")))
            .count()
    };
    assert_eq!(delivered(follower), 1);
    // Not delivered where it was written: the leader's copy of agent-1's
    // inbox never gets it (the old code delivered it there, from memory).
    assert_eq!(delivered(leader), 0);
    assert_eq!(audited_message(&roots[leader], "message-delivered", &id), 0);
}

// ---------------------------------------------------------------------------
// Retention across hosts (docs/cluster.md, "Retention across hosts").
// ---------------------------------------------------------------------------

/// A session that ended long ago (past every archive age).
const OLD: &str = "20230101T000000Z-old";

/// Writes [`OLD`] into a checkout, built aside and renamed in whole (a
/// running squadd never sees it half-written).
fn old_session(root: &Path) {
    let staging = root.join(".squad/.staging-old");
    fs::create_dir_all(&staging).unwrap();
    fs::write(
        staging.join("session-status.md"),
        "session_id: sess_old\nstarted_at: 2023-01-01T00:00:00Z\nstatus: completed\ncompleted_at: 2023-01-02T00:00:00Z\n",
    )
    .unwrap();
    fs::rename(&staging, root.join(".squad/sessions").join(OLD)).unwrap();
}

/// Two checkouts (no squadd yet) with retention every second and [`OLD`]
/// in both.
fn with_old_session(nats: &NatsCluster) -> (tempfile::TempDir, Vec<PathBuf>) {
    let policy = format!(
        "{}retention:\n  schedule: '* * * * * *'\n",
        leader_policy(&nats.urls_yaml(), "5s", "3s")
    );
    let (tmp, roots) = checkouts(2, 2, &policy);
    for r in &roots {
        old_session(r);
    }
    (tmp, roots)
}

/// The session names `squadctl status --json` lists on a checkout.
fn listed_sessions(root: &Path) -> Vec<String> {
    status_json(root)["roots"][0]["sessions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_leaders_retention_archives_an_ended_session_on_every_host() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots) = with_old_session(&nats);
    let _daemons: Vec<Daemon> = roots
        .iter()
        .map(|r| Daemon::start_with_env(r, QUIET_NATS))
        .collect();
    for r in &roots {
        wait_connected(r);
        // Both squadds indexed it at start (READY comes after the scan):
        // listed, unless the leader's retention (every second) archived it
        // while the other checkout was still connecting (CI saw the second
        // checkout's listing wait for a session already gone).
        eventually("the old session listed or archived", || {
            (listed_sessions(r).iter().any(|s| s == OLD)
                || r.join(".squad/archives").join(OLD).is_dir())
            .then_some(())
        });
    }
    let leader = eventually("one leader", || sole_leader(&roots, &[0, 1]));
    let follower = 1 - leader;
    let leader_host = status(&roots[leader]).1["host"]
        .as_str()
        .unwrap()
        .to_string();
    // Archived on both checkouts: the leader by its retention, the
    // follower by the leader's removal record (the old code left the
    // follower's copy in sessions/ for ever).
    for r in [&roots[leader], &roots[follower]] {
        crate::daemon::eventually_within(
            "the old session archived",
            Duration::from_secs(90),
            || {
                (r.join(".squad/archives").join(OLD).is_dir()
                    && !r.join(".squad/sessions").join(OLD).exists())
                .then_some(())
            },
        );
    }
    // Archived on the follower by the same code retention uses: the status
    // stamped with archived_at, the event says by whom.
    let status_text = fs::read_to_string(
        roots[follower]
            .join(".squad/archives")
            .join(OLD)
            .join("session-status.md"),
    )
    .unwrap();
    assert!(status_text.contains("archived_at:"), "{status_text}");
    let ev = eventually("the follower's session-archived event", || {
        audit(&roots[follower])
            .into_iter()
            .find(|e| e["kind"] == "session-archived" && e["session"] == OLD)
    });
    assert_eq!(ev["by"], leader_host.as_str(), "{ev:#}");
    // The leader's own event has no `by`: its retention did it.
    let own = eventually("the leader's session-archived event", || {
        audit(&roots[leader])
            .into_iter()
            .find(|e| e["kind"] == "session-archived" && e["session"] == OLD)
    });
    assert!(own.get("by").is_none(), "{own:#}");
    // The follower's squadd no longer lists it; the live session stays.
    eventually("the follower's status without the old session", || {
        let names = listed_sessions(&roots[follower]);
        (!names.iter().any(|s| s == OLD) && names.iter().any(|s| s == SESSION)).then_some(())
    });
    assert!(session_of(&roots[follower]).is_dir());
    assert!(session_of(&roots[leader]).is_dir());
}

/// A NATS client of the test, as an adversary would be: one request on
/// the project's removal bucket (`squad-e2e-retired`) in its own runtime.
fn on_retired_bucket<T>(
    nats: &NatsCluster,
    f: impl AsyncFnOnce(async_nats::jetstream::kv::Store) -> T,
) -> Option<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = format!("nats://127.0.0.1:{}", nats.nodes[0].client_port);
    rt.block_on(async {
        let client = async_nats::connect(url).await.ok()?;
        let js = async_nats::jetstream::new(client);
        let store = js.get_key_value("squad-e2e-retired").await.ok()?;
        Some(f(store).await)
    })
}

#[test]
fn a_deposed_leaders_late_removal_is_refused_on_every_host() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _daemons, leader) = two_with_a_leader(&nats);
    let epoch = eventually("the leader's epoch", || {
        status(&roots[leader]).1["leader"]["epoch"].as_u64()
    });
    // The leader wrote its epoch marker on election.
    eventually("the leader's epoch marker", || {
        on_retired_bucket(&nats, async |s| {
            s.get(format!("epoch-{epoch}")).await.ok().flatten()
        })
        .flatten()
    });
    // A leader of a lower epoch (deposed, stalled while its removal was on
    // its way) lands a removal of the live session after that marker.
    assert!(epoch >= 1, "epochs are lease revisions, from 1");
    let late = serde_json::json!({
        "session": SESSION, "action": "archived", "epoch": epoch - 1,
        "leader": "ghost:/deposed", "at": "2030-01-01T00:00:00Z",
        "rule": "retention.archive_completed_after", "age_secs": 1,
        "since_source": "completed_at",
    });
    let key = format!(
        "t-{}",
        SESSION
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    on_retired_bucket(&nats, async |s| {
        s.put(key, late.to_string().into_bytes().into())
            .await
            .unwrap()
    })
    .expect("the removal bucket");
    // Refused on both hosts, said as replica-dropped; the session stays.
    for r in &roots {
        let ev = eventually("the late removal dropped", || {
            audit(r)
                .into_iter()
                .find(|e| e["kind"] == "replica-dropped" && e["session"] == SESSION)
        });
        assert_eq!(ev["origin"], "ghost:/deposed", "{ev:#}");
        assert_eq!(ev["file"], format!("removal of {SESSION}"), "{ev:#}");
        assert!(session_of(r).is_dir());
        assert!(!r.join(".squad/archives").join(SESSION).exists());
        assert!(listed_sessions(r).iter().any(|s| s == SESSION));
    }
}

#[test]
fn a_host_offline_during_the_leaders_retention_catches_up_on_return() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots) = with_old_session(&nats);
    // Host 1's squadd is down while host 0 leads and archives.
    let _a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    wait_connected(&roots[0]);
    eventually("host 0 leads", || sole_leader(&roots, &[0]));
    let leader_host = status(&roots[0]).1["host"].as_str().unwrap().to_string();
    crate::daemon::eventually_within("archived on the leader", Duration::from_secs(90), || {
        roots[0]
            .join(".squad/archives")
            .join(OLD)
            .is_dir()
            .then_some(())
    });
    assert!(roots[1].join(".squad/sessions").join(OLD).is_dir());
    // Back: the record was in the bucket; host 1 applies it.
    let _b = Daemon::start_with_env(&roots[1], QUIET_NATS);
    crate::daemon::eventually_within(
        "archived on the host that was away",
        Duration::from_secs(90),
        || {
            (roots[1].join(".squad/archives").join(OLD).is_dir()
                && !roots[1].join(".squad/sessions").join(OLD).exists())
            .then_some(())
        },
    );
    let ev = eventually("its session-archived event", || {
        audit(&roots[1])
            .into_iter()
            .find(|e| e["kind"] == "session-archived" && e["session"] == OLD)
    });
    assert_eq!(ev["by"], leader_host.as_str(), "{ev:#}");
    assert_eq!(sole_leader(&roots, &[0, 1]), Some(0));
}

// ---------------------------------------------------------------------------
// The leader's shared context on every checkout (docs/cluster.md,
// "Replication of the shared context").
// ---------------------------------------------------------------------------

/// A checkout's `.claude/context/shared-context.json`, when there is one.
fn context_bytes(root: &Path) -> Option<Vec<u8>> {
    fs::read(root.join(".claude/context/shared-context.json")).ok()
}

/// Whether a host's squadd wrote the shared context itself (its audit log
/// says so): a follower's copy is the leader's, replicated.
fn wrote_context(root: &Path) -> bool {
    audit(root)
        .iter()
        .any(|e| e["kind"] == "output-written" && e["output"] == "shared-context")
}

/// Waits until the follower's shared context is byte-equal to the
/// leader's and `done` holds of it; returns it.
fn same_context(
    roots: &[PathBuf],
    leader: usize,
    what: &str,
    done: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    crate::daemon::eventually_within(what, Duration::from_secs(60), || {
        let l = context_bytes(&roots[leader])?;
        (done(&l) && context_bytes(&roots[1 - leader]).as_ref() == Some(&l)).then_some(l)
    })
}

#[test]
fn the_leaders_shared_context_reaches_the_host_a_plan_was_written_on() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _daemons, leader) = two_with_a_leader(&nats);
    let follower = 1 - leader;
    // A plan written on the follower: replicated to the leader, whose
    // shared context then lists it; the context comes back byte-equal (the
    // old code left the follower with no shared-context.json at all).
    write_plan(&session_of(&roots[follower]), "task_9", "agent-9", "");
    let text = same_context(
        &roots,
        leader,
        "the follower's shared context equals the leader's, with task_9",
        |c| String::from_utf8_lossy(c).contains("\"task_9\""),
    );
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(v["schema_version"], "2.0.0", "{v:#}");
    // One writer: the leader wrote it, the follower only received it.
    assert!(wrote_context(&roots[leader]));
    assert!(!wrote_context(&roots[follower]));
    let dropped: Vec<serde_json::Value> = audit(&roots[follower])
        .into_iter()
        .filter(|e| e["kind"] == "replica-dropped")
        .collect();
    assert!(dropped.is_empty(), "{dropped:#?}");
}

/// A progress update of `task` by `agent` with one decision of `size`
/// bytes (a protocol file stays under its 1 MB limit; the context sums
/// them).
fn big_progress(task: &str, agent: &str, size: usize) -> String {
    let words = "the shared context outgrows one NATS message ";
    let description: String = words.repeat(size / words.len() + 1)[..size].to_string();
    format!(
        "meta:\n  task_id: {task}\n  agent: {agent}\n  updated_at: 2024-01-15T11:00:00Z\nstatus: in_progress\ndecisions:\n  - type: design\n    description: {description}\n"
    )
}

#[test]
fn a_shared_context_larger_than_a_nats_message_replicates_and_is_caught_up_at_start() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, mut daemons, leader) = two_with_a_leader(&nats);
    let follower = 1 - leader;
    // Three decisions of 900 kB: a context of 2.7 MB, more than the server's
    // max_payload (1 MB) and than any KV value.
    let s = session_of(&roots[leader]);
    write_plan(&s, "task_5", "agent-5", "");
    let written = Instant::now();
    for (task, agent) in [
        ("task_0", "agent-0"),
        ("task_1", "agent-1"),
        ("task_5", "agent-5"),
    ] {
        fs::write(
            s.join(format!("role-comm-{agent}-{task}.md")),
            big_progress(task, agent, 900_000),
        )
        .unwrap();
    }
    let text = same_context(
        &roots,
        leader,
        "the follower's 2.5 MB shared context equals the leader's",
        |c| c.len() > 2_500_000,
    );
    eprintln!(
        "shared context of {} bytes on the follower {:.2} s after the progress updates were written (debug build)",
        text.len(),
        written.elapsed().as_secs_f64()
    );
    assert!(!wrote_context(&roots[follower]));
    // Catch-up: the follower's squadd killed; the leader's context changes
    // meanwhile; the follower's squadd, started again, fetches it.
    daemons.swap_remove(follower).kill9();
    write_plan(&s, "task_6", "agent-6", "");
    crate::daemon::eventually_within(
        "the leader's context lists task_6",
        Duration::from_secs(60),
        || {
            context_bytes(&roots[leader])
                .filter(|c| String::from_utf8_lossy(c).contains("\"task_6\""))
        },
    );
    assert_ne!(
        context_bytes(&roots[follower]),
        context_bytes(&roots[leader])
    );
    daemons.push(Daemon::start_with_env(&roots[follower], QUIET_NATS));
    same_context(
        &roots,
        leader,
        "the restarted follower caught up with the leader's context",
        |c| String::from_utf8_lossy(c).contains("\"task_6\""),
    );
    assert!(!wrote_context(&roots[follower]));
}

#[test]
fn after_a_failover_the_old_leaders_checkout_takes_the_new_leaders_context() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, mut daemons, first) = two_with_a_leader(&nats);
    let second = 1 - first;
    write_plan(&session_of(&roots[first]), "task_7", "agent-7", "");
    same_context(&roots, first, "the first leader's context on both", |c| {
        String::from_utf8_lossy(c).contains("\"task_7\"")
    });
    // The leader killed -9; the other host is elected with a higher epoch
    // and its context changes (a plan written there).
    daemons.swap_remove(first).kill9();
    eventually("the other host leads", || {
        (status(&roots[second]).1["leader"]["this_host"] == true).then_some(())
    });
    write_plan(&session_of(&roots[second]), "task_8", "agent-8", "");
    let new = crate::daemon::eventually_within(
        "the new leader's context lists task_8",
        Duration::from_secs(60),
        || {
            context_bytes(&roots[second])
                .filter(|c| String::from_utf8_lossy(c).contains("\"task_8\""))
        },
    );
    // The old leader's checkout still has its own, older file.
    assert_ne!(context_bytes(&roots[first]), Some(new));
    // Started again, it is a follower: the new leader's version (a higher
    // epoch than the one it put itself) is taken over its own file.
    daemons.push(Daemon::start_with_env(&roots[first], QUIET_NATS));
    same_context(
        &roots,
        second,
        "the old leader's checkout has the new leader's context",
        |c| String::from_utf8_lossy(c).contains("\"task_8\""),
    );
    assert_eq!(status(&roots[first]).1["leader"]["this_host"], false);
    // Every context write of either host lay inside its own leadership.
    check_one_writer(&roots);
    let dropped: Vec<serde_json::Value> = audit(&roots[first])
        .into_iter()
        .filter(|e| e["kind"] == "replica-dropped")
        .collect();
    assert!(dropped.is_empty(), "{dropped:#?}");
}

/// The project's context store, reached straight through NATS (as another
/// host or a tool with the project's credentials could), with the runtime
/// its calls are made on.
fn context_store(
    nats: &NatsCluster,
) -> (
    tokio::runtime::Runtime,
    async_nats::jetstream::object_store::ObjectStore,
) {
    let url = format!("nats://127.0.0.1:{}", nats.nodes[0].client_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.get_object_store("squad-e2e-context").await.unwrap()
    });
    (rt, store)
}

/// Puts `bytes` as object `shared-context.json` with `metadata`.
fn put_context_object(nats: &NatsCluster, metadata: &[(&str, &str)], bytes: &[u8]) {
    let (rt, store) = context_store(nats);
    let meta = async_nats::jetstream::object_store::ObjectMetadata {
        name: "shared-context.json".into(),
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    rt.block_on(store.put(meta, &mut &bytes[..])).unwrap();
}

/// The metadata of the context store's latest object.
fn context_object_metadata(nats: &NatsCluster) -> std::collections::HashMap<String, String> {
    let (rt, store) = context_store(nats);
    rt.block_on(store.info("shared-context.json"))
        .unwrap()
        .metadata
}

#[test]
fn a_late_lower_epoch_or_a_foreign_context_is_dropped_and_the_leaders_put_back() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _daemons, leader) = two_with_a_leader(&nats);
    let follower = 1 - leader;
    write_plan(&session_of(&roots[leader]), "task_7", "agent-7", "");
    let ours = same_context(&roots, leader, "the leader's context on both", |c| {
        String::from_utf8_lossy(c).contains("\"task_7\"")
    });
    let (_, v) = status(&roots[leader]);
    let epoch = v["leader"]["epoch"].as_u64().unwrap();
    let leader_host = v["host"].as_str().unwrap().to_string();
    // A deposed leader's late put (a lower epoch) lands after the
    // leader's, then a version with no epoch, then one that is no JSON
    // object: the follower writes none of them.
    let lower = (epoch - 1).to_string();
    let late = b"{\"schema_version\": \"2.0.0\", \"late\": true}\n";
    put_context_object(
        &nats,
        &[("epoch", lower.as_str()), ("origin", "deposed:/x")],
        late,
    );
    put_context_object(&nats, &[("origin", "tool:/x")], late);
    let higher = (epoch + 1).to_string();
    put_context_object(
        &nats,
        &[("epoch", higher.as_str()), ("origin", "tool:/x")],
        b"not json",
    );
    let dropped = eventually("three replica-dropped events on the follower", || {
        let d: Vec<serde_json::Value> = audit(&roots[follower])
            .into_iter()
            .filter(|e| {
                e["kind"] == "replica-dropped" && e["file"] == ".claude/context/shared-context.json"
            })
            .collect();
        (d.len() >= 3).then_some(d)
    });
    let reasons: Vec<&str> = dropped
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or_default())
        .collect();
    assert!(
        reasons[0].contains(&format!("epoch {lower} is lower than {epoch}")),
        "{dropped:#?}"
    );
    assert!(reasons[1].contains("no leader's epoch"), "{dropped:#?}");
    assert!(reasons[2].contains("not a JSON object"), "{dropped:#?}");
    assert_eq!(context_bytes(&roots[follower]), Some(ours.clone()));
    assert_eq!(context_bytes(&roots[leader]), Some(ours.clone()));
    // The leader saw its version covered by a lower epoch's and put its own
    // back: a follower starting afresh takes the leader's, not the late one.
    eventually("the leader's version is the store's latest again", || {
        let m = context_object_metadata(&nats);
        (m.get("origin") == Some(&leader_host) && m.get("epoch") == Some(&epoch.to_string()))
            .then_some(())
    });
    assert_eq!(context_bytes(&roots[follower]), Some(ours));
}

// ---------------------------------------------------------------------------
// Session edits on a follower (docs/cluster.md, "Session edits on a
// follower"): forwarded to the leader over NATS, applied there, replicated.
// ---------------------------------------------------------------------------

pub(crate) fn status_md(root: &Path) -> PathBuf {
    session_of(root).join("session-status.md")
}

/// Two hosts with a leader whose session-status.md has reached the
/// follower: (the checkouts, the daemons, the leader's index).
pub(crate) fn two_with_a_replicated_status(
    policy: &str,
) -> (tempfile::TempDir, Vec<PathBuf>, Vec<Daemon>, usize) {
    let (tmp, roots, daemons, leader) = two_with_a_leader_on(policy);
    let follower = 1 - leader;
    eventually("the leader's session-status.md on the follower", || {
        let theirs = fs::read(status_md(&roots[leader])).ok()?;
        (fs::read(status_md(&roots[follower])).ok()? == theirs).then_some(())
    });
    (tmp, roots, daemons, leader)
}

/// The follower's and the leader's session-status.md end byte-equal.
pub(crate) fn converged(roots: &[PathBuf], leader: usize) -> String {
    eventually("the follower's session-status.md is the leader's", || {
        let theirs = fs::read_to_string(status_md(&roots[leader])).ok()?;
        (fs::read_to_string(status_md(&roots[1 - leader])).ok()? == theirs).then_some(theirs)
    })
}

#[test]
fn a_followers_session_edit_is_applied_by_the_leader_and_converges() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let policy = leader_policy(&nats.urls_yaml(), "5s", "3s");
    let (_tmp, roots, _daemons, leader) = two_with_a_replicated_status(&policy);
    let follower = 1 - leader;
    let leader_host = status(&roots[leader]).1["host"]
        .as_str()
        .unwrap()
        .to_string();
    // `session phase` on the follower's checkout: the leader applied it
    // (its file says so at once) and answered with its host and epoch.
    let out = ctl_run(
        &roots[follower],
        &["session", "phase", SESSION, "design", "--json"],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["phase"], "design", "{v:#}");
    assert_eq!(v["changed"], true, "{v:#}");
    assert_eq!(v["host"], leader_host.as_str(), "{v:#}");
    assert!(v["epoch"].as_u64().is_some_and(|e| e > 0), "{v:#}");
    let on_leader = fs::read_to_string(status_md(&roots[leader])).unwrap();
    assert!(on_leader.contains("phase: design"), "{on_leader}");
    let text = converged(&roots, leader);
    assert!(text.contains("phase: design"), "{text}");
    // A gate, in human output: it names the leader that applied it.
    let out = ctl_run(
        &roots[follower],
        &["session", "gate", SESSION, "design", "passed"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!(
            "gate design passed (applied by the leader {leader_host}, epoch "
        )),
        "{}",
        stdout(&out)
    );
    // An edit made on the leader's own checkout is applied there and
    // published like its status writes: the follower converges on it (the
    // old code published it only with the leader's next status render).
    let out = ctl_run(
        &roots[leader],
        &[
            "session",
            "gate",
            SESSION,
            "requirements",
            "passed",
            "--json",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["host"], serde_json::Value::Null, "applied here: {v:#}");
    let text = eventually("the leader's own edit on the follower", || {
        let t = converged(&roots, leader);
        t.contains("requirements: passed").then_some(t)
    });
    assert!(text.contains("design: passed"), "{text}");
    // `session complete` too; the follower's copy converges on it.
    let out = ctl_run(
        &roots[follower],
        &["session", "complete", SESSION, "--json"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["status"], "completed", "{v:#}");
    let on_leader = fs::read_to_string(status_md(&roots[leader])).unwrap();
    assert!(on_leader.contains("status: completed"), "{on_leader}");
    let text = eventually("the completion on the follower", || {
        let t = converged(&roots, leader);
        t.contains("status: completed").then_some(t)
    });
    assert!(text.contains("design: passed"), "{text}");
    // One writer: the follower never wrote the file; nothing conflicted.
    assert!(!wrote_status(&roots[follower]));
    for r in &roots {
        assert!(!session_of(r).join("conflicts").exists());
        let rep = replication(r);
        assert_eq!(rep["conflicts_total"], 0, "{rep:#}");
    }
}

#[test]
fn a_followers_edit_the_leader_refuses_fails_with_the_leaders_words() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let policy = leader_policy(&nats.urls_yaml(), "5s", "3s");
    let (_tmp, roots, _daemons, leader) = two_with_a_replicated_status(&policy);
    let follower = 1 - leader;
    // A session only the follower's checkout has (its session-status.md is
    // supervisor-owned: never published by a follower): the leader does
    // not know it.
    let only_here = roots[follower].join(".squad/sessions/20240116T100000Z-only-here");
    fs::create_dir_all(&only_here).unwrap();
    let text = "session_id: only_here\nstarted_at: 2024-01-16T10:00:00Z\nstatus: active\nphase: requirements\n";
    fs::write(only_here.join("session-status.md"), text).unwrap();
    eventually("the follower's squadd knows the session", || {
        let v = status_json(&roots[follower]);
        v["roots"][0]["sessions"]
            .as_array()?
            .iter()
            .any(|s| s["name"] == "20240116T100000Z-only-here")
            .then_some(())
    });
    let out = ctl_run(
        &roots[follower],
        &["session", "phase", "20240116T100000Z-only-here", "design"],
    );
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains(
            "did not apply the edit: no session `20240116T100000Z-only-here` is known to squadd"
        ),
        "{}",
        stderr(&out)
    );
    // Nothing applied on the follower.
    assert_eq!(
        fs::read_to_string(only_here.join("session-status.md")).unwrap(),
        text
    );
    // A rule of the leader's: completing a failed session needs --force.
    let out = ctl_run(
        &roots[follower],
        &["session", "fail", SESSION, "--reason", "index down"],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let before = converged(&roots, leader);
    assert!(before.contains("status: failed"), "{before}");
    let out = ctl_run(&roots[follower], &["session", "complete", SESSION]);
    assert_eq!(code(&out), 1, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("pass --force to complete it anyway (refused by the leader, "),
        "{}",
        stderr(&out)
    );
    // Failing again for the same reason (a retried forward) keeps the time.
    let out = ctl_run(
        &roots[follower],
        &[
            "session",
            "fail",
            SESSION,
            "--reason",
            "index down",
            "--json",
        ],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["changed"], false, "{v:#}");
    assert_eq!(
        fs::read_to_string(status_md(&roots[leader])).unwrap(),
        before
    );
    assert_eq!(
        fs::read_to_string(status_md(&roots[follower])).unwrap(),
        before
    );
}

#[test]
fn a_followers_edit_without_a_leader_is_refused_and_applied_nowhere() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    // A long lease: the follower cannot be elected while it looks for a
    // leader (at most 8 s), so the leader's death leaves none.
    let policy = leader_policy(&nats.urls_yaml(), "5s", "30s");
    let (_tmp, roots, mut daemons, leader) = two_with_a_replicated_status(&policy);
    let follower = 1 - leader;
    let before = fs::read(status_md(&roots[follower])).unwrap();
    daemons.remove(leader).kill9();
    let out = ctl_run(&roots[follower], &["session", "phase", SESSION, "design"]);
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("no leader: the edit was not applied"), "{err}");
    assert!(err.contains("squadctl cluster status"), "{err}");
    assert_eq!(fs::read(status_md(&roots[follower])).unwrap(), before);
    assert!(!wrote_status(&roots[follower]));
    // The follower's squadd still answers, and still leads nothing.
    assert_eq!(status(&roots[follower]).1["leader"]["this_host"], false);
}

/// A NATS client with the project's credentials may not make a host skip
/// the cluster's locks: a value that is no lock record, put into the
/// locks bucket, is a lock held by an unknown holder on its key's target,
/// so a write there is refused, naming it, and every other lock is still
/// seen. Before issue 39 one such value made the guard skip all cluster
/// locks ("cluster locks not checked") and allow the write.
#[test]
fn garbage_in_the_locks_bucket_is_a_lock_held_by_someone_unknown() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, _a, _b) = two_hosts_with_a_lock(&nats, "1h");
    let url = format!("nats://127.0.0.1:{}", nats.nodes[0].client_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let key: String = "t-"
        .chars()
        .chain(
            "shared/y.rs"
                .bytes()
                .flat_map(|b| format!("{b:02x}").chars().collect::<Vec<_>>()),
        )
        .collect();
    rt.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let store = js.get_key_value("squad-e2e-locks").await.unwrap();
        store.put(&key, "not a lock record".into()).await.unwrap();
    });
    let out = guard_write(&roots[1], 1, "shared/y.rs");
    assert!(
        stdout(&out).contains("deny") && stdout(&out).contains("unreadable lock value"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // The readable lock is still seen.
    let out = guard_write(&roots[1], 1, "shared/x.rs");
    assert!(
        stdout(&out).contains("agent-0 (on host"),
        "{}",
        stdout(&out)
    );
    // And taking it is refused, naming the unknown holder.
    let out = ctl_run(
        &roots[1],
        &[
            "lock",
            "acquire",
            "shared/y.rs",
            "--agent",
            "agent-1",
            "--task",
            "task_1",
        ],
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("unknown"), "{}", stderr(&out));
}

/// Writes `text` into `path` as an agent does (temporary, then rename).
fn write_renamed(path: &Path, text: &str) {
    let tmp = path.with_extension("partial");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// Issue 46 item 3: a newer local edit never loses to this host's own
/// older version. Each trial: host 0 writes version 1 of a progress file,
/// its squadd publishes it (host 1 has it) and is killed -9 at once, its
/// state file as it was before that publish (the save a kill within
/// 250 ms loses); the agent writes version 2 while squadd is down; squadd
/// starts again and its publish meets its own version 1. Version 2 must be
/// the file on both hosts, with nothing kept in `conflicts/`. Before the
/// fix the refused publish kept version 2 as a conflict and wrote
/// version 1 back on both hosts.
#[test]
fn a_kill_9_right_after_a_publish_keeps_the_newer_edit_on_both_hosts() {
    const TRIALS: usize = 20;
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots, a, _b) = two_replicas(&nats, true);
    let (s0, s1) = (session_of(&roots[0]), session_of(&roots[1]));
    let file = "role-comm-agent-0-task_0.md";
    let state = roots[0].join(".squad/run/cluster-files.json");
    let version = |t: usize, v: usize| {
        crate::daemon::progress("task_0", "agent-0", "in_progress")
            .replace("decided", &format!("decided in trial {t}, version {v}"))
    };
    let read = |p: &Path| fs::read_to_string(p.join(file)).unwrap_or_default();
    let mut a = Some(a);
    for t in 0..TRIALS {
        let before = fs::read(&state).ok();
        let v1 = version(t, 1);
        write_renamed(&s0.join(file), &v1);
        eventually("host 1 has version 1", || (read(&s1) == v1).then_some(()));
        if let Some(d) = a.take() {
            d.kill9();
        }
        match &before {
            Some(b) => fs::write(&state, b).unwrap(),
            None => {
                let _ = fs::remove_file(&state);
            }
        }
        let v2 = version(t, 2);
        write_renamed(&s0.join(file), &v2);
        a = Some(Daemon::start_with_env(&roots[0], QUIET_NATS));
        eventually(&format!("trial {t}: host 1 has version 2"), || {
            (read(&s1) == v2).then_some(())
        });
        assert_eq!(read(&s0), v2, "trial {t}: host 0's file went back");
        for r in &roots {
            assert!(
                !session_of(r).join("conflicts").exists(),
                "trial {t}: a conflict kept on {}",
                r.display()
            );
        }
        let rep = replication(&roots[0]);
        assert_eq!(rep["conflicts_total"], 0, "trial {t}: {rep:#}");
    }
    assert_eq!(replication(&roots[1])["conflicts_total"], 0);
}

/// Issue 46 item 1, fencing that reaches the agent: the holder's squadd
/// is stopped (SIGSTOP) beyond the lock's TTL, another host takes the lock;
/// once the holder's squadd runs again, the holder's `lock renew` fails
/// naming the new holder (it said "renewed" before), and `lock verify` with
/// the old token says stale while the new holder's token is current.
#[test]
fn a_lapsed_cluster_lock_fails_its_renewal_and_its_token_turns_stale() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let (_tmp, roots) = checkouts(2, 2, &cluster_policy(&nats.urls_yaml(), "3s"));
    let a = Daemon::start_with_env(&roots[0], QUIET_NATS);
    let _b = Daemon::start_with_env(&roots[1], QUIET_NATS);
    wait_connected(&roots[0]);
    wait_connected(&roots[1]);
    // The first lock creates the bucket: a cluster just formed may not
    // place it yet ("no suitable peers for placement", exit 2); asked
    // again until it does.
    let out = eventually("the first cluster lock", || {
        let out = acquire(&roots[0], 0, &["--ttl", "1h", "--json"]);
        (code(&out) != 2).then_some(out)
    });
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let old = v["tokens"]["shared/x.rs"].as_u64().expect("a token");
    // Just taken: the holder may write there.
    let out = guard_write(&roots[0], 0, "shared/x.rs");
    assert_eq!(
        (code(&out), stdout(&out).trim()),
        (0, ""),
        "{}",
        stderr(&out)
    );
    let verify = |h: usize, token: u64| {
        ctl_run(
            &roots[h],
            &[
                "lock",
                "verify",
                "shared/x.rs",
                "--token",
                &token.to_string(),
            ],
        )
    };
    // Current on both hosts, and renewable while held.
    for h in [0, 1] {
        let out = verify(h, old);
        assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).starts_with("current: "), "{}", stdout(&out));
    }
    let renew = || {
        ctl_run(
            &roots[0],
            &["lock", "renew", "shared/x.rs", "--agent", "agent-0"],
        )
    };
    let out = renew();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The holder's squadd stops renewing; host 1 gets the lock once its
    // TTL ran out.
    crate::daemon::signal(a.pid(), "STOP");
    let out = acquire(&roots[1], 1, &["--wait", "2m"]);
    // By its own host's clock the holder's lock may have lapsed (no
    // renewal noted within the TTL minus a fifth): the guard refuses the
    // holder's write while its squadd is still stopped.
    let fenced = guard_write(&roots[0], 0, "shared/x.rs");
    crate::daemon::signal(a.pid(), "CONT");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&fenced).contains("deny") && stdout(&fenced).contains("may have lapsed"),
        "{}{}",
        stdout(&fenced),
        stderr(&fenced)
    );
    let new: u64 = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("fencing token "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no token printed: {}", stdout(&out)));
    assert!(new > old, "{new} after {old}");
    // The former holder is told at its next renewal, whoever asks first
    // (its squadd's own renewal may not have run yet).
    let out = renew();
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("lapsed and is now held by agent-1"),
        "{}",
        stderr(&out)
    );
    assert!(!stdout(&out).contains("renewed"), "{}", stdout(&out));
    let out = verify(0, old);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).starts_with("stale: "), "{}", stdout(&out));
    assert!(stdout(&out).contains("agent-1"), "{}", stdout(&out));
    let out = ctl_run(
        &roots[0],
        &[
            "lock",
            "verify",
            "shared/x.rs",
            "--token",
            &old.to_string(),
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["current"], false, "{v:#}");
    assert_eq!(v["current_token"], new, "{v:#}");
    let out = verify(1, new);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}
