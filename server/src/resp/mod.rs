//! The Redis serialization protocol: request framing and reply encoding.

pub mod parse;
pub mod reply;
pub mod scan;

pub use parse::{parse_frame, peek_command, Frame, FrameLimits, Resume};
pub use reply::{BulkList, Protocol, Reply};
pub use scan::reply_frame_len;
