use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// A config file that could not be read or parsed, with its path.
///
/// ```
/// let err = service_kit::load_toml::<toml::Table>("/no/such.toml".as_ref()).unwrap_err();
/// assert!(err.to_string().starts_with("cannot read config file /no/such.toml"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML for this binary (unknown field, wrong
    /// type, malformed duration...).
    #[error("invalid config file {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        #[source]
        source: Box<toml::de::Error>,
    },
}

/// Reads and parses a TOML config file.
///
/// ```
/// # use service_kit::load_toml;
/// assert!(load_toml::<toml::Table>("/no/such.toml".as_ref()).is_err());
/// ```
pub fn load_toml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_toml(&text, path)
}

/// Parses TOML text that came from `path` (named in errors).
///
/// ```
/// # use service_kit::parse_toml;
/// let t: toml::Table = parse_toml("a = 1", "inline.toml".as_ref()).unwrap();
/// assert_eq!(t["a"].as_integer(), Some(1));
/// let err = parse_toml::<toml::Table>("a = ", "inline.toml".as_ref()).unwrap_err();
/// assert!(service_kit::error_chain(&err).contains("inline.toml"));
/// ```
pub fn parse_toml<T: DeserializeOwned>(text: &str, path: &Path) -> Result<T, ConfigFileError> {
    toml::from_str(text).map_err(|source| ConfigFileError::Parse {
        path: path.to_owned(),
        source: Box::new(source),
    })
}
