//! Tests of [`super`].

use super::*;
use squad_protocol::FileKind;
use squad_protocol::tree::SQUAD_DIR;

#[test]
fn paths_are_classified_by_their_place() {
    let root = Path::new("/p");
    let sessions = Path::new("/p/.squad/sessions");
    let c = |p: &str| classify(root, sessions, Path::new(p));
    assert_eq!(c("/p/.squad/policies.yaml"), Some(PathChange::Policy));
    assert_eq!(
        c("/p/.squad/decisions/inbox/k-a.md"),
        Some(PathChange::MemoryInbox)
    );
    assert_eq!(c("/p/.squad/decisions/inbox/.k-a.md.tmp.1"), None);
    assert_eq!(c("/p/.squad"), Some(PathChange::Rescan));
    assert_eq!(c("/p/.squad/run/squadd.sock"), Some(PathChange::Control));
    assert_eq!(c("/p/.squad/run/presence"), Some(PathChange::PresenceDir));
    assert_eq!(
        c("/p/.squad/run/presence/backend.json"),
        Some(PathChange::Presence("backend".into()))
    );
    assert_eq!(c("/p/.squad/run/presence/.backend.json.tmp.1.2"), None);
    assert_eq!(c("/p/.squad/run/state.json"), None);
    assert_eq!(c("/p/.squad/sessions"), Some(PathChange::Rescan));
    assert_eq!(c("/p/src/main.rs"), None);
    assert_eq!(c("/p/.squad/sessions/.hidden"), None);
    assert_eq!(c("/p/.squad/sessions/20240116T000001Z.tmp"), None);
    assert_eq!(c("/p/.squad/sessions/not-a-session/inbox"), None);
    assert_eq!(
        c("/p/.squad/sessions/20240116T000001Z.tmp/session-status.md"),
        None
    );
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1"),
        Some(PathChange::SessionDir("20240115T100000Z-s1".into()))
    );
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1/locks"),
        Some(PathChange::LocksDir("20240115T100000Z-s1".into()))
    );
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1/locks/x.json"),
        Some(PathChange::LockRecord("20240115T100000Z-s1".into()))
    );
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1/session-status.md"),
        Some(PathChange::SessionFile {
            session: "20240115T100000Z-s1".into(),
            file: "session-status.md".into(),
            kind: FileKind::SessionStatus
        })
    );
    assert_eq!(c("/p/.squad/sessions/20240115T100000Z-s1/notes.txt"), None);
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1/inbox/bob/new/0-critical-x-msg_1.md"),
        Some(PathChange::Inbox {
            session: "20240115T100000Z-s1".into(),
            agent: "bob".into(),
            file: "0-critical-x-msg_1.md".into()
        })
    );
    assert_eq!(
        c("/p/.squad/sessions/20240115T100000Z-s1/artifacts/a/b"),
        None
    );
}

#[test]
fn temporaries_are_hidden_names_with_an_extension() {
    let table = [
        (".msg_1.partial", true),
        (".x.swp", true),
        (".session-status.md.tmp.1234.7", true),
        (".k-a.md.tmp.1", true),
        (".x.", false),
        ("..x", false),
        (".", false),
        ("..", false),
        (".hidden", false),
        (".deleting-20240115T100000Z-s1", false),
        ("msg.partial", false),
        ("role-comm-alice-to-bob-msg_1.md", false),
        ("0-critical-x-msg_1.md", false),
        ("20240116T000001Z.tmp", false),
        ("", false),
    ];
    for (name, temp) in table {
        assert_eq!(is_temporary(OsStr::new(name)), temp, "{name}");
    }
    // Every dot name squadd follows: the team directories and the
    // skill directories' parents.
    let followed = [
        squad_protocol::teamdir::TEAM_DIR,
        squad_protocol::teamdir::LEGACY_TEAM_DIR,
        SQUAD_DIR,
    ]
    .into_iter()
    .chain(
        squad_protocol::skill::discover::PROJECT_SKILL_DIRS
            .iter()
            .flat_map(|d| d.split('/')),
    );
    for name in followed {
        assert!(!is_temporary(OsStr::new(name)), "{name} is followed");
    }
}

#[test]
fn the_watcher_drops_reads_and_changes_of_temporaries_only() {
    use notify::event::{Flag, ModifyKind, RenameMode};
    let ev = |kind: FsKind, paths: &[&str]| {
        paths.iter().fold(notify::Event::new(kind), |e, p| {
            e.add_path(PathBuf::from(p))
        })
    };
    let create = FsKind::Create(CreateKind::File);
    let s = "/p/.squad/sessions/20240115T100000Z-s1";
    let partial = format!("{s}/.msg_1.partial");
    let real = format!("{s}/role-comm-alice-to-bob-msg_1.md");
    let tmp = format!("{s}/inbox/bob/new/.0-medium-x.md.tmp.12.3");
    let both = FsKind::Modify(ModifyKind::Name(RenameMode::Both));
    let from = FsKind::Modify(ModifyKind::Name(RenameMode::From));
    let table = [
        (ev(create, &[&partial]), true),
        (ev(FsKind::Modify(ModifyKind::Any), &[&tmp]), true),
        (ev(from, &[&partial]), true),
        (ev(both, &[&partial, &real]), false),
        (ev(create, &[&real]), false),
        (ev(create, &["/p/.squad"]), false),
        (ev(create, &["/p/.ai-team"]), false),
        (ev(create, &["/p/.claude"]), false),
        (ev(FsKind::Access(AccessKind::Read), &[&real]), true),
        (ev(FsKind::Other, &[]), false),
        (ev(FsKind::Other, &[]).set_flag(Flag::Rescan), false),
    ];
    for (e, dropped) in table {
        assert_eq!(droppable(&e), dropped, "{e:?}");
    }
}

/// The watcher thread drops what squadd writes for itself under a root and
/// never follows (its audit log, the session locks), so those writes no
/// longer wake the loop; everything [`classify`] names, the config, the
/// root's own directories and anything outside every root still comes.
#[test]
fn the_watcher_drops_what_no_root_follows_and_keeps_the_rest() {
    let f = Followed::default();
    f.0.write()
        .unwrap()
        .push(("/p".into(), "/p/.squad/sessions".into()));
    let modify = FsKind::Modify(ModifyKind::Data(notify::event::DataChange::Any));
    let ignored = |path: &str| f.ignores(&notify::Event::new(modify).add_path(path.into()));
    let s = "/p/.squad/sessions/20240115T100000Z-s1";
    for own in [
        "/p/.squad/audit.jsonl",
        "/p/.squad/run/session-20240115T100000Z-s1.lock",
        "/p/.squad/run/hooks.jsonl",
        "/p/.claude/context/shared-context.json",
        "/p/src/main.rs",
    ] {
        assert!(ignored(own), "{own} is not followed");
    }
    for followed in [
        format!("{s}/session-status.md"),
        format!("{s}/role-comm-bench-task_1.md"),
        format!("{s}/inbox/bob/new/0-medium-x.md"),
        "/p/.squad/run/squadd.sock".into(),
        "/p/.squad/policies.yaml".into(),
        "/p/.squad/config.json".into(),
        "/p/.squad".into(),
        "/p".into(),
        "/elsewhere/.claude/skills/x/SKILL.md".into(),
    ] {
        assert!(!ignored(&followed), "{followed} is followed");
    }
    // One followed path keeps a rename pair; a rescan request is kept.
    let both = notify::Event::new(modify)
        .add_path("/p/.squad/audit.jsonl".into())
        .add_path(format!("{s}/session-status.md").into());
    assert!(!f.ignores(&both));
    let rescan = notify::Event::new(FsKind::Other).set_flag(notify::event::Flag::Rescan);
    assert!(!f.ignores(&rescan));
}

/// What the kernel really reports for a message written the way agents
/// (and squadd) write: to a temporary, then renamed into place. The
/// temporary's own notifications are dropped; what remains names the
/// real file.
#[test]
fn a_write_then_rename_keeps_only_notifications_naming_the_real_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut w = Watcher::start(move |r: Notification| {
        let _ = tx.send(r);
    })
    .unwrap();
    w.watch(&dir).unwrap();
    let (partial, real) = (dir.join(".msg_1.partial"), dir.join("m-msg_1.md"));
    std::fs::write(&partial, "x").unwrap();
    std::fs::rename(&partial, &real).unwrap();
    let mut seen = Vec::new();
    // The rename is the last thing reported.
    while !seen.iter().any(|e: &notify::Event| e.paths.contains(&real)) {
        seen.push(rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap());
    }
    while let Ok(r) = rx.recv_timeout(Duration::from_millis(200)) {
        seen.push(r.unwrap());
    }
    let (dropped, kept): (Vec<_>, Vec<_>) = seen.iter().partition(|e| droppable(e));
    assert!(!dropped.is_empty(), "{seen:?}");
    assert!(
        dropped.iter().all(|e| e.paths == [partial.clone()]),
        "{dropped:?}"
    );
    assert!(!kept.is_empty(), "{seen:?}");
    assert!(kept.iter().all(|e| e.paths.contains(&real)), "{kept:?}");
    // Create, write, close after writing, rename-from: 4 of the 5
    // (opens are not reported at all); rename-to remains.
}

/// Starts a watcher of `dirs` whose notifications arrive on the channel.
fn watching(dirs: &[&Path]) -> (Watcher, std::sync::mpsc::Receiver<Notification>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut w = Watcher::start(move |r: Notification| {
        let _ = tx.send(r);
    })
    .unwrap();
    for d in dirs {
        w.watch(d).unwrap();
    }
    (w, rx)
}

/// Everything reported until a file named `marker` appears in `dir` (it is
/// written after the actions under test, so what they caused came first).
fn until_marker(rx: &std::sync::mpsc::Receiver<Notification>, dir: &Path) -> Vec<notify::Event> {
    let marker = dir.join("marker");
    std::fs::write(&marker, "m").unwrap();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|e: &notify::Event| e.paths.contains(&marker))
    {
        seen.push(rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap());
    }
    seen
}

/// Opening and reading a file is not a change: squadd's own reads (and an
/// agent's) wake the watcher thread for nothing when opens are watched
/// (`notify` watches `IN_OPEN`; this test fails with it).
#[test]
fn reading_a_watched_directorys_files_is_not_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let file = dir.join("session-status.md");
    std::fs::write(&file, "status: active\n").unwrap();
    let (_w, rx) = watching(&[&dir]);
    for _ in 0..3 {
        std::fs::read(&file).unwrap();
        std::fs::read_dir(&dir).unwrap().for_each(drop);
    }
    let seen = until_marker(&rx, &dir);
    assert!(
        seen.iter()
            .all(|e| !e.paths.contains(&file) && !e.paths.contains(&dir)),
        "{seen:?}"
    );
}

/// A watched directory deleted and made again at the same path is watched
/// afresh, and its events are named by the path (the kernel's dropped
/// watch is forgotten, not reused).
#[test]
fn a_watched_directory_made_again_is_watched_afresh() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let sub = dir.join("20240115T100000Z");
    std::fs::create_dir(&sub).unwrap();
    let (mut w, rx) = watching(&[&dir, &sub]);
    std::fs::remove_dir(&sub).unwrap();
    let seen = until_marker(&rx, &dir);
    assert!(
        seen.iter()
            .any(|e| e.paths == [sub.clone()] && e.kind.is_remove()),
        "{seen:?}"
    );
    // Gone with its directory: nothing left to unwatch.
    made_again_and_watched(&mut w, &rx, &sub);
    // And unwatched on request: nothing more from it.
    w.unwatch(&sub).unwrap();
    std::fs::write(sub.join("after"), "x").unwrap();
    let seen = until_marker(&rx, &dir);
    assert!(
        seen.iter().all(|e| !e.paths.contains(&sub.join("after"))),
        "{seen:?}"
    );
}

fn event(kind: FsKind, path: &str) -> Notification {
    Ok(notify::Event::new(kind).add_path(PathBuf::from(path)))
}

#[test]
fn an_attribute_change_queues_the_path() {
    let (mut intake, _rx) = Intake::start().unwrap();
    let now = Instant::now();
    let chmod = FsKind::Modify(ModifyKind::Metadata(
        notify::event::MetadataKind::Permissions,
    ));
    assert_eq!(intake.note(event(chmod, "/p/a.md"), now), Noted::Queued);
    assert_eq!(
        intake.take_due(now + Duration::from_secs(1)),
        vec![PathBuf::from("/p/a.md")]
    );
    // Reads stay ignored (squadd's own reads make them).
    let read = FsKind::Access(AccessKind::Read);
    assert_eq!(intake.note(event(read, "/p/b.md"), now), Noted::Queued);
    assert!(intake.take_due(now + Duration::from_secs(1)).is_empty());
}

#[test]
fn a_removal_counts_only_when_the_file_stayed_gone_for_the_grace() {
    let (mut intake, _rx) = Intake::start().unwrap();
    let now = Instant::now();
    let path = Path::new("/p/a.md");
    // Found gone: not yet; read again at the end of the grace.
    assert!(!intake.vanished(path, now));
    assert_eq!(intake.next_due(), Some(now + REMOVAL_GRACE));
    // A read before then (another event took the queued path) does not
    // count either, and the path stays queued for the deadline.
    assert_eq!(intake.take_due(now), Vec::<PathBuf>::new());
    let early = now + REMOVAL_GRACE / 2;
    assert!(!intake.vanished(path, early));
    assert_eq!(
        intake.take_due(now + REMOVAL_GRACE),
        vec![path.to_path_buf()]
    );
    assert!(intake.vanished(path, now + REMOVAL_GRACE));
    assert_eq!(intake.vanishing(path), None);
    // Back in the meantime: the next disappearance starts over.
    assert!(!intake.vanished(path, now));
    intake.clear_vanished(path);
    assert!(!intake.vanished(path, now + REMOVAL_GRACE * 2));
    assert_eq!(intake.vanishing(path), Some(now + REMOVAL_GRACE * 3));
}

#[test]
fn an_unreadable_file_is_retried_with_backoff_then_left_to_its_events() {
    let (mut intake, _rx) = Intake::start().unwrap();
    let now = Instant::now();
    let path = Path::new("/p/a.md");
    let mut waits = Vec::new();
    while intake.retry_unreadable(path, now) {
        let due = intake.next_due().unwrap();
        waits.push(due.duration_since(now).as_secs());
        assert_eq!(intake.take_due(due), vec![path.to_path_buf()]);
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64]);
    // Readable again: a later failure starts over.
    intake.readable(path);
    assert!(intake.retry_unreadable(path, now));
    assert_eq!(intake.next_due(), Some(now + Duration::from_secs(1)));
}

#[test]
fn a_full_watch_table_is_named_with_its_fix_as_a_typed_error() {
    let e = WatchError::from(&notify::Error::new(notify::ErrorKind::MaxFilesWatch));
    assert!(matches!(e, WatchError::Limit(_)), "{e:?}");
    assert!(e.to_string().contains("fs.inotify.max_user_watches"), "{e}");
    let e = WatchError::from(&notify::Error::io(std::io::Error::from_raw_os_error(
        libc::ENOSPC,
    )));
    assert!(matches!(e, WatchError::NoSpace(_)), "{e:?}");
    let e = WatchError::from(&notify::Error::generic("boom"));
    assert_eq!(e, WatchError::Other("boom".into()));
}

/// A watched directory moved away (a session archived by hand) is no
/// longer reported under its old path: its watch goes with the move, as
/// `notify`'s did, and a directory made at the old path is watched afresh.
#[test]
fn a_watched_directory_moved_away_is_no_longer_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (sub, away) = (dir.join("20240115T100000Z"), tmp.path().join("away"));
    std::fs::create_dir(&sub).unwrap();
    let (mut w, rx) = watching(&[&dir, &sub]);
    std::fs::rename(&sub, &away).unwrap();
    std::fs::write(away.join("later"), "x").unwrap();
    let seen = until_marker(&rx, &dir);
    assert!(
        seen.iter().any(|e| e.paths == [sub.clone()]),
        "the move itself is reported: {seen:?}"
    );
    assert!(
        seen.iter().all(|e| !e.paths.contains(&sub.join("later"))),
        "{seen:?}"
    );
    made_again_and_watched(&mut w, &rx, &sub);
}

/// `sub`'s watch is forgotten (nothing to unwatch); made again and
/// watched, its events are reported under its path.
fn made_again_and_watched(
    w: &mut Watcher,
    rx: &std::sync::mpsc::Receiver<Notification>,
    sub: &Path,
) {
    assert!(w.unwatch(sub).is_err());
    std::fs::create_dir(sub).unwrap();
    w.watch(sub).unwrap();
    let seen = until_marker(rx, sub);
    assert!(
        seen.iter().any(|e| e.paths == [sub.join("marker")]),
        "{seen:?}"
    );
}

/// Issue 43 item 7: when the kernel gives no inotify instance (EMFILE:
/// the user's `fs.inotify.max_user_instances` are used up), squadd does not
/// refuse to start: it polls the watched directories, says why naming the
/// limit, and still sees a message written into a watched directory.
#[cfg(target_os = "linux")]
#[test]
fn with_no_inotify_instance_left_the_watcher_polls_and_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let refused = Err(std::io::Error::from_raw_os_error(libc::EMFILE));
    let mut w = Watcher::start_on(refused, move |r: Notification| {
        let _ = tx.send(r);
    })
    .unwrap();
    let why = w.polling().expect("polling").to_string();
    assert!(why.contains("fs.inotify.max_user_instances"), "{why}");
    w.watch(&dir).unwrap();
    let real = dir.join("m-msg_1.md");
    std::fs::write(&real, "x").unwrap();
    // Bounded wait for the next poll (every POLL_INTERVAL); measures nothing.
    let deadline = std::time::Instant::now() + 10 * super::watcher::POLL_INTERVAL;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let e = rx
            .recv_timeout(left)
            .expect("a notification naming the file");
        if e.unwrap().paths.contains(&real) {
            break;
        }
    }
    // Any other error of inotify_init1 still fails the start.
    let other = Err(std::io::Error::from_raw_os_error(libc::ENOMEM));
    assert!(Watcher::start_on(other, |_: Notification| {}).is_err());
    // The kernel's watcher says nothing of polling.
    let (w, _rx) = watching(&[&dir]);
    assert_eq!(w.polling(), None);
}

/// A directory refused a watch (the watch limit, played by
/// `max_watches`) is polled: what was added, changed in place, replaced or
/// removed there since it was refused is queued, nothing else; a poll over
/// budget leaves the other directories for the next, in turn.
#[test]
fn an_unwatched_directory_is_polled_for_what_changed_there() {
    let (mut intake, _rx) = Intake::start().unwrap();
    intake.max_watches = Some(0);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("kept.md"), "a").unwrap();
    std::fs::write(dir.join("edited.md"), "a").unwrap();
    std::fs::write(dir.join("gone.md"), "a").unwrap();
    assert!(intake.watch(&dir).is_err());
    assert!(intake.unwatched().contains(&dir));
    let why = intake.polling().unwrap();
    assert!(
        why.contains("1 directory could not be watched")
            && why.contains("fs.inotify.max_user_watches"),
        "{why}"
    );
    let now = Instant::now();
    // Nothing changed: nothing queued.
    assert_eq!(intake.poll_unwatched(now), 0);
    assert!(intake.take_due(now).is_empty());
    std::fs::write(dir.join("new.md"), "b").unwrap();
    std::fs::write(dir.join("edited.md"), "longer").unwrap();
    std::fs::remove_file(dir.join("gone.md")).unwrap();
    assert_eq!(intake.poll_unwatched(now), 3);
    let mut due = intake.take_due(now);
    due.sort();
    assert_eq!(due, ["edited.md", "gone.md", "new.md"].map(|n| dir.join(n)));
    // Each change is reported once.
    assert_eq!(intake.poll_unwatched(now), 0);
    // Watched again (a watch freed): no longer polled, no longer said.
    intake.max_watches = None;
    assert_eq!(intake.rewatch(), vec![dir.clone()]);
    assert!(intake.polling().is_none());
    std::fs::write(dir.join("later.md"), "c").unwrap();
    assert_eq!(intake.poll_unwatched(now), 0);
}
