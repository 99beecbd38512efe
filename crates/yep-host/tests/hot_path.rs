//! The call path's own costs, counted: a tool's answer passes from the server's line to the
//! embedder as the text the server wrote (parsed only when something looks), and a warm call
//! allocates a small, fixed number of times whatever the size of the answer. Every allocation
//! in this test binary is counted (its own global allocator), so the tests here run one at a
//! time, under a lock.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

#[path = "all/common/mod.rs"]
mod common;

use common::*;
use serde_json::json;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use yep_host::{ExtensionHost, HostOptions};

/// The system allocator, counting allocations.
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call goes straight to the system allocator; the count is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// One test at a time: the count is the whole process's.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A host with the echo example enabled, in `dir`.
async fn echo_host(dir: &std::path::Path) -> ExtensionHost {
    let opts = HostOptions {
        supervisor: quick_opts(),
        ..HostOptions::default()
    };
    common::echo_host(dir, opts).await.1
}

#[tokio::test]
async fn a_yep_answer_reaches_the_embedder_as_the_text_the_server_wrote() {
    let _alone = ALONE.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let host = echo_host(dir.path()).await;
    let text = "x".repeat(100_000);
    let result = host
        .call_tool("echo", json!({ "text": text }), None, None)
        .await
        .unwrap();
    // Not parsed on the way: the embedder gets the server's own text.
    assert!(!result.is_parsed());
    assert_eq!(
        result.raw_len(),
        Some(text.len() + r#"{"echoed":""}"#.len())
    );
    assert_eq!(result.json(), format!(r#"{{"echoed":"{text}"}}"#));
    // And reads it as a value when it wants one.
    assert_eq!(result["echoed"].as_str().map(str::len), Some(text.len()));
    assert!(result.is_parsed());
    // The same through `run_tool`, the hooks' path, with no post hook to show it to.
    let ran = host.run_tool("echo", json!({ "text": "hi" })).await;
    let result = ran.ok().unwrap();
    assert!(!result.is_parsed());
    assert_eq!(result.json(), r#"{"echoed":"hi"}"#);
    host.shutdown().await;
}

/// Allocations per call, over `calls` warm calls of `echo` with `bytes` of text.
async fn allocations_per_call(host: &ExtensionHost, bytes: usize, calls: u64) -> f64 {
    let args = json!({ "text": "x".repeat(bytes) });
    for _ in 0..50 {
        host.call_tool("echo", args.clone(), None, None)
            .await
            .unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..calls {
        // The arguments are the caller's: their copy is not the call's.
        let args = args.clone();
        drop(host.call_tool("echo", args, None, None).await.unwrap());
    }
    let per_call = (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / calls as f64;
    // Less the arguments' own copy made above: a map, its key and its string.
    per_call - allocations_of_a_copy(&args)
}

/// What one clone of `value` allocates.
fn allocations_of_a_copy(value: &serde_json::Value) -> f64 {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let copy = value.clone();
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    drop(copy);
    (after - before) as f64
}

/// The most a warm call may allocate in the host (all threads, the reader's included): about
/// 12 on the machine this was set on, 15 with the audit trail on (the arguments' shape and the
/// serving extension's name; the trail's writer reuses its buffers). The call path allocates
/// per call: the request line, its id's slot and oneshot, the answer's text; and the
/// runtime's bookkeeping (the tool's name, its call id). Parsing the answer into a value, or a copy of it or of the arguments, pushes
/// it past this.
const MAX_ALLOCATIONS_PER_CALL: f64 = 16.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_call_allocates_a_few_times_whatever_the_size_of_its_answer() {
    let _alone = ALONE.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let host = echo_host(dir.path()).await;
    let small = allocations_per_call(&host, 200, 2_000).await;
    let big = allocations_per_call(&host, 256 * 1024, 200).await;
    eprintln!("allocations per call: {small:.1} at 200 B, {big:.1} at 256 KiB");
    assert!(
        small <= MAX_ALLOCATIONS_PER_CALL,
        "{small:.1} allocations per 200 B call"
    );
    // A big answer costs no more allocations than a small one (its text is one).
    assert!(
        big <= small + 4.0,
        "{big:.1} allocations per 256 KiB call against {small:.1} per 200 B call"
    );
    host.shutdown().await;
}
