//! A scenario's own measurements in a run's report: typed, kept with the
//! scenario that makes them, not a field of [`RunReport`](crate::report::RunReport)
//! per scenario.
//!
//! A measurement type implements [`Section`] (a JSON key, and serde); a
//! scenario puts one in a report with
//! [`RunReport::set_section`](crate::report::RunReport::set_section) and
//! reads it back with
//! [`RunReport::section`](crate::report::RunReport::section). In the
//! report's JSON each registered section is a top-level key
//! (`"outage": {...}`, `null` in the runs without one), as the fields
//! were; reading a report back, a section's key is looked up
//! among the [`SectionKind`]s the registry's scenarios declare
//! ([`Scenario::sections`](crate::scenario::Scenario::sections)).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::ser::{Error as _, SerializeMap as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A scenario's own measurement of one run.
pub trait Section:
    Serialize + DeserializeOwned + Clone + PartialEq + fmt::Debug + Send + Sync + 'static
{
    /// Its key in the report's JSON (`outage`, `hang`, ...): unique among
    /// the registry's sections.
    const KEY: &'static str;
}

/// A [`Section`] of any type, as a report holds it.
pub trait AnySection: fmt::Debug + Send + Sync {
    /// Its JSON key ([`Section::KEY`]).
    fn key(&self) -> &'static str;
    /// It, as JSON.
    ///
    /// # Errors
    ///
    /// When it cannot be serialised.
    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error>;
    /// A copy.
    fn clone_box(&self) -> Box<dyn AnySection>;
    /// Whether `other` is the same type and equal.
    fn eq_dyn(&self, other: &dyn AnySection) -> bool;
    /// For downcasting.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Section> AnySection for T {
    fn key(&self) -> &'static str {
        T::KEY
    }

    fn to_json(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }

    fn clone_box(&self) -> Box<dyn AnySection> {
        Box::new(self.clone())
    }

    fn eq_dyn(&self, other: &dyn AnySection) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// How a section of one type is read back from JSON: its key and its
/// decoder. A scenario lists its own ([`SectionKind::of`]).
#[derive(Clone, Copy)]
pub struct SectionKind {
    /// [`Section::KEY`].
    pub key: &'static str,
    decode: fn(serde_json::Value) -> Result<Box<dyn AnySection>, serde_json::Error>,
}

impl SectionKind {
    /// The kind of `T`.
    pub const fn of<T: Section>() -> Self {
        Self {
            key: T::KEY,
            decode: decode::<T>,
        }
    }
}

impl fmt::Debug for SectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key)
    }
}

fn decode<T: Section>(v: serde_json::Value) -> Result<Box<dyn AnySection>, serde_json::Error> {
    Ok(Box::new(serde_json::from_value::<T>(v)?))
}

/// The sections of one report, at most one per type, in the order they
/// were set.
#[derive(Debug, Default)]
pub struct Sections(Vec<Box<dyn AnySection>>);

impl Sections {
    /// The section of type `T`, if the run has one.
    pub fn get<T: Section>(&self) -> Option<&T> {
        self.0.iter().find_map(|s| s.as_any().downcast_ref::<T>())
    }

    /// Sets the section of type `T` (replacing one of that type).
    pub fn set<T: Section>(&mut self, section: T) {
        self.0.retain(|s| s.key() != T::KEY);
        self.0.push(Box::new(section));
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Clone for Sections {
    fn clone(&self) -> Self {
        Self(self.0.iter().map(|s| s.clone_box()).collect())
    }
}

impl PartialEq for Sections {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .all(|s| other.0.iter().any(|o| s.eq_dyn(o.as_ref())))
    }
}

impl Serialize for Sections {
    /// Every registered section's key, `null` when the run has none (the
    /// report's shape does not depend on the scenario), then any other
    /// section the run has.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kinds = registered();
        let mut map = serializer.serialize_map(None)?;
        for kind in &kinds {
            match self.0.iter().find(|s| s.key() == kind.key) {
                Some(s) => {
                    map.serialize_entry(kind.key, &s.to_json().map_err(S::Error::custom)?)?
                }
                None => map.serialize_entry(kind.key, &None::<()>)?,
            }
        }
        for s in self
            .0
            .iter()
            .filter(|s| !kinds.iter().any(|k| k.key == s.key()))
        {
            map.serialize_entry(s.key(), &s.to_json().map_err(S::Error::custom)?)?;
        }
        map.end()
    }
}

/// The section kinds of every scenario of the registry, each key once.
fn registered() -> Vec<SectionKind> {
    let mut kinds: Vec<SectionKind> = Vec::new();
    for kind in crate::scenarios::ALL
        .iter()
        .flat_map(|s| s.get().sections())
    {
        if !kinds.iter().any(|k| k.key == kind.key) {
            kinds.push(*kind);
        }
    }
    kinds
}

impl<'de> Deserialize<'de> for Sections {
    /// The keys of the registry's sections; `null` and any other key are
    /// skipped (a report of a scenario this build does not have).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        let map = BTreeMap::<String, serde_json::Value>::deserialize(deserializer)?;
        let kinds = registered();
        let mut sections = Vec::new();
        for (key, value) in map {
            if value.is_null() {
                continue;
            }
            if let Some(kind) = kinds.iter().find(|k| k.key == key) {
                sections.push((kind.decode)(value).map_err(D::Error::custom)?);
            }
        }
        Ok(Self(sections))
    }
}
