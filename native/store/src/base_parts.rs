//! A push's window on its base version's parts (PROTOCOL.md 5.1 step 5): when the name's
//! latest version was committed in parts, the client reads those parts (`GET parts/{id}`)
//! near the current file offset only, so its memory stays flat at any file size. The window
//! itself (which parts to keep, each checked against its id, the ids known present, the part
//! delta to send for a new part) is the core's [`PartWindow`], which the library uses through
//! wasm too; this adds only the reading, over [`Client`].

use crate::client::Client;
use cutpoint_core::protocol::part_delta::PartWindow;

pub use cutpoint_core::protocol::part_delta::{base_lines, BaseLine, PART_WINDOW_BYTES as WINDOW_BYTES};

/// The core's window, read through a [`Client`].
pub struct BaseWindow(PartWindow);

impl std::ops::Deref for BaseWindow {
    type Target = PartWindow;
    fn deref(&self) -> &PartWindow {
        &self.0
    }
}

impl BaseWindow {
    pub fn new(alg: cutpoint_core::HashAlg, lines: Vec<BaseLine>, deltas: bool) -> BaseWindow {
        BaseWindow(PartWindow::new(alg, lines, deltas))
    }

    /// Keeps the base parts that overlap `lo..hi` (file offsets): drops those ending at or
    /// before `lo`, reads those starting before `hi`. A part that cannot be read, or whose text
    /// is not its id's, is skipped: its ids are queried as usual.
    pub fn advance(&mut self, client: &Client, lo: u64, hi: u64) {
        for i in self.0.advance(lo, hi) {
            let id = self.0.lines()[i].id;
            match client.part_text(&id) {
                Ok(text) => {
                    let _ = self.0.load(i, &text);
                }
                Err(_) => self.0.skip(),
            }
        }
    }
}
