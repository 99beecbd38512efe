//! Asking for an extension's required config fields nobody set, and storing the answers.

use super::{DynAskSink, HostError, off_thread};
use crate::capability::Question;
use crate::manifest::Manifest;
use crate::store::Home;

/// How many times one required field is asked for before it is left unset.
pub(crate) const SETUP_ATTEMPTS: usize = 3;

/// Ask through `sink` for each required config field of `name` nobody set, by kind (secret:
/// masked, `enum`: a selector, else free text), and store the answers. An answer its field
/// refuses is asked again, the prompt saying why, up to `SETUP_ATTEMPTS` times; a cancelled
/// or empty answer leaves the field unset. Returns the fields still unset (`setup_incomplete`);
/// without a sink, every missing one.
pub async fn setup(
    home: &Home,
    name: &str,
    manifest: &Manifest,
    sink: Option<&dyn DynAskSink>,
) -> Result<Vec<String>, HostError> {
    match sink {
        Some(sink) => setup_asking(home, name, manifest, |q| sink.ask_dyn(name, q)).await,
        None => {
            let missing = crate::store::config::missing_required(home, manifest)?;
            Ok(missing.into_iter().map(|f| f.name).collect())
        }
    }
}

/// [`setup`], asking through `ask`.
pub(super) async fn setup_asking<F>(
    home: &Home,
    name: &str,
    manifest: &Manifest,
    ask: impl Fn(Question) -> F,
) -> Result<Vec<String>, HostError>
where
    F: std::future::Future<Output = crate::capability::Answer>,
{
    use crate::store::config;
    let missing = config::missing_required(home, manifest)?;
    let mut still = Vec::new();
    for f in missing {
        let asked = format!(
            "{name}.{}{}",
            f.name,
            config::description(manifest, &f.name)
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
        let mut prompt = asked.clone();
        let mut stored = false;
        for _ in 0..SETUP_ATTEMPTS {
            let question = Question {
                prompt: prompt.clone(),
                secret: f.secret,
                options: config::options(manifest, &f.name),
                ..Question::default()
            };
            let answer = ask(question).await;
            if answer.cancelled || answer.answer.is_empty() {
                break;
            }
            let (home, manifest, field) = (home.clone(), manifest.clone(), f.name.clone());
            if f.secret {
                let secret = config::Secret::new(answer.answer);
                off_thread(move || config::set_secret(&home, &manifest, &field, &secret)).await?;
            } else {
                match config::check_answer(&manifest, &field, &answer.answer) {
                    Ok(value) => {
                        off_thread(move || config::set_plain(&home, &manifest, &field, value))
                            .await?;
                    }
                    Err(why) => {
                        prompt = format!("{asked}: {why}; try again");
                        continue;
                    }
                }
            }
            stored = true;
            break;
        }
        if !stored {
            still.push(f.name);
        }
    }
    Ok(still)
}
