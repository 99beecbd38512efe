//! The one decision: given what was approved and a candidate, does it run, is the user asked,
//! or is it refused. Install, update, launch, an MCP server's start, `trust` and `grant` all
//! decide here; what they do with the answer (show a screen, clamp, withhold) is theirs.

use super::{Approval, diff};
use crate::summary::ContributionDiff;

/// When the decision is made: it says who could be asked and what may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// `yep install` (an installed package installed again is judged against its approval).
    Install,
    /// `yep update`; `locked` (`--locked`) refuses any change to the lock.
    Update { locked: bool },
    /// A session starts it: nobody is asked, so a change is refused (and what was approved
    /// runs instead, where the caller can hold it to that).
    Launch,
    /// `yep trust`, `yep mcp add`: the user came to approve it as it is now, so any change
    /// is shown and asked, a narrowing too.
    Trust,
    /// `yep grant`: the user widens what it may reach.
    Grant,
}

/// What [`decide`] answered.
#[derive(Debug, Clone)]
pub enum Decision {
    /// It is what was approved, or it only narrows it: it goes ahead without asking.
    Run,
    /// The user must say yes first: shown the diff, or the whole summary when nothing was
    /// approved before (`None`).
    Ask(Option<ContributionDiff>),
    /// It may not go ahead.
    Refuse(Refusal),
}

/// Why a candidate was refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// `--locked`, and it would change the lock.
    Locked,
    /// Nothing was ever approved for it, and nobody can be asked now.
    NotApproved,
    /// It changed since it was approved, and nobody can be asked now: the change.
    Changed(ContributionDiff),
}

/// Decide whether `candidate` runs, given what was `pinned` (none when nothing was approved,
/// or when a package from another origin takes the name), at `moment`.
pub fn decide(pinned: Option<&Approval>, candidate: &Approval, moment: Moment) -> Decision {
    let locked = moment == Moment::Update { locked: true };
    let Some(pinned) = pinned else {
        return match moment {
            _ if locked => Decision::Refuse(Refusal::Locked),
            Moment::Launch => Decision::Refuse(Refusal::NotApproved),
            _ => Decision::Ask(None),
        };
    };
    if pinned.same_as(candidate) {
        return Decision::Run;
    }
    if locked {
        return Decision::Refuse(Refusal::Locked);
    }
    let d = diff(pinned, candidate);
    match moment {
        Moment::Launch => Decision::Refuse(Refusal::Changed(d)),
        Moment::Trust => Decision::Ask(Some(d)),
        _ if d.widened => Decision::Ask(Some(d)),
        _ => Decision::Run,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::PackageKind;
    use crate::grants::SandboxGrants;
    use crate::manifest::Manifest;

    fn manifest(tools: &[&str]) -> Manifest {
        let tools: Vec<serde_json::Value> = tools
            .iter()
            .map(|t| serde_json::json!({"name": t, "description": "d", "inputSchema": {"type": "object"}}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "name": "notes",
            "version": "1.0.0",
            "yolop": {"capabilityServer": {"command": "notes"}, "tools": tools},
        }))
        .unwrap()
    }

    fn package(tools: &[&str], content: &str) -> Approval {
        Approval {
            content: Some(content.into()),
            ..Approval::of_manifest(PackageKind::Yep, manifest(tools))
        }
    }

    #[test]
    fn the_same_approval_runs_at_every_moment() {
        let a = package(&["read"], "sha256:1");
        for moment in [
            Moment::Install,
            Moment::Update { locked: true },
            Moment::Launch,
            Moment::Trust,
            Moment::Grant,
        ] {
            assert!(
                matches!(decide(Some(&a), &a, moment), Decision::Run),
                "{moment:?}"
            );
        }
    }

    #[test]
    fn nothing_approved_is_asked_about_and_refused_where_nobody_can_be_asked() {
        let a = package(&["read"], "sha256:1");
        assert!(matches!(
            decide(None, &a, Moment::Install),
            Decision::Ask(None)
        ));
        assert!(matches!(
            decide(None, &a, Moment::Trust),
            Decision::Ask(None)
        ));
        assert!(matches!(
            decide(None, &a, Moment::Launch),
            Decision::Refuse(Refusal::NotApproved)
        ));
        assert!(matches!(
            decide(None, &a, Moment::Update { locked: true }),
            Decision::Refuse(Refusal::Locked)
        ));
    }

    #[test]
    fn a_new_tool_widens_and_asks_a_removed_one_runs_and_locked_refuses_both() {
        let old = package(&["read", "write"], "sha256:1");
        let more = package(&["read", "write", "delete"], "sha256:2");
        let less = package(&["read"], "sha256:3");
        match decide(Some(&old), &more, Moment::Update { locked: false }) {
            Decision::Ask(Some(d)) => {
                assert!(d.widened);
                assert!(
                    d.lines.iter().any(|l| l.starts_with("+ tool delete")),
                    "{d:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decide(Some(&old), &less, Moment::Update { locked: false }),
            Decision::Run
        ));
        for new in [&more, &less] {
            assert!(matches!(
                decide(Some(&old), new, Moment::Update { locked: true }),
                Decision::Refuse(Refusal::Locked)
            ));
        }
        // The same approval from other bytes changes the lock, so `--locked` refuses it.
        let rebuilt = package(&["read", "write"], "sha256:9");
        assert!(matches!(
            decide(Some(&old), &rebuilt, Moment::Update { locked: true }),
            Decision::Refuse(Refusal::Locked)
        ));
        assert!(matches!(
            decide(Some(&old), &rebuilt, Moment::Install),
            Decision::Run
        ));
    }

    #[test]
    fn at_launch_any_change_is_refused_with_what_changed() {
        let old = package(&["read"], "sha256:1");
        let mut edited = package(&["read", "write"], "sha256:1");
        edited.content = None;
        match decide(Some(&old), &edited, Moment::Launch) {
            Decision::Refuse(Refusal::Changed(d)) => assert!(d.widened),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_grant_asks_only_for_what_the_package_does_not_run_with_already() {
        let mut own = manifest(&["read"]);
        own.sandbox = SandboxGrants::parse("net:example.com").unwrap();
        let pinned = Approval::of_manifest(PackageKind::Yep, own);
        let same = pinned
            .clone()
            .with_granted(SandboxGrants::parse("net:example.com").unwrap());
        assert!(matches!(
            decide(Some(&pinned), &same, Moment::Grant),
            Decision::Run
        ));
        let wider = pinned
            .clone()
            .with_granted(SandboxGrants::parse("read:/srv/data").unwrap());
        match decide(Some(&pinned), &wider, Moment::Grant) {
            Decision::Ask(Some(d)) => {
                assert_eq!(d.lines, ["+ sandbox read /srv/data"], "{d:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_mcp_server_widens_by_a_new_or_changed_tool_and_another_definition() {
        use crate::mcp::McpPin;
        let pin = |spec: &str, tools: &[(&str, &str)]| {
            Approval::of_mcp(McpPin {
                name: "fs".into(),
                workspace: None,
                spec: spec.into(),
                code: None,
                install: None,
                as_written: false,
                tools: tools
                    .iter()
                    .map(|(n, h)| (n.to_string(), h.to_string()))
                    .collect(),
                skills: Default::default(),
            })
        };
        let old = pin("s1", &[("read", "h1"), ("list", "h2")]);
        let fewer = pin("s1", &[("read", "h1")]);
        assert!(matches!(
            decide(Some(&old), &fewer, Moment::Install),
            Decision::Run
        ));
        // At `yep trust` the user came to review it: a narrowing is shown and asked too.
        match decide(Some(&old), &fewer, Moment::Trust) {
            Decision::Ask(Some(d)) => {
                assert!(!d.widened);
                assert_eq!(d.lines, ["- tool list (no longer listed)"]);
            }
            other => panic!("{other:?}"),
        }
        let changed = pin("s1", &[("read", "h9"), ("list", "h2")]);
        match decide(Some(&old), &changed, Moment::Trust) {
            Decision::Ask(Some(d)) => assert_eq!(
                d.lines,
                ["~ tool read (description, schema or hints changed)"]
            ),
            other => panic!("{other:?}"),
        }
        let moved = pin("s2", &[("read", "h1"), ("list", "h2")]);
        assert!(matches!(
            decide(Some(&old), &moved, Moment::Launch),
            Decision::Refuse(Refusal::Changed(_))
        ));
    }
}
