//! Package builders: a package directory as an author leaves it, written file by file.

use std::path::{Path, PathBuf};

/// A package directory being written: `Package::at(dir).manifest(&json).executable("bin/server",
/// script)`.
pub struct Package {
    dir: PathBuf,
}

impl Package {
    /// A package at `dir`, made if missing.
    pub fn at(dir: impl Into<PathBuf>) -> Package {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).unwrap();
        Package { dir }
    }

    /// Its `plugin.json`, pretty-printed as an author writes it.
    pub fn manifest(self, manifest: &serde_json::Value) -> Package {
        self.file(
            "plugin.json",
            &serde_json::to_string_pretty(manifest).unwrap(),
        )
    }

    /// `path` (relative to the package) holding `contents`, its directories made.
    pub fn file(self, path: &str, contents: &str) -> Package {
        let file = self.dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, contents).unwrap();
        self
    }

    /// [`Package::file`], executable.
    pub fn executable(self, path: &str, contents: &str) -> Package {
        use std::os::unix::fs::PermissionsExt;
        let me = self.file(path, contents);
        let file = me.dir.join(path);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        me
    }

    /// The Python SDK vendored beside its server in `bin/`, as `yep new` does (a sandboxed
    /// server reads its own package only).
    pub fn python_sdk(self) -> Package {
        let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python/yep_sdk.py");
        self.file("bin/yep_sdk.py", &std::fs::read_to_string(sdk).unwrap())
    }

    /// Where it is.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where it is, owned.
    pub fn into_dir(self) -> PathBuf {
        self.dir
    }
}
