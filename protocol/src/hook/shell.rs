//! The paths a shell command would write, best effort ([`shell_targets`]):
//! a small lexer (quotes, operators, redirections, heredocs) and the write
//! targets of the commands that write files (`tee`, `cp`, `mv`, `sed -i`,
//! git's tree-rewriting commands, …). What it cannot read yields nothing,
//! and CI's `squadctl check` remains the backstop.

use super::lex::{Item, Simple, simple_commands};
use super::patch_targets;

/// A write a shell command would make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShellTarget {
    /// A path (as written; may hold glob characters), and whether the
    /// command works recursively below it (`rm -r`, `git clean DIR`).
    Path {
        /// The path.
        path: String,
        /// Recursive below it.
        recursive: bool,
    },
    /// A git operation that rewrites the whole working tree (`git stash`,
    /// `git reset --hard`, `git checkout BRANCH`, `git clean` without paths…).
    WholeTree {
        /// The command, for messages.
        command: String,
    },
    /// A write the analysis found but cannot place (a relative path after
    /// `cd "$X"`, an `apply_patch` whose patch names no file): refused,
    /// since an unknown place may be any place.
    Unjudged {
        /// The path as written (or the command).
        path: String,
        /// Why it cannot be placed.
        reason: String,
    },
}

fn is_special_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty"
    ) || path.starts_with("/dev/fd/")
        // `tee -` writes to stdout; an all-digit name is a file (`> 123`).
        || path == "-"
}

/// A path the guard cannot judge statically: parameter expansion, command
/// substitution, a home directory.
fn is_dynamic(path: &str) -> bool {
    path.contains('$') || path.contains('`') || path.starts_with('~')
}

fn operands(args: &[String], with_value: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut flags = Vec::new();
    let mut ops = Vec::new();
    let mut i = 0;
    let mut end_of_options = false;
    while i < args.len() {
        let a = &args[i];
        if end_of_options || !a.starts_with('-') || a == "-" {
            ops.push(a.clone());
        } else if a == "--" {
            end_of_options = true;
        } else {
            flags.push(a.clone());
            if with_value.contains(&a.as_str()) {
                i += 1;
            }
        }
        i += 1;
    }
    (flags, ops)
}

fn has_short(flags: &[String], letter: char, long: &str) -> bool {
    flags.iter().any(|f| {
        f == long || (f.starts_with('-') && !f.starts_with("--") && f[1..].contains(letter))
    })
}

/// The write targets of a shell command line, best effort: redirections,
/// `tee`, `cp`/`mv`/`rm`/`touch`/`mkdir` (and `rmdir`, `ln`, `install`,
/// `truncate`), `sed -i`, a heredoc fed to `apply_patch`, and git operations
/// that rewrite the working tree (`git checkout -- …`, `git restore`,
/// `git stash`, `git reset --hard`, `git clean`, and friends).
///
/// Anything else (scripts, interpreters, `xargs`, `find -delete`, variables
/// in paths, command substitution) is not analysed and yields nothing; CI's
/// `squadctl check` remains the backstop. Unbalanced quoting yields nothing.
pub fn shell_targets(command: &str) -> Vec<ShellTarget> {
    let Some(items) = simple_commands(command) else {
        return Vec::new();
    };
    let mut all = Vec::new();
    // The directory relative paths are in, as `cd` moved it: "" where the
    // command started, `None` once it is unknown (`cd $X`, `cd -`, `cd`).
    let mut dir: Option<String> = Some(String::new());
    // `pushd`'s stack, and what a subshell's `(` saved (its `cd` ends at `)`).
    let mut pushed: Vec<Option<String>> = Vec::new();
    let mut saved: Vec<(Option<String>, Vec<Option<String>>)> = Vec::new();
    for item in &items {
        let simple = match item {
            Item::Open => {
                saved.push((dir.clone(), pushed.clone()));
                continue;
            }
            Item::Close => {
                if let Some((d, p)) = saved.pop() {
                    dir = d;
                    pushed = p;
                }
                continue;
            }
            Item::Command(simple) => simple,
        };
        let mut out = Vec::new();
        for t in &simple.redirect_targets {
            push_path(t, false, &mut out);
        }
        let (words, chdir) = strip_wrappers(&simple.words);
        let Some((program, args)) = words.split_first() else {
            place(out, dir.as_deref(), &mut all);
            continue;
        };
        let name = program.rsplit('/').next().unwrap_or(program);
        match name {
            "cd" | "pushd" => {
                let (_, ops) = operands(args, &[]);
                let to = match ops.as_slice() {
                    [to] if to != "-" => moved(dir.as_deref(), to),
                    _ => None,
                };
                if name == "pushd" {
                    pushed.push(dir.clone());
                }
                dir = to;
                place(out, dir.as_deref(), &mut all);
                continue;
            }
            "popd" => {
                // An empty stack here may not be empty in the agent's shell.
                dir = pushed.pop().unwrap_or(None);
                place(out, dir.as_deref(), &mut all);
                continue;
            }
            _ => {}
        }
        command_targets(name, args, simple, &mut out);
        // `env -C DIR` runs this one command in DIR.
        let here = match &chdir {
            Some(to) => moved(dir.as_deref(), to),
            None => dir.clone(),
        };
        place(out, here.as_deref(), &mut all);
    }
    all
}

/// The directory after `cd to` from `dir` (`None`: unknown).
fn moved(dir: Option<&str>, to: &str) -> Option<String> {
    if is_dynamic(to) {
        return None;
    }
    if to.starts_with('/') {
        return Some(format!("{}/", to.trim_end_matches('/')));
    }
    dir.map(|d| format!("{d}{}/", to.trim_end_matches('/')))
}

/// Pushes a path target unless it is a device or built at run time.
fn push_path(path: &str, recursive: bool, out: &mut Vec<ShellTarget>) {
    if !path.is_empty() && !is_special_device(path) && !is_dynamic(path) {
        out.push(ShellTarget::Path {
            path: path.to_string(),
            recursive,
        });
    }
}

/// Moves one command's targets into `all`, relative paths taken in `dir`;
/// with the directory unknown they cannot be placed, so they are refused.
fn place(out: Vec<ShellTarget>, dir: Option<&str>, all: &mut Vec<ShellTarget>) {
    for t in out {
        match (t, dir) {
            (ShellTarget::Path { path, recursive }, Some(d)) if !path.starts_with('/') => {
                all.push(ShellTarget::Path {
                    path: format!("{d}{path}"),
                    recursive,
                })
            }
            (ShellTarget::Path { path, .. }, None) if !path.starts_with('/') => {
                all.push(ShellTarget::Unjudged {
                    reason: format!(
                        "`{path}` is relative to a working directory the guard cannot know (after `cd` to a variable, `cd -`, a bare `cd` or `popd`)"
                    ),
                    path,
                })
            }
            (t, _) => all.push(t),
        }
    }
}

/// The write targets of one command (its program `name`), relative to
/// where it runs.
fn command_targets(name: &str, args: &[String], simple: &Simple, out: &mut Vec<ShellTarget>) {
    match name {
        "tee" => {
            let (_, ops) = operands(args, &[]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "touch" | "mkdir" | "rmdir" | "unlink" | "truncate" | "shred" => {
            let (_, ops) = operands(args, &["-m", "-d", "-t", "-r", "-s", "--mode", "-n"]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "rm" => {
            let (flags, ops) = operands(args, &[]);
            let recursive =
                has_short(&flags, 'r', "--recursive") || has_short(&flags, 'R', "--recursive");
            ops.iter().for_each(|p| push_path(p, recursive, out));
        }
        "cp" | "mv" | "ln" | "install" => copy_targets(name, args, out),
        // `link FILE NAME`: a hard link shares the file, so writing either
        // name writes both.
        "link" => {
            let (_, ops) = operands(args, &[]);
            ops.iter().for_each(|p| push_path(p, false, out));
        }
        "sed" => sed_targets(args)
            .iter()
            .for_each(|p| push_path(p, false, out)),
        "apply_patch" | "applypatch" => {
            let text = simple.heredoc.clone().or_else(|| args.first().cloned());
            match text.map(|t| patch_targets(&t)) {
                Some(Ok(paths)) => paths.iter().for_each(|p| push_path(p, false, out)),
                Some(Err(e)) => out.push(ShellTarget::Unjudged {
                    path: name.to_string(),
                    reason: format!("its patch cannot be read ({})", e.message),
                }),
                None => out.push(ShellTarget::Unjudged {
                    path: name.to_string(),
                    reason: "it is given no patch the guard can read".into(),
                }),
            }
        }
        "git" => {
            // `GIT_WORK_TREE=DIR git …` (or `env GIT_WORK_TREE=DIR git …`)
            // moves the tree git writes, as `--work-tree` does.
            let env_tree = simple
                .words
                .iter()
                .take_while(|w| w.rsplit('/').next() != Some("git"))
                .filter_map(|w| w.strip_prefix("GIT_WORK_TREE="))
                .last()
                .map(str::to_string);
            let mut own = Vec::new();
            git_targets(args, &mut own);
            let tree = git_work_tree(args).or(env_tree);
            match tree {
                // What git writes lands in that tree, wherever it is: the
                // whole of it is judged.
                Some(dir) if !own.is_empty() => {
                    if is_dynamic(&dir) || dir.is_empty() {
                        out.push(ShellTarget::Unjudged {
                            path: dir.clone(),
                            reason: "git is given a working tree the guard cannot read".into(),
                        });
                    } else {
                        push_path(&dir, true, out);
                    }
                }
                _ => out.extend(own),
            }
        }
        _ => {}
    }
}

/// `cp`, `mv`, `ln` and `install`: the destination (`-t DIR`, `-tDIR`,
/// `--target-directory[=]DIR`, a cluster like `-Dt DIR`, else the last
/// operand; one-operand `ln` links into the working directory), the
/// sources `mv` takes away, and where a link (`ln`, `cp -s`, `cp -l`)
/// will lead: writing through it writes there.
fn copy_targets(name: &str, args: &[String], out: &mut Vec<ShellTarget>) {
    let valued: &[char] = if name == "install" {
        &['t', 'S', 'm', 'o', 'g']
    } else {
        &['t', 'S']
    };
    let mut flags: Vec<String> = Vec::new();
    let mut ops: Vec<String> = Vec::new();
    let mut target_dir: Option<String> = None;
    let mut i = 0;
    let mut end = false;
    while i < args.len() {
        let a = &args[i];
        if end || !a.starts_with('-') || a == "-" {
            ops.push(a.clone());
        } else if a == "--" {
            end = true;
        } else if let Some(long) = a.strip_prefix("--") {
            let (key, value) = match long.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (long, None),
            };
            let takes = matches!(
                key,
                "target-directory" | "suffix" | "mode" | "owner" | "group"
            );
            let value = match value {
                Some(v) => Some(v),
                None if takes => {
                    i += 1;
                    args.get(i).cloned()
                }
                None => None,
            };
            if key == "target-directory" {
                target_dir = value;
            }
            flags.push(format!("--{key}"));
        } else {
            // A short cluster: the first letter taking a value takes the
            // rest of the cluster, or the next word.
            let cluster = &a[1..];
            for (at, letter) in cluster.char_indices() {
                if valued.contains(&letter) {
                    let rest = &cluster[at + letter.len_utf8()..];
                    let value = if rest.is_empty() {
                        i += 1;
                        args.get(i).cloned()
                    } else {
                        Some(rest.to_string())
                    };
                    if letter == 't' {
                        target_dir = value;
                    }
                    flags.push(format!("-{letter}"));
                    break;
                }
                flags.push(format!("-{letter}"));
            }
        }
        i += 1;
    }
    let flag = |short: &str, long: &str| flags.iter().any(|f| f == short || f == long);
    if name == "install" && flag("-d", "--directory") {
        ops.iter().for_each(|p| push_path(p, false, out));
        return;
    }
    let recursive = name == "cp"
        && (flag("-r", "--recursive") || flag("-R", "--recursive") || flag("-a", "--archive"));
    let (dest, sources): (Option<String>, &[String]) = match (&target_dir, ops.len()) {
        (Some(d), _) => (Some(d.clone()), &ops[..]),
        (None, 0) => (None, &[]),
        // `ln TARGET` makes a link named after it in the working directory.
        (None, 1) if name == "ln" => (Some(String::new()), &ops[..]),
        (None, 1) => (None, &[]),
        (None, n) => (Some(ops[n - 1].clone()), &ops[..n - 1]),
    };
    match &dest {
        Some(d) if target_dir.is_some() => push_path(d, true, out),
        Some(d) if d.is_empty() => {
            for s in sources {
                let base = s.trim_end_matches('/').rsplit('/').next().unwrap_or(s);
                push_path(base, false, out);
            }
        }
        Some(d) => push_path(d, recursive, out),
        None => {}
    }
    if name == "mv" {
        // Moving a file away changes its source too.
        sources.iter().for_each(|p| push_path(p, true, out));
    }
    let symbolic = (name == "ln" && flag("-s", "--symbolic"))
        || (name == "cp" && flag("-s", "--symbolic-link"));
    let hard = (name == "ln" && !symbolic) || (name == "cp" && flag("-l", "--link"));
    if symbolic {
        // A relative link target is read from the link's directory: DEST's
        // parent, or DEST itself when it is a directory (both judged).
        for s in sources {
            if s.starts_with('/') {
                push_path(s, true, out);
                continue;
            }
            let dirs: Vec<String> = match (&target_dir, &dest) {
                (Some(d), _) => vec![d.trim_end_matches('/').to_string()],
                (None, Some(d)) if d.is_empty() => vec![String::new()],
                (None, Some(d)) => {
                    let d = d.trim_end_matches('/');
                    let parent = d.rsplit_once('/').map_or("", |(p, _)| p);
                    vec![parent.to_string(), d.to_string()]
                }
                (None, None) => Vec::new(),
            };
            for d in dirs {
                let joined = if d.is_empty() {
                    s.clone()
                } else {
                    format!("{d}/{s}")
                };
                push_path(&joined, true, out);
            }
        }
    } else if hard {
        // A hard link shares the file: writing one writes the other.
        sources.iter().for_each(|p| push_path(p, recursive, out));
    }
}

/// Drops leading `VAR=value` assignments and transparent wrappers (`sudo`,
/// `env`, `command`, `nohup`, `time`, `exec`, `nice`); returns the command
/// and the directory `env -C DIR` / `env --chdir=DIR` runs it in.
fn strip_wrappers(words: &[String]) -> (Vec<String>, Option<String>) {
    let mut i = 0;
    let mut chdir = None;
    while i < words.len() {
        let w = &words[i];
        let assignment = w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit())
        });
        if assignment {
            i += 1;
            continue;
        }
        match w.as_str() {
            "sudo" | "env" | "command" | "nohup" | "time" | "exec" | "nice" | "builtin" => {
                let is_env = w == "env";
                i += 1;
                // Their own options (`sudo -u x`, `nice -n 5`) are skipped loosely.
                while i < words.len() && words[i].starts_with('-') {
                    let opt = words[i].as_str();
                    if is_env && let Some(d) = opt.strip_prefix("--chdir=") {
                        chdir = Some(d.to_string());
                    } else if is_env && (opt == "-C" || opt == "--chdir") {
                        chdir = words.get(i + 1).cloned();
                        i += 1;
                    } else if is_env && let Some(d) = opt.strip_prefix("-C") {
                        chdir = Some(d.to_string());
                    } else if matches!(opt, "-u" | "-g" | "-n" | "-C") {
                        i += 1;
                    }
                    i += 1;
                }
            }
            _ => break,
        }
    }
    (words[i.min(words.len())..].to_vec(), chdir)
}

fn sed_targets(args: &[String]) -> Vec<String> {
    let mut in_place = false;
    let mut script_given = false;
    let mut ops = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with("--in-place") {
            in_place = true;
        } else if a == "-e" || a == "-f" || a == "--expression" || a == "--file" {
            script_given = true;
            i += 1;
        } else if a.starts_with("--expression=") || a.starts_with("--file=") {
            script_given = true;
        } else if a.starts_with('-') && !a.starts_with("--") && a.len() > 1 {
            // A cluster like `-ni` or `-i.bak`: an `i` turns in-place on (the
            // rest of the cluster is its suffix); a trailing `e`/`f` takes
            // the next word as the script.
            let cluster = &a[1..];
            if let Some(pos) = cluster.find('i') {
                in_place = true;
                let before = &cluster[..pos];
                if before.ends_with('e') || before.ends_with('f') {
                    script_given = true;
                }
            } else if cluster.ends_with('e') || cluster.ends_with('f') {
                script_given = true;
                i += 1;
            }
        } else if !a.starts_with('-') {
            ops.push(a.clone());
        }
        i += 1;
    }
    if !in_place {
        return Vec::new();
    }
    if !script_given && !ops.is_empty() {
        ops.remove(0);
    }
    ops
}

/// The working tree git is pointed at by `--work-tree DIR` or
/// `--work-tree=DIR` among its global options.
fn git_work_tree(args: &[String]) -> Option<String> {
    let mut tree = None;
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let a = args[i].as_str();
        if let Some(dir) = a.strip_prefix("--work-tree=") {
            tree = Some(dir.to_string());
        } else if a == "--work-tree" {
            tree = args.get(i + 1).cloned();
            i += 1;
        } else if matches!(a, "-C" | "-c" | "--git-dir" | "--namespace") {
            i += 1;
        }
        i += 1;
    }
    tree
}

fn git_targets(args: &[String], out: &mut Vec<ShellTarget>) {
    // Global options before the subcommand; `-C DIR` moves every path.
    let mut i = 0;
    let mut base = String::new();
    while i < args.len() && args[i].starts_with('-') {
        match args[i].as_str() {
            "-C" => {
                if let Some(dir) = args.get(i + 1) {
                    base = format!("{}/", dir.trim_end_matches('/'));
                }
                i += 1;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" => i += 1,
            _ => {}
        }
        i += 1;
    }
    let Some(sub) = args.get(i) else { return };
    let rest = &args[i + 1..];
    let command = format!("git {}", args[i..].join(" "));
    let whole = |out: &mut Vec<ShellTarget>| {
        out.push(ShellTarget::WholeTree {
            command: command.clone(),
        })
    };
    let paths = |ps: &[String], recursive: bool, out: &mut Vec<ShellTarget>| {
        for p in ps {
            let p = format!("{base}{p}");
            if p.trim_end_matches('/') == "." || p == "*" || p == ":/" {
                out.push(ShellTarget::WholeTree {
                    command: command.clone(),
                });
            } else if !is_dynamic(&p) {
                out.push(ShellTarget::Path { path: p, recursive });
            }
        }
    };
    // The named paths, or the whole tree when none are named.
    let scoped = |ps: &[String], out: &mut Vec<ShellTarget>| {
        if ps.is_empty() {
            whole(out)
        } else {
            paths(ps, true, out)
        }
    };
    let after_dashes = |rest: &[String]| -> Option<Vec<String>> {
        rest.iter()
            .position(|a| a == "--")
            .map(|p| rest[p + 1..].to_vec())
    };
    let flag = |names: &[&str]| rest.iter().any(|a| names.contains(&a.as_str()));
    match sub.as_str() {
        "checkout" => {
            if let Some(ps) = after_dashes(rest) {
                scoped(&ps, out)
            } else if flag(&["-b", "-B", "--orphan"]) {
                // A new branch at HEAD: the working tree stays as it is.
            } else if rest.iter().any(|a| !a.starts_with('-')) {
                // A branch switch, or a path restore without `--`: either
                // way possibly anything in the tree.
                whole(out)
            }
        }
        "switch" if !flag(&["-c", "-C", "--create", "--force-create"]) => whole(out),
        "restore" => {
            let staged_only = flag(&["--staged", "-S"]) && !flag(&["--worktree", "-W"]);
            if staged_only {
                return;
            }
            scoped(&operands(rest, &["-s", "--source"]).1, out)
        }
        "stash" => {
            let action = rest.first().map(String::as_str).unwrap_or("push");
            match action {
                "list" | "show" | "drop" | "clear" | "create" | "store" => {}
                "push"
                | "save"
                | "-p"
                | "--patch"
                | "-u"
                | "--include-untracked"
                | "-a"
                | "--all"
                | "-k"
                | "--keep-index"
                | "-m"
                | "--message"
                | "-q" => scoped(&after_dashes(rest).unwrap_or_default(), out),
                _ => whole(out),
            }
        }
        "reset" if flag(&["--hard", "--merge", "--keep"]) => whole(out),
        "clean" => {
            if flag(&["-n", "--dry-run"]) {
                return;
            }
            scoped(&operands(rest, &["-e", "--exclude"]).1, out)
        }
        "rm" | "mv" => {
            let (_, ops) = operands(rest, &[]);
            paths(&ops, sub == "rm", out)
        }
        "pull" => whole(out),
        "merge" | "rebase" | "cherry-pick" | "revert" | "am"
            if !flag(&[
                "--abort",
                "--quit",
                "--skip",
                "--continue",
                "--show-current-patch",
            ]) =>
        {
            whole(out)
        }
        _ => {}
    }
}
