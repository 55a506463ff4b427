//! `cutpoint-store`: the cutpoint chunk store (`cutpoint serve`) and its native client.
//!
//! * [`store::Store`] — the logic of each protocol step (query, upload, commit, restore, gc,
//!   check) over [`backend::Objects`] (packs and recipes) and [`index::Index`] (SQLite, with each namespace's chunk ids in
//!   memory: [`idset`]);
//! * [`routes`] — the HTTP API (axum): thin handlers that parse, authorise ([`auth`]; web pages
//!   and `Host` names by [`access`]), call the
//!   store on a blocking thread, and map the result to a status;
//! * [`client`] — the HTTP client and the push / pull pipelines used by `cutpoint push` / `pull`
//!   ([`spool`]: the window of a pushed stream, `cutpoint push -`; [`base_parts`]: the window
//!   on a base version's parts, for known ids and part deltas).
//!
//! The wire format itself (pack frames, query bodies, names, recipes) lives in
//! `cutpoint_core::protocol`, shared with the wasm build. `PROTOCOL.md` documents each request.

pub mod access;
pub mod auth;
pub mod backend;
pub mod base_parts;
pub mod client;
pub mod error;
pub mod idset;
pub mod index;
pub mod pushcache;
pub mod range;
pub mod recipe_rows;
pub mod routes;
pub mod spool;
pub mod store;
pub mod upload_spool;

pub use error::StoreError;
pub use store::{Limits, Store};
