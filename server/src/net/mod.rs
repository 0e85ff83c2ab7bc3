//! Sockets: the accept loop, the per-connection loop and TLS. Nothing
//! outside this module touches a socket.

pub mod bus;
pub mod connection;
pub mod listener;
pub mod migrate;
pub mod replica;
pub mod tls;
pub mod workers;

/// Whether a failed `accept` failed for that one connection only, so the
/// next one can be accepted at once. Linux reports a connection that was
/// aborted or hit a network error while it waited in the backlog as an
/// accept error (accept(2), "Error handling"); backing off after those, as
/// after running out of descriptors, lets anyone who can make such
/// connections starve every other client (CVE-2025-48367, where Redis
/// retried only on the next event-loop turn). The list is Redis's
/// `anetAcceptFailureNeedsRetry`.
pub fn accept_failed_for_that_connection_only(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(
            libc::ECONNABORTED
                | libc::ENETDOWN
                | libc::EPROTO
                | libc::ENOPROTOOPT
                | libc::EHOSTDOWN
                | libc::ENONET
                | libc::EHOSTUNREACH
                | libc::EOPNOTSUPP
                | libc::ENETUNREACH
        )
    )
}

#[cfg(test)]
mod tests {
    use super::accept_failed_for_that_connection_only as per_connection;
    use std::io::Error;

    #[test]
    fn errors_of_one_connection_are_retried_at_once() {
        for errno in [
            libc::ECONNABORTED,
            libc::ENETDOWN,
            libc::EPROTO,
            libc::ENOPROTOOPT,
            libc::EHOSTDOWN,
            libc::ENONET,
            libc::EHOSTUNREACH,
            libc::EOPNOTSUPP,
            libc::ENETUNREACH,
        ] {
            assert!(per_connection(&Error::from_raw_os_error(errno)), "{errno}");
        }
    }

    #[test]
    fn running_out_of_resources_backs_off() {
        for errno in [
            libc::EMFILE,
            libc::ENFILE,
            libc::ENOBUFS,
            libc::ENOMEM,
            libc::EBADF,
        ] {
            assert!(!per_connection(&Error::from_raw_os_error(errno)), "{errno}");
        }
    }
}
