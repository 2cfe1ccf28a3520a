use crate::abi;
use crate::host;

/// A log level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    /// The level as the host's `log` takes it.
    pub fn as_i32(self) -> i32 {
        match self {
            Level::Debug => abi::LEVEL_DEBUG,
            Level::Info => abi::LEVEL_INFO,
            Level::Warn => abi::LEVEL_WARN,
            Level::Error => abi::LEVEL_ERROR,
        }
    }
}

/// Writes one line to the log kept with the step (in the task handler, with
/// the task). Past the call's log limit the host drops lines; logging never
/// fails a handler, so the host's answer is ignored.
pub fn log(level: Level, message: &str) {
    let _ = host::log(level.as_i32(), message);
}

/// [`log`]s a line at level debug.
pub fn debug(message: &str) {
    log(Level::Debug, message)
}

/// [`log`]s a line at level info.
pub fn info(message: &str) {
    log(Level::Info, message)
}

/// [`log`]s a line at level warn.
pub fn warn(message: &str) {
    log(Level::Warn, message)
}

/// [`log`]s a line at level error.
pub fn error(message: &str) {
    log(Level::Error, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake;

    #[test]
    fn logs_at_each_level() {
        fake::begin("{}");
        debug("d");
        info("i");
        warn("w");
        error("e");
        log(Level::Info, "héllo\nworld");
        let logs = fake::with(|s| s.logs.clone());
        assert_eq!(
            logs,
            vec![
                (0, "d".into()),
                (1, "i".into()),
                (2, "w".into()),
                (3, "e".into()),
                (1, "héllo\nworld".to_string())
            ]
        );
    }
}
