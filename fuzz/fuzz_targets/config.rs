//! The config loaders, from TOML text.
//!
//! Input: the first byte picks the loader (its value mod 5: 0 the client's
//! `DependencyConfig`, 1 the server's `ServerConfig`, 2 `edge::EdgeConfig`,
//! 3 `checkout::CheckoutConfig`, 4 `slow_partner::PartnerConfig`); the rest,
//! when UTF-8, is the TOML text.
//!
//! What must hold for any input:
//! - no panic, in parsing or in validation (`build`, `layer`, `from_toml`);
//! - a refused value is an error that names a field;
//! - a config that loads serializes back to TOML (`toml::to_string`), and
//!   that text loads again to an equal config.

#![no_main]

use std::fmt::Debug;

use budget_core::client::DependencyConfig;
use budget_core::server::ServerConfig;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    match selector % 5 {
        0 => {
            if let Some(config) = parsed::<DependencyConfig>(text) {
                match config.build() {
                    Ok(_) => round_trips(&config, |t| validated(t, DependencyConfig::build)),
                    Err(e) => assert!(!e.field().is_empty(), "{e}"),
                }
            }
        }
        1 => {
            if let Some(config) = parsed::<ServerConfig>(text) {
                match config.layer() {
                    Ok(_) => {
                        // What `layer` promises to have checked.
                        assert!(!config.default_budget.is_zero());
                        assert!(config.default_budget <= config.max_budget);
                        assert!(config.floor < config.max_budget);
                        assert!(config.reserve < config.max_budget);
                        round_trips(&config, |t| validated(t, ServerConfig::layer));
                    }
                    Err(e) => assert!(!e.field().is_empty(), "{e}"),
                }
            }
        }
        2 => loaded(text, edge::EdgeConfig::from_toml, |c| c.validate()),
        3 => loaded(text, checkout::CheckoutConfig::from_toml, |c| c.validate()),
        _ => loaded(text, slow_partner::PartnerConfig::from_toml, |c| {
            c.validate()
        }),
    }
});

/// `text` deserialized, or `None` when serde refuses it.
fn parsed<T: DeserializeOwned>(text: &str) -> Option<T> {
    toml::from_str(text).ok()
}

/// `text` deserialized and validated by `check`, or `None`.
fn validated<T: DeserializeOwned, O, E>(text: &str, check: fn(&T) -> Result<O, E>) -> Option<T> {
    let config = parsed::<T>(text)?;
    check(&config).ok().map(|_| config)
}

/// A service's `from_toml` (parse + validate): when it loads, it is valid
/// and round-trips.
fn loaded<T, E: std::error::Error>(
    text: &str,
    from_toml: fn(&str) -> Result<T, E>,
    validate: fn(&T) -> Result<(), budget_core::config::ConfigError>,
) where
    T: Serialize + PartialEq + Debug,
{
    let Ok(config) = from_toml(text) else {
        return;
    };
    if let Err(e) = validate(&config) {
        panic!("loaded but invalid: {e}");
    }
    round_trips(&config, |t| from_toml(t).ok());
}

/// `config`, written as TOML and loaded by `load`, is `config` again.
fn round_trips<T: Serialize + PartialEq + Debug>(config: &T, load: impl Fn(&str) -> Option<T>) {
    let text = toml::to_string(config).unwrap_or_else(|e| panic!("{config:?} -> {e}"));
    let again =
        load(&text).unwrap_or_else(|| panic!("{config:?} wrote {text:?}, which does not load"));
    assert_eq!(&again, config, "{text}");
}
