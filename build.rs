// Records the git revision for the `inferprobe_build_info` metric. Builds from a source
// tarball (no .git) report "unknown"; INFERPROBE_BUILD_REVISION overrides, e.g. in a Docker build.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=INFERPROBE_BUILD_REVISION");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs");
    let revision = std::env::var("INFERPROBE_BUILD_REVISION").ok().or_else(|| {
        let out = Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    });
    let revision = revision
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BUILD_GIT_REVISION={revision}");
}
