//! The slow partner (being written).
