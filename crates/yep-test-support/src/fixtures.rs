//! Fixtures: trees copied from a corpus, git repositories to install from, and edits.

use std::path::Path;

/// `from`'s tree copied to `to`, its files writable whatever they were (a corpus from the
/// read-only shared/).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::write(&target, std::fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

/// `git args` in `dir`, sealed (the machine's `~/.gitconfig` is not read), with a throwaway
/// identity and no signing; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let sealed = crate::Sealed::get();
    let mut command = sealed.command("git", &sealed.home().join(".yep"));
    let out = command
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let said = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
    assert!(out.status.success(), "git {args:?}: {}", said(&out.stderr));
    said(&out.stdout)
}

/// Replace `from` (which must be there) in `file`, once.
pub fn edit(file: &Path, from: &str, to: &str) {
    let src = std::fs::read_to_string(file).unwrap();
    assert!(
        src.contains(from),
        "{} has no {from:?}:\n{src}",
        file.display()
    );
    std::fs::write(file, src.replacen(from, to, 1)).unwrap();
}
