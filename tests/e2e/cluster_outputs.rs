//! The leader's outputs across hosts (issue 39 item 5): a supervisor output
//! in the files bucket is taken only from the lease's holder with the
//! lease's epoch; anything else is refused, reported, and fences nothing.

use crate::cluster::{
    NatsCluster, audit, converged, leader_policy, replication, session_of, status, status_md,
    two_with_a_replicated_status,
};
use crate::daemon::eventually;
use crate::support::*;
use std::fs;

/// `key_of`: the KV key of `session/file`.
fn file_key(session: &str, file: &str) -> String {
    let mut key = String::from("t-");
    for b in format!("{session}/{file}").bytes() {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

/// A NATS client with the project's credentials forges the session's
/// `session-status.md` three times: as a host that is not the leader with
/// the lease's own epoch, with epoch 2^63 (which, taken, fenced every real
/// leader's output for good), and last with the lease's epoch plus one (an
/// election nobody held: the leader, whose lease is valid, refuses it at
/// once; the follower holds it, then refuses it). Neither is written on any host; both are
/// reported (`replica-dropped` naming why, `cluster status`'s
/// `refused_outputs`); and the leader's next output still reaches the
/// follower. Before issue 39 the follower wrote the forged files and then
/// dropped every later status of the leader as a lower epoch.
#[test]
fn a_forged_leaders_output_is_refused_reported_and_fences_nothing() {
    let Some(nats) = NatsCluster::start() else {
        return;
    };
    let policy = leader_policy(&nats.urls_yaml(), "5s", "3s");
    let (_tmp, roots, _daemons, leader) = two_with_a_replicated_status(&policy);
    let follower = 1 - leader;
    let (_, v) = status(&roots[leader]);
    let epoch = v["leader"]["epoch"].as_u64().unwrap();
    let session = session_of(&roots[leader])
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let key = file_key(&session, "session-status.md");
    let url = format!("nats://127.0.0.1:{}", nats.nodes[0].client_port);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = rt.block_on(async {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        js.get_key_value("squad-e2e-files").await.unwrap()
    });
    // One forgery at a time, each seen refused on both hosts before the
    // next: a value overwritten before a host's watch reads it is never
    // seen there (the bucket keeps one value a key), so three puts in a
    // row on a loaded machine could reach a host as one.
    for (origin, e, said) in [
        ("forger-host", epoch, "published by forger-host"),
        ("jammer-host", 1u64 << 63, "beyond any lease"),
        ("bumped-host", epoch + 1, "bumped-host"),
    ] {
        let meta = serde_json::json!({
            "origin": origin, "session": session, "file": "session-status.md", "epoch": e,
        });
        let value = format!("{meta}\nforged by {origin}\n");
        rt.block_on(store.put(&key, value.into())).unwrap();
        for root in &roots {
            eventually(&format!("{origin}'s forgery reported"), || {
                audit(root)
                    .into_iter()
                    .any(|e| {
                        e["kind"] == "replica-dropped"
                            && e["file"] == "session-status.md"
                            && e["reason"].as_str().is_some_and(|r| {
                                r.contains(said)
                                    || (origin == "bumped-host"
                                        && r.contains("no election gave it"))
                            })
                    })
                    .then_some(())
            });
        }
    }
    for (host, root) in roots.iter().enumerate() {
        let dropped = eventually("both forgeries reported", || {
            let reasons: Vec<String> = audit(root)
                .into_iter()
                .filter(|e| e["kind"] == "replica-dropped" && e["file"] == "session-status.md")
                .filter_map(|e| e["reason"].as_str().map(str::to_string))
                .collect();
            let named = reasons
                .iter()
                .any(|r| r.contains("published by forger-host"))
                && reasons.iter().any(|r| r.contains("beyond any lease"))
                && reasons
                    .iter()
                    .any(|r| r.contains("no election gave it") || r.contains("bumped-host"));
            named.then_some(reasons)
        });
        assert!(
            dropped.iter().all(|r| r.contains("not the leader's")),
            "host {host}: {dropped:?}"
        );
        let status = fs::read_to_string(status_md(root)).unwrap();
        assert!(!status.contains("forged"), "host {host} wrote it: {status}");
    }
    let r = replication(&roots[follower]);
    assert!(r["refused_outputs"].as_u64().unwrap() >= 3, "{r:#}");
    assert!(r["last_refused"]["reason"].as_str().is_some(), "{r:#}");
    // And `health` says so, as a warning naming the last one.
    let out = ctl_run(&roots[follower], &["health", "--json"]);
    let h: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let refused = h["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "replica-refused")
        .unwrap_or_else(|| panic!("no replica-refused check: {h:#}"));
    assert_eq!(refused["verdict"], "warn", "{refused}");
    assert!(
        refused["value"]
            .as_str()
            .unwrap()
            .contains("not the leader's"),
        "{refused}"
    );
    // The leader's next output reaches the follower: 2^63 fenced nothing.
    write_plan(&session_of(&roots[leader]), "task_9", "agent-9", "");
    eventually(
        "the follower's session-status.md counts the new plan",
        || crate::daemon::counters(&session_of(&roots[follower])).filter(|c| c.1 == 3),
    );
    converged(&roots, leader);
}
