//! `squadctl completions` and `squadctl man`: generated from the clap
//! definitions, so they never drift from the real command line.

use clap::CommandFactory;

/// Shells with completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash: `source <(squadctl completions bash)`.
    Bash,
    /// Zsh: write it as `_squadctl` into a directory of `$fpath`.
    Zsh,
    /// Fish: write it to `~/.config/fish/completions/squadctl.fish`.
    Fish,
}

/// Print a shell completion script.
///
/// Bash: `source <(squadctl completions bash)` (or save it into
/// `/etc/bash_completion.d/`); zsh: `squadctl completions zsh >
/// ~/.zfunc/_squadctl` with `~/.zfunc` in `$fpath`; fish: `squadctl
/// completions fish > ~/.config/fish/completions/squadctl.fish`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Print the man page (roff) of squadctl and its subcommands.
///
/// `squadctl man > squadctl.1 && man ./squadctl.1`; with `--dir DIR`, writes
/// one page per command (`squadctl.1`, `squadctl-task-new.1`, …) into DIR.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into this directory instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// Runs `squadctl completions`.
pub(crate) fn completions(args: CompletionsArgs) -> u8 {
    let mut cmd = super::Cli::command();
    let mut out = Vec::new();
    match args.shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "squadctl", &mut out)
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "squadctl", &mut out)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "squadctl", &mut out)
        }
    }
    super::print(&String::from_utf8_lossy(&out))
}

/// Runs `squadctl man`.
pub(crate) fn man(args: ManArgs) -> u8 {
    let cmd = super::Cli::command();
    if let Some(dir) = args.dir {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return super::fail(format!("{}: {e}", dir.display()));
        }
        return match write_pages(&cmd, &dir, "squadctl") {
            Ok(n) => super::print_human(&format!("wrote {n} pages into {}\n", dir.display())),
            Err(e) => super::fail(e),
        };
    }
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
        return super::fail(e);
    }
    super::print(&String::from_utf8_lossy(&out))
}

/// Writes the page of `cmd` and of each subcommand, named after the path of
/// commands leading to it; returns how many.
fn write_pages(cmd: &clap::Command, dir: &std::path::Path, name: &str) -> Result<usize, String> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone())
        .title(name)
        .render(&mut out)
        .map_err(|e| e.to_string())?;
    let path = dir.join(format!("{name}.1"));
    squad_protocol::write_atomic(&path, &out).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut n = 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        n += write_pages(sub, dir, &format!("{name}-{}", sub.get_name()))?;
    }
    Ok(n)
}
