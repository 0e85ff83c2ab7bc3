//! Sockets: the accept loop and the per-connection loop. Nothing outside this
//! module touches a socket.

pub mod connection;
pub mod listener;
