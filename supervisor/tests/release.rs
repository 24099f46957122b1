//! Prebuilt binaries stay one command away (issue 40 item 1): the release
//! workflow builds with the `dist` profile and names each archive the way
//! `cargo binstall` looks for it (`[package.metadata.binstall]`), and the
//! default `release` profile stays tuned for install time.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The value of `key = "…"` in a TOML text (first occurrence).
fn toml_value<'a>(text: &'a str, key: &str) -> &'a str {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no `{key}` in the manifest"));
    line.split_once('=').unwrap().1.trim().trim_matches('"')
}

/// The lines of a `[name]` table.
fn table<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != format!("[{name}]"))
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .collect()
}

#[test]
fn binstall_finds_the_archives_the_release_workflow_uploads() {
    let manifest = read("Cargo.toml");
    let workflow = read("../.github/workflows/release.yml");
    let (version, target) = ("1.2.3", "x86_64-unknown-linux-gnu");
    let expand = |template: &str| {
        template
            .replace("{ repo }", "REPO")
            .replace("{ version }", version)
            .replace("{ target }", target)
            .replace("{ bin }", "squadd")
            .replace("{ binary-ext }", "")
    };
    let url = expand(toml_value(&manifest, "pkg-url"));
    let bin = expand(toml_value(&manifest, "bin-dir"));
    assert_eq!(toml_value(&manifest, "pkg-fmt"), "tgz");
    // What the workflow names the directory and its archive, expanded the same way.
    let name = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("NAME=\""))
        .expect("the workflow names the archive")
        .trim_end_matches('"')
        .replace("${VERSION}", version)
        .replace("${TARGET}", target);
    assert_eq!(
        url,
        format!("REPO/releases/download/v{version}/{name}.tar.gz")
    );
    assert_eq!(bin, format!("{name}/squadd"));
    assert!(
        workflow.contains("cp \"target/$TARGET/dist/squadd\" \"target/$TARGET/dist/squadctl\"")
    );
    assert!(workflow.contains("--profile dist"), "{workflow}");
    assert!(workflow.contains(r#"test "v$VERSION" = "$GITHUB_REF_NAME""#));
}

#[test]
fn release_builds_for_install_time_and_dist_for_size() {
    let manifest = read("../Cargo.toml");
    let release = table(&manifest, "profile.release");
    assert!(release.contains(&"lto = false"), "{release:?}");
    assert!(release.contains(&"codegen-units = 16"), "{release:?}");
    let dist = table(&manifest, "profile.dist");
    for line in [
        "inherits = \"release\"",
        "lto = \"fat\"",
        "codegen-units = 1",
    ] {
        assert!(dist.contains(&line), "{line}: {dist:?}");
    }
    let readme = read("../README.md");
    assert!(
        readme.contains("cargo binstall squad-supervisor"),
        "README says how to get the prebuilt binaries"
    );
    assert!(
        readme.contains("--profile dist"),
        "README names the dist profile"
    );
}
