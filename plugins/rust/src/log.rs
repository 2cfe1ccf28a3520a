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

/// Logs a formatted line at a level: `agentrt::log!(Level::Warn, "{} left", n)`.
/// [`debug!`](crate::debug!), [`info!`](crate::info!), [`warn!`](crate::warn!)
/// and [`error!`](crate::error!) name the level.
///
/// ```
/// let words = 3;
/// agentrt::info!("counted {} words in {}", words, "notes.txt");
/// agentrt::log!(agentrt::Level::Debug, "raw input: {:?}", "a b c");
/// ```
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)+) => {
        $crate::log($level, &::std::format!($($arg)+))
    };
}

/// Logs a formatted line at level debug (see [`log!`](crate::log!)).
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log!($crate::Level::Debug, $($arg)+) };
}

/// Logs a formatted line at level info (see [`log!`](crate::log!)).
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log!($crate::Level::Info, $($arg)+) };
}

/// Logs a formatted line at level warn (see [`log!`](crate::log!)).
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log!($crate::Level::Warn, $($arg)+) };
}

/// Logs a formatted line at level error (see [`log!`](crate::log!)).
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log!($crate::Level::Error, $($arg)+) };
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
        crate::debug!("{} + {}", 1, 2);
        crate::info!("in {}", "a.txt");
        crate::warn!("{:?}", "q");
        crate::error!("plain");
        crate::log!(Level::Warn, "{}", 'x');
        let logs = fake::with(|s| s.logs.clone());
        assert_eq!(
            logs,
            vec![
                (0, "d".into()),
                (1, "i".into()),
                (2, "w".into()),
                (3, "e".into()),
                (1, "héllo\nworld".to_string()),
                (0, "1 + 2".into()),
                (1, "in a.txt".into()),
                (2, "\"q\"".into()),
                (3, "plain".into()),
                (2, "x".into()),
            ]
        );
    }
}
