//! The one active extension panel (zot's panels): what servers open, render and close, and
//! the keys the user sends it. A render or close from anyone but the panel's owner, for
//! another panel, is ignored; Esc and Ctrl+C close it on the host's side and tell the owner.

use super::{ExtensionHost, HostError};
use crate::capability::{MAX_PANEL_LINES, Panel, PanelInput, PanelUpdate};
use serde::Serialize;
use std::time::Duration;

/// The keys a panel takes; any other is sent as `unknown`. `esc` and `ctrl+c` close it.
pub(crate) const PANEL_KEYS: [&str; 14] = [
    "up",
    "down",
    "left",
    "right",
    "enter",
    "tab",
    "backspace",
    "delete",
    "home",
    "end",
    "pageup",
    "pagedown",
    "rune",
    "unknown",
];

/// How long [`ExtensionHost::panel_key`] waits for the owner to render after a key.
pub(crate) const PANEL_RENDER_WAIT: Duration = Duration::from_secs(2);

/// The active panel and the extension that owns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivePanel {
    pub extension: String,
    #[serde(flatten)]
    pub panel: Panel,
    /// The selected rows (lines marked `▸ `, `● ` or U+200B).
    pub selected: Vec<usize>,
}

impl ActivePanel {
    fn new(extension: &str, mut panel: Panel) -> ActivePanel {
        panel.lines.truncate(MAX_PANEL_LINES);
        if panel.title.is_empty() {
            panel.title = extension.to_string();
        }
        ActivePanel {
            extension: extension.to_string(),
            selected: panel.selected(),
            panel,
        }
    }
}

/// Apply a server's panel update; whether anything changed.
pub(crate) fn apply(
    active: &mut Option<ActivePanel>,
    extension: &str,
    update: PanelUpdate,
) -> bool {
    let owns = |a: &ActivePanel, id: &str| a.extension == extension && a.panel.id == id;
    match update {
        PanelUpdate::Open(panel) => {
            *active = Some(ActivePanel::new(extension, panel));
            true
        }
        PanelUpdate::Render(panel) => match active {
            Some(a) if owns(a, &panel.id) => {
                let title = match panel.title.is_empty() {
                    true => a.panel.title.clone(),
                    false => panel.title.clone(),
                };
                *a = ActivePanel::new(extension, Panel { title, ..panel });
                true
            }
            _ => false,
        },
        PanelUpdate::Close { id } => active.take_if(|a| owns(a, &id)).is_some(),
    }
}

impl ExtensionHost {
    /// The active extension panel, if one is open.
    pub fn panel(&self) -> Option<ActivePanel> {
        self.core.events.panel.borrow().clone()
    }

    /// Send `key` to the active panel's owner (`text` holds the character of a `rune`), and
    /// the panel once the owner has rendered (or after `PANEL_RENDER_WAIT`). `esc` and
    /// `ctrl+c` close the panel and tell its owner; an unknown key is sent as `unknown`.
    pub async fn panel_key(
        &self,
        key: &str,
        text: Option<&str>,
    ) -> Result<Option<ActivePanel>, HostError> {
        let Some(active) = self.panel() else {
            return Err(HostError::NoPanel);
        };
        let id = active.panel.id.clone();
        let key = key.to_ascii_lowercase();
        let input = if matches!(key.as_str(), "esc" | "escape" | "ctrl+c" | "ctrl-c") {
            // Closed here first: the owner cannot keep it open.
            self.core
                .events
                .update_panel(|p| p.take_if(|p| p.panel.id == id).is_some());
            PanelInput::Closed { id }
        } else {
            let key = match PANEL_KEYS.contains(&key.as_str()) {
                true => key,
                false => "unknown".to_string(),
            };
            let text = (key == "rune").then(|| text.unwrap_or_default().to_string());
            PanelInput::Key { id, key, text }
        };
        let mut changes = self.core.events.panel.subscribe();
        changes.borrow_and_update();
        let owner = self.find(&active.extension)?;
        owner
            .ext
            .with_running_peer(|p, _| p.panel_input(&input))
            .await?;
        if matches!(input, PanelInput::Key { .. }) {
            let _ = tokio::time::timeout(PANEL_RENDER_WAIT, changes.changed()).await;
        }
        Ok(self.panel())
    }
}
