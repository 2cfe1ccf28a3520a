use std::io;

use crate::error::Error;
use crate::host;

/// Where a download handler writes the bytes of the download it serves:
/// they go to the client as they are written, at most the artifact limit
/// (`--max-artifact`) in all. It is also an [`std::io::Write`].
///
/// ```
/// use agentrt::{Artifact, Download, Error, Task};
///
/// fn on_download(_task: &Task, artifact: &Artifact, out: &mut Download) -> Result<(), Error> {
///     if artifact.uri.is_empty() {
///         return Err(agentrt::default_download()); // the stored bytes
///     }
///     out.write(format!("a link to {}\n", artifact.uri).as_bytes())
/// }
/// # fn main() {}
/// ```
#[derive(Debug, Default)]
pub struct Download {
    written: u64,
}

impl Download {
    pub(crate) fn new() -> Download {
        Download::default()
    }

    /// Sends `bytes` to the client. An error (the host's: the limit, or a
    /// client that went away) means no more can be sent.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        host::download_write(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// How many bytes were sent so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

impl io::Write for Download {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Download::write(self, buf)
            .map(|()| buf.len())
            .map_err(|e| io::Error::new(io::ErrorKind::Other, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
