//! Processes a test started, seen from `/proc`.

/// Whether process `pid` is alive and not a zombie (its state in `/proc/<pid>/stat`, after
/// the name in parentheses, which may itself hold a `)`).
pub fn running(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}
