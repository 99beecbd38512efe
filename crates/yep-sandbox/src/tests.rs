use super::*;
use std::path::{Path, PathBuf};

#[test]
fn a_temp_dir_left_by_a_killed_process_with_this_pid_is_passed_over() {
    // What a killed process of an earlier run with this pid left behind: the next names.
    // SAFETY: getuid cannot fail and touches no memory.
    let base = std::env::temp_dir().join(format!("yep-{}", unsafe { libc::getuid() }));
    let next = TMP_NEXT.load(std::sync::atomic::Ordering::Relaxed);
    let stale: Vec<PathBuf> = (next..next + 8)
        .map(|n| base.join(format!("left-over-{}-{n}", std::process::id())))
        .collect();
    for dir in &stale {
        std::fs::create_dir_all(dir).unwrap();
    }
    let tmp = TmpDir::new("left-over").unwrap();
    assert!(tmp.path().is_dir() && !stale.contains(&tmp.path().to_path_buf()));
    for dir in &stale {
        let _ = std::fs::remove_dir(dir);
    }
}

fn place<'a>(args: &'a [String], tmp: &'a Path) -> Place<'a> {
    Place {
        program: Path::new("/bin/sh"),
        args,
        package_dir: None,
        data_dir: None,
        workspace: None,
        tmp_dir: tmp,
        files: None,
    }
}

#[test]
fn a_workspace_holding_the_home_yeps_home_or_credentials_is_withheld() {
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let project = tempfile::tempdir().unwrap();
    for held in [
        Path::new("/"),
        home.as_path(),
        home.parent().unwrap_or(Path::new("/")),
        &home.join(".ssh"),
        &home.join(".config"),
        &home.join(".aws/sso"),
    ] {
        assert!(workspace_withheld(held).is_some(), "{}", held.display());
    }
    assert_eq!(workspace_withheld(project.path()), None);
    // A yep home the host serves: a workspace in it is closed, one that holds it is
    // opened beside it, a link to it included.
    let root = project.path().canonicalize().unwrap();
    for dir in ["home/data/x", "src/deep", "other"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("README"), "").unwrap();
    // A link at the top is judged by where it leads; one deeper needs nothing (Landlock
    // judges a path by where it resolves, and the home is beneath no rule).
    std::os::unix::fs::symlink(root.join("home"), root.join("to-home")).unwrap();
    protect(&root.join("home"));
    assert!(matches!(
        workspace_access(&root.join("home/data/x")),
        WorkspaceAccess::Nothing(_)
    ));
    let WorkspaceAccess::Parts(mut parts, why) = workspace_access(&root) else {
        panic!("{:?}", workspace_access(&root));
    };
    parts.sort();
    assert_eq!(
        parts,
        [root.join("README"), root.join("other"), root.join("src")],
        "{why}"
    );
    assert!(workspace_withheld(&root).is_some());
    assert_eq!(
        workspace_access(&root.join("other")),
        WorkspaceAccess::Whole(root.join("other"))
    );
    // The profile keeps it out, says so, and a write grant does not bring it back.
    let args = Vec::new();
    let tmp = std::env::temp_dir();
    let mut at_home = place(&args, &tmp);
    at_home.workspace = Some(&home);
    let profile = Profile::default_for(&at_home).granted(&yep_store::manifest::SandboxGrants {
        workspace: Some("write".into()),
        ..Default::default()
    });
    assert!(
        !profile
            .read
            .iter()
            .chain(&profile.write)
            .any(|p| p == &home),
        "{profile:?}"
    );
    assert!(profile.workspace.is_empty() && profile.withheld.is_some());
    assert!(
        profile
            .said(Some(&home))
            .contains("not the workspace, which is your home")
    );
}

#[test]
fn a_command_line_naming_the_root_or_the_home_opens_neither() {
    let home = std::env::var("HOME").unwrap();
    let tmp = std::env::temp_dir();
    let args = vec!["/".to_string(), home.clone(), "/usr/bin/env".to_string()];
    let profile = Profile::default_for(&place(&args, &tmp));
    assert!(
        !profile.read.iter().any(|p| p == Path::new("/")),
        "{profile:?}"
    );
    assert!(
        !profile.read.iter().any(|p| p == Path::new(&home)),
        "{profile:?}"
    );
    assert!(profile.read.iter().any(|p| p == Path::new("/usr/bin/env")));
    assert!(profile.read.iter().all(|p| !holds_home(p)), "{profile:?}");
}

/// `file` made, with its directories.
fn touch(file: &Path) {
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, "").unwrap();
}

#[test]
fn a_program_in_a_node_modules_tree_reads_the_whole_tree_through_its_link() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let tree = root.join("servers/node_modules");
    let entry = tree.join("@mcp/server-x/dist/index.js");
    touch(&entry);
    touch(&tree.join("@mcp/sdk/server/stdio.js"));
    touch(&root.join("servers/secret.txt"));
    let bin = tree.join(".bin/mcp-server-x");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("../@mcp/server-x/dist/index.js", &bin).unwrap();
    let reads = |program: &Path, args: &[String]| {
        let mut at = place(args, &root);
        at.program = program;
        Profile::default_for(&at).read
    };
    // Started by its bin, or by Node with the entry on its command line.
    for read in [
        reads(&bin, &[]),
        reads(Path::new("/usr/bin/node"), &[entry.display().to_string()]),
    ] {
        assert!(read.contains(&tree), "{read:?}");
        assert!(!read.iter().any(|r| r == &root.join("servers")), "{read:?}");
    }
    // A pnpm store nests in the tree: the outermost is read.
    let nested = tree.join(".pnpm/a@1.0.0/node_modules/a/index.js");
    touch(&nested);
    assert_eq!(install_roots(&nested, None), std::slice::from_ref(&tree));
    // A Go binary (or any program beside its files) reads its own directory.
    let go = root.join("tools/srv");
    touch(&go);
    assert!(reads(&go, &[]).contains(&root.join("tools")));
}

#[test]
fn a_program_in_a_venv_reads_the_venv_and_the_python_it_was_made_from() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    // A Python of uv's, and a uv tool's venv made from it, linked from `~/.local/bin`.
    let python = home.join(".local/share/uv/python/cpython-3.12/bin/python3");
    touch(&python);
    let venv = home.join(".local/share/uv/tools/mcp-server-time");
    let cfg = format!(
        "home = {}\nversion = 3.12\n",
        python.parent().unwrap().display()
    );
    touch(&venv.join("pyvenv.cfg"));
    std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
    touch(&venv.join("bin/mcp-server-time"));
    let link = home.join(".local/bin/mcp-server-time");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(venv.join("bin/mcp-server-time"), &link).unwrap();
    let base = home.join(".local/share/uv/python/cpython-3.12");
    assert_eq!(
        install_roots(&link, Some(&home)),
        [base.clone(), venv.clone()]
    );
    // A `home` that holds no Python names nothing.
    std::fs::write(venv.join("pyvenv.cfg"), "home = /nowhere/bin\n").unwrap();
    assert_eq!(
        install_roots(&link, Some(&home)),
        std::slice::from_ref(&venv)
    );
    // Outside the home as well: a virtualenv beside a project.
    let outside = root.join("srv/.venv");
    touch(&outside.join("pyvenv.cfg"));
    touch(&outside.join("lib/python3.12/site-packages/srv/__main__.py"));
    assert_eq!(
        install_roots(
            &outside.join("lib/python3.12/site-packages/srv/__main__.py"),
            None
        ),
        [outside]
    );
}

#[test]
fn an_install_root_is_never_the_home_credentials_or_a_cargo_homes_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    // A `pyvenv.cfg` planted in the home, or one naming a "Python" among credentials.
    touch(&home.join("pyvenv.cfg"));
    touch(&home.join("bin/srv"));
    assert_eq!(
        install_roots(&home.join("bin/srv"), Some(&home)),
        Vec::<PathBuf>::new()
    );
    std::fs::remove_file(home.join("pyvenv.cfg")).unwrap();
    touch(&home.join(".aws/bin/python3"));
    let venv = root.join("venv");
    touch(&venv.join("bin/srv"));
    touch(&venv.join("pyvenv.cfg"));
    let cfg = format!("home = {}\n", home.join(".aws/bin").display());
    std::fs::write(venv.join("pyvenv.cfg"), cfg).unwrap();
    assert_eq!(
        install_roots(&venv.join("bin/srv"), Some(&home)),
        std::slice::from_ref(&venv)
    );
    // A tree of modules inside a credentials directory.
    let inside = home.join(".ssh/node_modules/x/index.js");
    touch(&inside);
    assert_eq!(install_roots(&inside, Some(&home)), Vec::<PathBuf>::new());
    // `cargo install`'s root gives its `bin`, never the cargo home's credentials.
    for marker in ["credentials.toml", ".crates.toml"] {
        let cargo = root.join(format!("cargo-{marker}"));
        touch(&cargo.join(marker));
        touch(&cargo.join("bin/srv"));
        assert_eq!(prefix(&cargo.join("bin/srv")), Some(cargo.join("bin")));
        let mut at = place(&[], &root);
        let program = cargo.join("bin/srv");
        at.program = &program;
        let read = Profile::default_for(&at).read;
        assert!(!read.contains(&cargo), "{read:?}");
        assert!(read.contains(&cargo.join("bin")), "{read:?}");
    }
}

#[test]
fn of_proc_only_the_systems_entries_are_read_never_a_process() {
    let entries = proc_entries();
    assert!(entries.iter().any(|p| p.ends_with("cpuinfo")));
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(
            !name.bytes().all(|b| b.is_ascii_digit()) && name != "self" && name != "thread-self",
            "{}",
            p.display()
        );
    }
}

#[test]
fn grants_widen_by_what_they_name_and_never_lower_a_limit() {
    let tmp = std::env::temp_dir();
    let base = Profile::default_for(&place(&[], &tmp));
    let grants = yep_store::manifest::SandboxGrants {
        workspace: Some("write".into()),
        net: vec!["127.0.0.1:8080".into()],
        limits: Some(yep_store::manifest::LimitGrants {
            processes: Some(8),
            open_files: Some(1 << 16),
            address_space_mib: None,
        }),
        ..Default::default()
    };
    let ws = Path::new("/srv/ws");
    let mut at = place(&[], &tmp);
    at.workspace = Some(ws);
    let granted = Profile::default_for(&at).granted(&grants);
    assert!(granted.write.iter().any(|p| p == ws));
    assert_eq!(granted.net, Net::Ports(vec![8080]));
    assert_eq!(granted.limits.processes, base.limits.processes);
    assert_eq!(granted.limits.open_files, 1 << 16);
    let any = yep_store::manifest::SandboxGrants {
        net: vec!["*".into()],
        ..Default::default()
    };
    assert_eq!(base.granted(&any).net, Net::Any);
}

#[test]
fn modes_read_as_written_and_nothing_else() {
    for mode in [Mode::Required, Mode::BestEffort, Mode::Off] {
        assert_eq!(mode.to_string().parse::<Mode>().unwrap(), mode);
    }
    let err = "requried".parse::<Mode>().unwrap_err().to_string();
    assert!(err.contains("required, best-effort, off"), "{err}");
}

/// A workspace (its real path) with every protected path present: a directory holding a file
/// `x`, or a file.
fn protected_workspace(root: &Path) -> PathBuf {
    let ws = root.join("ws");
    for name in PROTECTED_WORKSPACE {
        let path = ws.join(name);
        match name.contains(".git/") || name.starts_with(".git") {
            true if name.ends_with("hooks") => touch(&path.join("pre-commit")),
            true => touch(&path),
            false if [".claude", ".codex", ".cursor", ".vscode", ".zot"].contains(name) => {
                touch(&path.join("x"))
            }
            false => touch(&path),
        }
    }
    ws.canonicalize().unwrap()
}

fn writable(ws: &Path, grants: &yep_store::manifest::SandboxGrants) -> Profile {
    // Its private temp dir, beside the workspace (the system's would hold it).
    let tmp = ws.with_file_name("private-tmp");
    let mut at = place(&[], &tmp);
    at.workspace = Some(ws);
    Profile::default_for(&at).granted(grants)
}

fn workspace_write() -> yep_store::manifest::SandboxGrants {
    yep_store::manifest::SandboxGrants {
        workspace: Some("write".into()),
        ..Default::default()
    }
}

#[test]
fn every_protected_path_present_is_read_only_to_a_server_that_writes_the_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = protected_workspace(tmp.path());
    let profile = writable(&ws, &workspace_write());
    let want: Vec<PathBuf> = PROTECTED_WORKSPACE.iter().map(|n| ws.join(n)).collect();
    let mut got: Vec<PathBuf> = profile.read_only().into_iter().cloned().collect();
    got.sort();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(got, want_sorted);
    assert!(
        profile
            .said(Some(&ws))
            .contains("write the workspace but .bash_login, .bash_logout, .bash_profile and 15 more protected paths (docs/sandbox.md), its data"),
        "{}",
        profile.said(Some(&ws))
    );
    // A server that only reads the workspace has them protected by Landlock alone: nothing
    // is mounted for it.
    let reader = writable(&ws, &Default::default());
    assert!(reader.read_only().is_empty(), "{:?}", reader.read_only());
}

#[test]
fn a_zot_extensions_own_files_are_not_protected_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = protected_workspace(tmp.path());
    let private = ws.with_file_name("private-tmp");
    let own = ws.join(".zot");
    let mut at = place(&[], &private);
    at.workspace = Some(&ws);
    at.files = Some(&own);
    let zot = Profile::default_for(&at).granted(&workspace_write());
    assert_eq!(zot.files, std::slice::from_ref(&own));
    let read_only = zot.read_only();
    assert!(!read_only.contains(&&own), "{read_only:?}");
    assert_eq!(
        read_only.len(),
        PROTECTED_WORKSPACE.len() - 1,
        "{read_only:?}"
    );
    // Any other server that writes the workspace finds it read-only.
    assert!(
        writable(&ws, &workspace_write())
            .read_only()
            .contains(&&own)
    );
}

#[test]
fn a_write_grant_naming_a_protected_path_lifts_that_one_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = protected_workspace(tmp.path());
    let mut grants = workspace_write();
    grants.write = vec![ws.join(".vscode").display().to_string()];
    let profile = writable(&ws, &grants);
    let read_only = profile.read_only();
    assert!(!read_only.contains(&&ws.join(".vscode")), "{read_only:?}");
    assert_eq!(
        read_only.len(),
        PROTECTED_WORKSPACE.len() - 1,
        "{read_only:?}"
    );
    // Granting the workspace itself, or `.git`, lifts nothing.
    grants.write = vec![
        ws.display().to_string(),
        ws.join(".git").display().to_string(),
    ];
    let profile = writable(&ws, &grants);
    assert_eq!(profile.read_only().len(), PROTECTED_WORKSPACE.len());
    // A denial of a protected path proposes the grant that lifts it.
    let tail = vec![format!(
        "sh: 1: cannot create {}/x: Read-only file system",
        ws.join(".claude").display()
    )];
    assert_eq!(
        profile.suggest_grant(Some(&ws), &tail),
        Some(format!("write:{}", ws.join(".claude").display()))
    );
}

#[test]
fn a_protected_link_is_judged_by_where_it_leads_and_nothing_outside_is_protected() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    touch(&ws.join("sub/cursor/x"));
    std::os::unix::fs::symlink(&outside, ws.join(".vscode")).unwrap();
    std::os::unix::fs::symlink("sub/cursor", ws.join(".cursor")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", ws.join(".envrc")).unwrap();
    std::os::unix::fs::symlink(&ws, ws.join(".claude")).unwrap();
    assert_eq!(protected_paths(&ws), [ws.join("sub/cursor")]);
}

#[test]
fn a_git_file_protects_the_hooks_and_config_it_names_only_inside_the_workspace() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let ws = root.join("ws");
    // A worktree whose git dir is inside the workspace, with a common dir beside it.
    let common = ws.join("main-git");
    let gitdir = common.join("worktrees/wt");
    touch(&common.join("hooks/pre-commit"));
    touch(&common.join("config"));
    touch(&gitdir.join("config"));
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    std::fs::write(ws.join(".git"), "gitdir: main-git/worktrees/wt\n").unwrap();
    assert_eq!(
        protected_paths(&ws),
        [
            common.join("config"),
            common.join("hooks"),
            gitdir.join("config")
        ]
    );
    // One whose git dir is outside: nothing of it.
    let elsewhere = root.join("elsewhere.git");
    touch(&elsewhere.join("hooks/pre-commit"));
    touch(&elsewhere.join("config"));
    let ws2 = root.join("ws2");
    std::fs::create_dir_all(&ws2).unwrap();
    std::fs::write(
        ws2.join(".git"),
        format!("gitdir: {}\n", elsewhere.display()),
    )
    .unwrap();
    assert!(
        protected_paths(&ws2).is_empty(),
        "{:?}",
        protected_paths(&ws2)
    );
}

#[test]
fn without_namespaces_protected_files_are_missing_best_effort_and_refused_required() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = protected_workspace(tmp.path());
    let support = Support {
        namespaces: false,
        ..Support::current()
    };
    let profile = writable(&ws, &workspace_write());
    let prepared = crate::enforce::prepare_on(&profile, Mode::BestEffort, support)
        .unwrap()
        .unwrap();
    assert!(prepared.missing.contains(&NO_PROTECTED_FILES));
    assert!(!prepared.protects_files());
    let refused = crate::enforce::prepare_on(&profile, Mode::Required, support)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(refused.contains(NO_PROTECTED_FILES), "{refused}");
    // A server that writes none of them needs no namespace.
    let reader = writable(&ws, &Default::default());
    let prepared = crate::enforce::prepare_on(&reader, Mode::BestEffort, support)
        .unwrap()
        .unwrap();
    assert!(!prepared.missing.contains(&NO_PROTECTED_FILES));
}

/// In a forked child: `mounts` applied, then `path` opened for writing; the child's exit code
/// is 0 when the open failed with `EROFS`, 2 when it succeeded, 3 when the mounts failed.
fn write_in_child(mounts: &crate::Mounts, path: &std::ffi::CStr) -> i32 {
    // SAFETY: the child makes system calls on what was built before the fork, and ends with
    // `_exit`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match mounts.apply() {
            // SAFETY: open(2) of a NUL-terminated path.
            Ok(()) => match unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_APPEND) } {
                fd if fd >= 0 => 2,
                _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::EROFS) => 0,
                _ => 1,
            },
            Err(_) => 3,
        };
        // SAFETY: ends the forked child at once.
        unsafe { libc::_exit(code) }
    }
    let mut status = 0;
    // SAFETY: waitpid writes our own child's status into `status`.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WEXITSTATUS(status)
}

#[test]
fn a_protected_file_is_read_only_in_the_child_alone_as_root_or_not() {
    if !Support::current().namespaces {
        eprintln!("skipped: this system makes no user namespaces");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap();
    touch(&ws.join(".envrc"));
    let mounts = crate::Mounts::new(&protected_paths(&ws)).unwrap();
    let envrc = std::ffi::CString::new(ws.join(".envrc").display().to_string()).unwrap();
    assert_eq!(write_in_child(&mounts, &envrc), 0);
    // The host's view is unchanged.
    std::fs::write(ws.join(".envrc"), "still mine\n").unwrap();
}
