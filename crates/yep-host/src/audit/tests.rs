//! The writer against real files: the line format, the file's mode, rotation at the cap and
//! the count of what was dropped.

use super::*;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn denial(n: usize) -> Record {
    Record::SandboxDenied {
        extension: format!("ext{n}"),
        target: "example.test:443".into(),
        grant: "net:example.test".into(),
    }
}

#[test]
fn each_record_is_one_owner_only_line_with_its_time_kind_and_extension() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::with_cap(path.clone(), AUDIT_CAP_BYTES, 16);
    log.egress(Egress::new(
        "fetcher",
        "other.test",
        80,
        false,
        "net:other.test:80",
    ));
    log.injection(Injection::new("fetcher", "api.test", "API_TOKEN"));
    log.tool(ToolEntry::new(
        "echo",
        "echo",
        shape(&json!({"text": "hello there"})),
        Outcome::Ok,
        Duration::from_micros(1500),
    ));
    log.flush(Duration::from_secs(5));
    let said = lines(&path);
    assert_eq!(said.len(), 3, "{said:?}");
    for line in &said {
        let ts = line["ts"].as_str().unwrap();
        assert!(ts.ends_with('Z') && ts.len() == 24, "{ts}");
        assert!(line["kind"].is_string() && line["extension"].is_string());
    }
    assert_eq!(said[0]["kind"], "egress");
    assert_eq!(said[0]["allowed"], false);
    assert_eq!(said[1]["secret"], "API_TOKEN");
    assert_eq!(said[2]["args"], json!({"text": "string"}));
    assert_eq!(said[2]["duration_us"], 1500);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn the_trail_rotates_at_its_cap_and_keeps_three_old_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::with_cap(path.clone(), 1024, 4096);
    for n in 0..200 {
        log.record(denial(n));
        // One at a time, so each write sees the size the last one left.
        log.flush(Duration::from_secs(5));
    }
    let kept = files(&path);
    assert_eq!(kept.len(), 1 + ROTATED_FILES, "{kept:?}");
    assert_eq!(kept.last(), Some(&path));
    for file in &kept {
        let size = std::fs::metadata(file).unwrap().len();
        assert!(size <= 1024, "{} is {size} bytes", file.display());
    }
    // Oldest first, and the newest record is last in the current file.
    let newest = lines(&path);
    assert_eq!(newest.last().unwrap()["extension"], "ext199");
    let oldest = lines(&kept[0]);
    let current = lines(&kept[1]);
    let n = |v: &Value| {
        v["extension"].as_str().unwrap()[3..]
            .parse::<u32>()
            .unwrap()
    };
    assert!(n(oldest.last().unwrap()) < n(&current[0]));
}

#[test]
fn records_the_writer_cannot_take_are_dropped_counted_and_told() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::with_cap(path.clone(), AUDIT_CAP_BYTES, 1);
    for n in 0..10_000 {
        log.record(denial(n));
    }
    log.flush(Duration::from_secs(5));
    // One more: the writer tells what it dropped after the batch it writes next.
    let dropped_before = log.dropped();
    log.record(denial(10_000));
    log.flush(Duration::from_secs(5));
    drop(log);
    let said = lines(&path);
    let told: u64 = said
        .iter()
        .filter(|l| l["kind"] == "dropped")
        .map(|l| l["count"].as_u64().unwrap())
        .sum();
    let kept = said
        .iter()
        .filter(|l| l["kind"] == "sandbox_denied")
        .count() as u64;
    assert!(told > 0, "a queue of one dropped nothing of 10,000 records");
    assert!(dropped_before <= told);
    assert_eq!(
        told + kept,
        10_001,
        "every record is either written or counted"
    );
}

#[test]
fn one_writer_serves_every_host_of_a_home_in_a_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let a = AuditLog::open(path.clone());
    let b = AuditLog::open(path.clone());
    assert!(Arc::ptr_eq(&a.inner, &b.inner));
}
