use std::collections::BTreeMap;

use crate::abi;
use crate::error::Error;
use crate::host;
use crate::json::Value;

/// The operator's settings for this plugin, by name.
///
/// The host sends a JSON object of strings; a value of another type (which
/// the ABI does not promise) is kept as its JSON text.
pub fn config() -> Result<BTreeMap<String, String>, Error> {
    match host::decode(abi::FUNC_CONFIG, &host::config()?)? {
        Value::Object(members) => Ok(members
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => (k, s),
                other => (k, other.to_json()),
            })
            .collect()),
        _ => Err(Error::new("config: the host's answer is not a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::fake;

    #[test]
    fn reads_the_settings() {
        fake::begin("{}");
        assert!(config().unwrap().is_empty());
        fake::with(|s| s.config = r#"{"model":"small","greeting":"h\u00e9","n":3}"#.into());
        let c = config().unwrap();
        assert_eq!(c.get("model").map(String::as_str), Some("small"));
        assert_eq!(c.get("greeting").map(String::as_str), Some("hé"));
        assert_eq!(c.get("n").map(String::as_str), Some("3"));
        fake::with(|s| s.config = "[]".into());
        assert!(config().is_err());
    }
}
