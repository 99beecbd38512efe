//! The environment a sandboxed process gets: what programs need, nothing of the user's own.

/// The host environment a sandboxed process gets, by name: what programs need to run, and
/// nothing that is the user's own (tokens, keys, the agent's variables).
pub const ENV_ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    // Toolchains find themselves by these.
    "PYENV_ROOT",
    "PYENV_VERSION",
    "NVM_DIR",
    "NVM_BIN",
    "VOLTA_HOME",
    "ASDF_DATA_DIR",
    "GOROOT",
    "GOPATH",
    "GOFLAGS",
    // Where `go run` builds and downloads: the very directories the sandbox lets it write
    // (`go_caches`), so what the install-time run fills is what every later start reuses.
    // Never `GOPROXY` (its URL may carry a user and password) nor `GOENV`'s file.
    "GOCACHE",
    "GOMODCACHE",
    "GOTOOLCHAIN",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    // Where the interpreters find modules: their directories are read as the toolchain's.
    "PYTHONPATH",
    "NODE_PATH",
    // Where npm and npx find packages installed globally (read likewise), and whether they
    // may reach the registry: never the config files that can hold a token.
    "npm_config_prefix",
    "NPM_CONFIG_PREFIX",
    "npm_config_offline",
    "NPM_CONFIG_OFFLINE",
];

/// The host environment, scrubbed to [`ENV_ALLOWED`] and the locale's `LC_*`.
pub fn scrubbed_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| ENV_ALLOWED.contains(&k) || k.starts_with("LC_"))
        })
        .collect()
}
