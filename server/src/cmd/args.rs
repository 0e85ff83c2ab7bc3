//! Argument parsing shared by every command family, strict in the ways Redis is.

use super::error;
use crate::resp::Reply;

/// Parses an integer argument, or gives the reply Redis sends for a bad one.
pub fn int_arg(bytes: &[u8]) -> Result<i64, Reply> {
    parse_i64(bytes).ok_or_else(|| Reply::error(error::NOT_INTEGER))
}

/// Parses two integer arguments (a range's ends, LIMIT's offset and count);
/// the first bad one gives the reply.
pub fn int_pair(a: &[u8], b: &[u8]) -> Result<(i64, i64), Reply> {
    Ok((int_arg(a)?, int_arg(b)?))
}

pub use crate::glob::glob_match;
pub use crate::number::{parse_f64, parse_i64};
pub use crate::util::is;
