//! The store's progress, drawn on stderr with indicatif: a bar for a download, a spinner for a
//! step. Only on a terminal; anywhere else the events are dropped and nothing is drawn.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;
use yep_store::text::escape;
use yep_store::{Progress, ProgressEvent};

/// A [`Progress`] that draws on stderr when it is a terminal.
pub fn bars() -> Progress {
    if !std::io::stderr().is_terminal() {
        return Progress::default();
    }
    let current = Bar(Mutex::new(None));
    Progress::new(move |event| current.show(event))
}

/// The bar or spinner on screen; cleared when the install or update is done with it.
struct Bar(Mutex<Option<indicatif::ProgressBar>>);

impl Bar {
    fn show(&self, event: ProgressEvent) {
        let mut current = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            ProgressEvent::Step { label } => {
                let bar = indicatif::ProgressBar::new_spinner();
                bar.set_message(escape(&label).into_owned());
                bar.enable_steady_tick(Duration::from_millis(100));
                replace(&mut current, bar);
            }
            ProgressEvent::Download { label, total } => {
                let bar = match total {
                    Some(n) => indicatif::ProgressBar::new(n),
                    None => indicatif::ProgressBar::new_spinner(),
                };
                let style =
                    indicatif::ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes}")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
                bar.set_style(style);
                bar.set_message(escape(&label).into_owned());
                replace(&mut current, bar);
            }
            ProgressEvent::Bytes { received } => {
                if let Some(bar) = current.as_ref() {
                    bar.set_position(received);
                }
            }
            ProgressEvent::Finished => {
                if let Some(bar) = current.take() {
                    bar.finish_and_clear();
                }
            }
            _ => {}
        }
    }
}

fn replace(current: &mut Option<indicatif::ProgressBar>, bar: indicatif::ProgressBar) {
    if let Some(old) = current.replace(bar) {
        old.finish_and_clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        let current = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = current.take() {
            bar.finish_and_clear();
        }
    }
}
