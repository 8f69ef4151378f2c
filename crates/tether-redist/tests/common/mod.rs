//! Shared by the integration tests: each test binary uses a part of it.
#![allow(dead_code)]

pub mod gen;
pub mod oracle;
