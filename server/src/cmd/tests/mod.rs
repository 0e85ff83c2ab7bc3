//! Each command family's unit tests, run in process through the
//! dispatcher (`cmd::harness`), with Redis 7.0.15's replies as the
//! expected ones. The differential tests in tests/ compare the same
//! families with a running redis-server over sockets.

mod hash;
mod keys;
mod list;
mod multi;
mod scripting;
mod set;
mod string;
mod zset;
