//! A command's output on stdout: a reader that went away (`ork generate bundle | head`) ends
//! the output quietly, where `print!` would panic.

use std::io::Write;

/// Writes `text` to stdout; a closed pipe is not an error.
pub fn write(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
