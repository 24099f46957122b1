//! `squadctl service install|uninstall`: squadd as a systemd or launchd service.

use crate::exit;
use clap::Subcommand;
use std::path::{Path, PathBuf};

const SYSTEM_UNIT: &str = include_str!("../../../systemd/squadd.service");
const USER_UNIT: &str = include_str!("../../../systemd/squadd-user.service");
const LAUNCHD_PLIST: &str = include_str!("../../../systemd/dev.squad.squadd.plist");

/// Service commands.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write a unit (or plist) that runs squadd on a root, and print the
    /// commands that enable it.
    ///
    /// `--root DIR` is required: the project squadd supervises (a service
    /// has no current directory, so the usual default, the nearest
    /// `.squad/` above here, does not apply).
    ///
    /// `--user` (default on Linux): ~/.config/systemd/user/NAME.service.
    /// `--system`: /etc/systemd/system/NAME.service, hardened, running as
    /// `--run-as USER`, else the invoking user (`$SUDO_USER`, else `$USER`);
    /// refused when none is known. `--launchd` (default on macOS):
    /// ~/Library/LaunchAgents/dev.squad.NAME.plist.
    ///
    /// Refused, writing nothing, when the service manager is not running
    /// here (no systemd, as in many containers and WSL, or no systemd user
    /// manager for this login; launchd off macOS): the message says how to
    /// run squadd instead. `--dir` and `--print` skip that check.
    Install(InstallArgs),
    /// Stop and remove an installed unit (or plist).
    Uninstall(UninstallArgs),
}

/// Which service manager, and at which level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::Args)]
#[group(multiple = false)]
pub struct Kind {
    /// A systemd user unit.
    #[arg(long)]
    pub user: bool,
    /// A systemd system unit.
    #[arg(long)]
    pub system: bool,
    /// A launchd LaunchAgent (macOS).
    #[arg(long)]
    pub launchd: bool,
}

/// Arguments of `service install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    #[allow(missing_docs)]
    #[command(flatten)]
    pub kind: Kind,
    /// The squadd binary (default: the squadd next to this squadctl).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Unit name (default `squadd`).
    #[arg(long, default_value = "squadd")]
    pub name: String,
    /// Print the rendered file instead of writing it.
    #[arg(long)]
    pub print: bool,
    /// Write into this directory instead of the service manager's.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The user a `--system` unit runs squadd as (default: `$SUDO_USER`,
    /// else `$USER`).
    #[arg(long, value_name = "USER")]
    pub run_as: Option<String>,
}

/// Arguments of `service uninstall`.
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    #[allow(missing_docs)]
    #[command(flatten)]
    pub kind: Kind,
    /// Unit name (default `squadd`).
    #[arg(long, default_value = "squadd")]
    pub name: String,
    /// The directory the file was written to (default: the service manager's).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    User,
    System,
    Launchd,
}

fn manager(kind: Kind) -> Manager {
    if kind.system {
        Manager::System
    } else if kind.launchd || (!kind.user && cfg!(target_os = "macos")) {
        Manager::Launchd
    } else {
        Manager::User
    }
}

fn home() -> Result<PathBuf, String> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .ok_or_else(|| "HOME is not set; pass --dir".to_string())
}

fn default_dir(m: Manager) -> Result<PathBuf, String> {
    Ok(match m {
        Manager::System => PathBuf::from("/etc/systemd/system"),
        Manager::User => match std::env::var_os("XDG_CONFIG_HOME") {
            Some(x) => PathBuf::from(x).join("systemd/user"),
            None => home()?.join(".config/systemd/user"),
        },
        Manager::Launchd => home()?.join("Library/LaunchAgents"),
    })
}

fn file_name(m: Manager, name: &str) -> String {
    match m {
        Manager::Launchd => format!("dev.squad.{name}.plist"),
        _ => format!("{name}.service"),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where systemd, when it is the running init, keeps its runtime state
/// (what `sd_booted()` checks). `SQUADCTL_SYSTEMD_RUNTIME` replaces it, so
/// tests can play a machine with or without systemd.
fn systemd_runtime() -> PathBuf {
    std::env::var_os("SQUADCTL_SYSTEMD_RUNTIME")
        .map_or_else(|| PathBuf::from("/run/systemd/system"), PathBuf::from)
}

/// Why the service manager `m` cannot take a unit on this machine now, and
/// what to do instead; `None` when it runs.
fn manager_missing(m: Manager) -> Option<String> {
    let instead = "Run squadd another way: in the foreground or under tmux (`squadd --root DIR`), from your container's entry point, or from cron (`@reboot squadd --root DIR`); `--dir DIR` writes the file anyway (for another machine)";
    match m {
        Manager::Launchd if !cfg!(target_os = "macos") => Some(format!(
            "launchd is macOS's service manager and this is not macOS: use --user or --system (systemd). {instead}"
        )),
        Manager::Launchd => None,
        Manager::User | Manager::System if !systemd_runtime().is_dir() => Some(format!(
            "systemd is not running on this machine ({} does not exist: a container, WSL without systemd, or another init), so `systemctl` would fail (\"System has not been booted with systemd\"). {instead}",
            systemd_runtime().display()
        )),
        Manager::System => None,
        Manager::User => {
            // The user manager keeps its sockets in $XDG_RUNTIME_DIR/systemd;
            // without it `systemctl --user` fails ("No medium found", "Failed
            // to connect to bus").
            let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
            match runtime {
                Some(r) if r.join("systemd").is_dir() => None,
                _ => Some(format!(
                    "no systemd user manager runs for this login ({}), so `systemctl --user` would fail (\"Failed to connect to bus\" or \"No medium found\"). Log in through a session that starts one (ssh or a desktop login, not `su`), and to keep squadd running after logout run `loginctl enable-linger $USER`; or install a system unit with `sudo squadctl --root DIR service install --system`. {instead}",
                    runtime.map_or_else(
                        || "XDG_RUNTIME_DIR is not set".to_string(),
                        |r| format!("no {}", r.join("systemd").display())
                    )
                )),
            }
        }
    }
}

/// The user a system unit runs as: `--run-as`, else `$SUDO_USER` (the user
/// behind sudo), else `$USER`; never a made-up name.
fn run_as(given: Option<&str>) -> Result<String, String> {
    let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let user = given
        .map(str::to_string)
        .or_else(|| from_env("SUDO_USER"))
        .or_else(|| from_env("USER"))
        .ok_or_else(|| {
            "cannot tell which user squadd should run as: $SUDO_USER and $USER are unset; pass --run-as USER (the owner of the project)".to_string()
        })?;
    if user.is_empty()
        || !user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "user `{}` is not a plain user name (letters, digits, `.`, `_`, `-`); pass --run-as USER",
            crate::text::escape(&user)
        ));
    }
    Ok(user)
}

/// Renders the service file for a binary and a root.
fn render(
    m: Manager,
    binary: &Path,
    root: &Path,
    name: &str,
    user: Option<&str>,
) -> Result<String, String> {
    let (bin, dir) = (binary.display().to_string(), root.display().to_string());
    if m != Manager::Launchd
        && [&bin, &dir].iter().any(|p| {
            p.chars()
                .any(|c| c.is_whitespace() || "\"'\\%$;".contains(c))
        })
    {
        return Err(
            "paths with spaces, quotes, `%`, `$` or `;` need hand-written systemd escaping; use a simpler path or edit a unit from systemd/".into(),
        );
    }
    Ok(match m {
        Manager::System => {
            let user = run_as(user)?;
            SYSTEM_UNIT
                .replace("/usr/local/bin/squadd", &bin)
                .replace("/srv/squad/project", &dir)
                .replace("User=squad", &format!("User={user}"))
                .replace("Group=squad\n", "")
        }
        Manager::User => USER_UNIT
            .replace("%h/.cargo/bin/squadd", &bin)
            .replace("%h/project", &dir),
        Manager::Launchd => {
            let logs = home()?.join("Library/Logs").join(format!("{name}.log"));
            LAUNCHD_PLIST
                .replace("/usr/local/bin/squadd", &xml_escape(&bin))
                .replace("/Users/me/project", &xml_escape(&dir))
                .replace(
                    "/Users/me/Library/Logs/squadd.log",
                    &xml_escape(&logs.display().to_string()),
                )
                .replace("dev.squad.squadd", &format!("dev.squad.{name}"))
        }
    })
}

fn commands(m: Manager, path: &Path, name: &str) -> String {
    match m {
        Manager::User => format!(
            "systemctl --user daemon-reload\nsystemctl --user enable --now {name}.service\njournalctl --user -u {name} -f   # logs\n"
        ),
        Manager::System => format!(
            "sudo systemctl daemon-reload\nsudo systemctl enable --now {name}.service\njournalctl -u {name} -f   # logs\n"
        ),
        Manager::Launchd => format!(
            "launchctl bootstrap gui/$(id -u) {}\nlaunchctl print gui/$(id -u)/dev.squad.{name}   # state\n",
            path.display()
        ),
    }
}

/// Runs a `service` subcommand; `install` needs the global `--root` (a
/// service has no current directory to discover its root from).
pub(crate) fn run(root_arg: Option<&Path>, cmd: ServiceCommand) -> u8 {
    match cmd {
        ServiceCommand::Install(a) => match root_arg {
            Some(root) => install(root, a),
            None => super::fail("pass --root DIR: the project root squadd will supervise"),
        },
        ServiceCommand::Uninstall(a) => uninstall(a),
    }
}

fn install(project: &Path, args: InstallArgs) -> u8 {
    if !squad_protocol::IdKind::Agent.matches(&args.name) {
        return super::fail(format!(
            "--name `{}`: use lowercase letters, digits and dashes",
            args.name
        ));
    }
    let m = manager(args.kind);
    let root = match std::fs::canonicalize(project) {
        Ok(r) if r.is_dir() => r,
        Ok(r) => return super::fail(format!("{} is not a directory", r.display())),
        Err(e) => return super::fail(format!("--root {}: {e}", project.display())),
    };
    let binary = match args.binary {
        Some(b) => b,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name("squadd"),
            Err(e) => return super::fail(format!("cannot find squadd ({e}); pass --binary")),
        },
    };
    let binary = match std::fs::canonicalize(&binary) {
        Ok(b) => b,
        Err(e) => {
            return super::fail(format!(
                "squadd binary {}: {e}; pass --binary",
                binary.display()
            ));
        }
    };
    let text = match render(m, &binary, &root, &args.name, args.run_as.as_deref()) {
        Ok(t) => t,
        Err(e) => return super::fail(e),
    };
    if args.print {
        return super::print(&text);
    }
    if args.dir.is_none()
        && let Some(why) = manager_missing(m)
    {
        super::fail(format!("{why}; nothing was written"));
        return exit::PROBLEMS;
    }
    let dir = match args.dir.map_or_else(|| default_dir(m), Ok) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let path = dir.join(file_name(m, &args.name));
    let written = std::fs::create_dir_all(&dir)
        .and_then(|()| squad_protocol::write_atomic_with(&path, text.as_bytes(), Some(0o644)));
    if let Err(e) = written {
        let hint = if m == Manager::System {
            " (system units need root: sudo)"
        } else {
            ""
        };
        return super::fail(format!("cannot write {}: {e}{hint}", path.display()));
    }
    let runs_as = match (m, run_as(args.run_as.as_deref())) {
        (Manager::System, Ok(u)) => format!("runs as user {u} (--run-as to change)\n"),
        _ => String::new(),
    };
    super::print(&format!(
        "wrote {}\nsupervising {}\n{runs_as}to enable it, run:\n{}",
        path.display(),
        root.display(),
        commands(m, &path, &args.name)
    ))
}

fn uninstall(args: UninstallArgs) -> u8 {
    let m = manager(args.kind);
    let dir = match args.dir.clone().map_or_else(|| default_dir(m), Ok) {
        Ok(d) => d,
        Err(e) => return super::fail(e),
    };
    let path = dir.join(file_name(m, &args.name));
    if !path.exists() {
        return super::fail(format!("{} is not installed", path.display()));
    }
    // Stop the service first (only with the real service manager directory).
    let mut notes = String::new();
    if args.dir.is_none() {
        let (prog, stop): (&str, Vec<String>) = match m {
            Manager::User => (
                "systemctl",
                vec![
                    "--user".into(),
                    "disable".into(),
                    "--now".into(),
                    format!("{}.service", args.name),
                ],
            ),
            Manager::System => (
                "systemctl",
                vec![
                    "disable".into(),
                    "--now".into(),
                    format!("{}.service", args.name),
                ],
            ),
            Manager::Launchd => (
                "launchctl",
                vec![
                    "bootout".into(),
                    format!("gui/{}", unsafe_uid()),
                    path.display().to_string(),
                ],
            ),
        };
        match std::process::Command::new(prog).args(&stop).status() {
            Ok(s) if s.success() => {
                notes.push_str(&format!("stopped: {prog} {}\n", stop.join(" ")))
            }
            _ => notes.push_str(&format!(
                "could not run `{prog} {}`; stop it yourself\n",
                stop.join(" ")
            )),
        }
    }
    if let Err(e) = std::fs::remove_file(&path) {
        return super::fail(format!("cannot remove {}: {e}", path.display()));
    }
    if m != Manager::Launchd {
        let reload = if m == Manager::User {
            "systemctl --user daemon-reload"
        } else {
            "sudo systemctl daemon-reload"
        };
        notes.push_str(&format!("then run: {reload}\n"));
    }
    if super::print(&format!("removed {}\n{notes}", path.display())) != exit::OK {
        return exit::FAILURE;
    }
    exit::OK
}

fn unsafe_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}
