//! Unit tests of the keyspace: one shard's table (`shard/`) and the
//! store's databases and locking (`store.rs`), without any command.

mod shard;
mod snapshot;
mod store;

use std::sync::Arc;

use parking_lot::Mutex;

use super::{KeyObserver, Store};

/// An observer that remembers every key it is told of.
#[derive(Default)]
struct Recorder {
    keys: Mutex<Vec<Vec<u8>>>,
}

impl KeyObserver for Recorder {
    fn active(&self) -> bool {
        true
    }

    fn modified(&self, key: &[u8]) {
        self.keys.lock().push(key.to_vec());
    }
}

/// A store of one database with `shards` shards, telling `recorder`.
fn store_with(shards: usize, recorder: &Arc<Recorder>) -> Store {
    Store::new(1, shards, recorder.clone())
}
