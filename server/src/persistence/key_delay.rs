//! Redis's `rdb-key-save-delay` and `key-load-delay`, knobs its tests use
//! to keep a background save or a load running long enough to act on it
//! meanwhile.
//!
//! Redis's fork child sleeps after each key it writes, and its loader
//! after each key it loads. tally's background writer takes the wait once
//! per step, for the keys of that step, with the shard's lock released: a
//! wait under the lock would stall the clients.

use std::time::Duration;

/// The wait owed for the keys a save has written or a load has stored.
pub(crate) struct KeyDelay {
    micros: i32,
    /// Keys written and not yet waited for, under a negative setting.
    owed: u64,
}

impl KeyDelay {
    pub(crate) fn new(micros: i32) -> KeyDelay {
        KeyDelay { micros, owed: 0 }
    }

    /// Waits for `keys` keys just written or stored.
    pub(crate) fn after(&mut self, keys: usize) {
        let micros = self.due(keys);
        if micros > 0 {
            std::thread::sleep(Duration::from_micros(micros));
        }
    }

    /// Microseconds to wait for `keys` more keys: the setting's for each
    /// when positive; when it is -N, one per N keys (Redis sleeps a
    /// microsecond after a key with probability 1/N: the same on average).
    fn due(&mut self, keys: usize) -> u64 {
        match self.micros {
            0 => 0,
            n if n > 0 => n as u64 * keys as u64,
            n => {
                let every = u64::from(n.unsigned_abs());
                self.owed += keys as u64;
                let due = self.owed / every;
                self.owed %= every;
                due
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KeyDelay;

    #[test]
    fn a_positive_setting_is_a_wait_per_key() {
        let mut delay = KeyDelay::new(250);
        assert_eq!(delay.due(0), 0);
        assert_eq!(delay.due(4), 1000);
    }

    #[test]
    fn a_negative_setting_is_one_microsecond_per_so_many_keys() {
        let mut delay = KeyDelay::new(-10);
        assert_eq!(delay.due(7), 0);
        assert_eq!(delay.due(7), 1, "the 10th key is owed across steps");
        assert_eq!(delay.due(26), 3);
        assert_eq!(delay.due(0), 0);
    }

    #[test]
    fn zero_waits_for_nothing() {
        let mut delay = KeyDelay::new(0);
        assert_eq!(delay.due(1_000_000), 0);
    }
}
