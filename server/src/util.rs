//! Small helpers with no better home.

use std::cell::Cell;

thread_local! {
    static RANDOM_STATE: Cell<u64> = Cell::new({
        // Seed each thread differently: address of a local, time, thread id hash.
        let local = 0u8;
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        (&local as *const u8 as u64) ^ time ^ 0x9E37_79B9_7F4A_7C15
    });
}

/// A fast non-cryptographic random number (xorshift64*), for choices such as
/// RANDOMKEY where only spread matters.
pub fn random_u64() -> u64 {
    RANDOM_STATE.with(|state| {
        let mut x = state.get() | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[inline]
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}
