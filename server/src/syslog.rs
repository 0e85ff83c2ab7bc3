//! `syslog-enabled`: every log line also goes to the system log, as
//! Redis's serverLog sends it, under `syslog-ident` and `syslog-facility`,
//! with the line's level as its priority.
//!
//! The log's writer is wrapped: each line is written where it went before
//! (standard output or `logfile`) and handed to syslog(3) when the writer
//! for that line is dropped, which the formatter does after each event.

use std::ffi::CString;
use std::io::Write;

use tracing_subscriber::fmt::MakeWriter;

/// The facilities `syslog-facility` accepts, as Redis names them.
pub const FACILITIES: [(&str, libc::c_int); 9] = [
    ("user", libc::LOG_USER),
    ("local0", libc::LOG_LOCAL0),
    ("local1", libc::LOG_LOCAL1),
    ("local2", libc::LOG_LOCAL2),
    ("local3", libc::LOG_LOCAL3),
    ("local4", libc::LOG_LOCAL4),
    ("local5", libc::LOG_LOCAL5),
    ("local6", libc::LOG_LOCAL6),
    ("local7", libc::LOG_LOCAL7),
];

/// Opens the system log under `ident` and `facility` (a name of
/// [`FACILITIES`]), as Redis's openlog(ident, LOG_PID | LOG_NDELAY |
/// LOG_NOWAIT, facility).
pub fn open(ident: &str, facility: &str) {
    let facility = FACILITIES
        .iter()
        .find(|(name, _)| *name == facility)
        .map_or(libc::LOG_LOCAL0, |(_, code)| *code);
    // openlog keeps the pointer for the life of the process.
    let ident = CString::new(ident.replace('\0', "")).unwrap_or_default();
    let ident: &'static CString = Box::leak(Box::new(ident));
    // SAFETY: a NUL-terminated string that lives as long as the process.
    unsafe {
        libc::openlog(
            ident.as_ptr(),
            libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
            facility,
        )
    };
}

/// The syslog priority of a log level: warnings and errors as
/// LOG_WARNING, notices (tracing's info) as LOG_NOTICE, as Redis's levels map.
fn priority(level: &tracing::Level) -> libc::c_int {
    match *level {
        tracing::Level::ERROR | tracing::Level::WARN => libc::LOG_WARNING,
        tracing::Level::INFO => libc::LOG_NOTICE,
        tracing::Level::DEBUG => libc::LOG_INFO,
        tracing::Level::TRACE => libc::LOG_DEBUG,
    }
}

/// A [`MakeWriter`] that also sends each line to the system log.
pub struct Tee<M> {
    inner: M,
}

impl<M> Tee<M> {
    /// Wraps `inner`, the writer lines went to before.
    pub fn new(inner: M) -> Tee<M> {
        Tee { inner }
    }
}

/// One line's writer: the wrapped writer, and the line for syslog.
pub struct TeeWriter<W: Write> {
    inner: W,
    priority: libc::c_int,
    line: Vec<u8>,
}

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for Tee<M> {
    type Writer = TeeWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        TeeWriter {
            inner: self.inner.make_writer(),
            priority: libc::LOG_NOTICE,
            line: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Self::Writer {
        TeeWriter {
            inner: self.inner.make_writer_for(meta),
            priority: priority(meta.level()),
            line: Vec::new(),
        }
    }
}

impl<W: Write> Write for TeeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.line.extend_from_slice(&buf[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for TeeWriter<W> {
    fn drop(&mut self) {
        let text: Vec<u8> = self
            .line
            .iter()
            .copied()
            .filter(|&b| b != 0 && b != b'\n')
            .collect();
        if text.is_empty() {
            return;
        }
        if let Ok(text) = CString::new(text) {
            // SAFETY: a constant format taking one NUL-terminated string.
            unsafe { libc::syslog(self.priority, c"%s".as_ptr(), text.as_ptr()) };
        }
    }
}
