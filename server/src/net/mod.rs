//! Sockets: the accept loop, the per-connection loop and TLS. Nothing
//! outside this module touches a socket.

pub mod bus;
pub mod connection;
pub mod listener;
pub mod migrate;
pub mod tls;
