//! Typed access to JSON values without serde: [`FromValue`] reads a
//! [`Value`] into a Rust type, [`ToValue`] writes one, and
//! [`json_object!`](crate::json_object!) defines a struct that does both.
//!
//! ```
//! use agentrt::json::{self, FromValue, ToValue, Value};
//!
//! agentrt::json_object! {
//!     /// A step's options, from its additional_input.
//!     #[derive(Debug, PartialEq)]
//!     pub struct Options {
//!         pub limit: u32,
//!         pub words: Vec<String>,
//!         /// Optional: missing or null is None.
//!         pub style: Option<String>,
//!     }
//! }
//!
//! let input = json::parse(r#"{"limit": 3, "words": ["a", "b"]}"#).unwrap();
//! let opts: Options = input.decode().unwrap();
//! assert_eq!(opts, Options { limit: 3, words: vec!["a".into(), "b".into()], style: None });
//! assert_eq!(opts.to_value().to_json(), r#"{"limit":3,"words":["a","b"],"style":null}"#);
//!
//! let bad = json::parse(r#"{"limit": "ten", "words": []}"#).unwrap();
//! assert_eq!(
//!     bad.decode::<Options>().unwrap_err().message(),
//!     "limit: want an integer from 0 to 4294967295, got \"ten\""
//! );
//! ```

use std::collections::BTreeMap;

use super::{Number, Value};
use crate::error::Error;

/// A type read from a JSON [`Value`].
pub trait FromValue: Sized {
    /// Reads `value`; the error says what was wanted and what was there.
    fn from_value(value: &Value) -> Result<Self, Error>;

    /// What a missing object member reads as: an error for most types,
    /// `None` for an `Option`.
    #[doc(hidden)]
    fn missing() -> Option<Self> {
        None
    }
}

/// A type written as a JSON [`Value`].
pub trait ToValue {
    fn to_value(&self) -> Value;
}

impl Value {
    /// Reads the value as `T`: `step.additional_input.decode::<Options>()?`.
    pub fn decode<T: FromValue>(&self) -> Result<T, Error> {
        T::from_value(self)
    }
}

/// Reads the member `key` of an object as `T`, naming it in the error:
/// what [`json_object!`](crate::json_object!) reads each field with.
pub fn field<T: FromValue>(object: &Value, key: &str) -> Result<T, Error> {
    match object.get(key) {
        None | Some(Value::Null) => match T::missing() {
            Some(v) => Ok(v),
            None if object.get(key).is_some() => {
                T::from_value(&Value::Null).map_err(|e| within(key, e))
            }
            None => Err(Error::new(format!("{}: missing", key))),
        },
        Some(v) => T::from_value(v).map_err(|e| within(key, e)),
    }
}

/// Prefixes an error with where in the value it happened.
fn within(key: &str, e: Error) -> Error {
    Error::new(format!("{}: {}", key, e.message()))
}

/// What a value is, for errors: its JSON text, cut short.
fn shown(v: &Value) -> String {
    let text = v.to_json();
    if text.len() <= 40 {
        return text;
    }
    let mut cut = 40;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

fn want(what: &str, v: &Value) -> Error {
    Error::new(format!("want {}, got {}", what, shown(v)))
}

impl FromValue for Value {
    fn from_value(value: &Value) -> Result<Self, Error> {
        Ok(value.clone())
    }
}

impl FromValue for bool {
    fn from_value(value: &Value) -> Result<Self, Error> {
        value.as_bool().ok_or_else(|| want("true or false", value))
    }
}

impl FromValue for String {
    fn from_value(value: &Value) -> Result<Self, Error> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| want("a string", value))
    }
}

impl FromValue for f64 {
    fn from_value(value: &Value) -> Result<Self, Error> {
        value.as_f64().ok_or_else(|| want("a number", value))
    }
}

impl FromValue for f32 {
    fn from_value(value: &Value) -> Result<Self, Error> {
        Ok(f64::from_value(value)? as f32)
    }
}

macro_rules! from_value_integers {
    ($($t:ty),*) => {
        $(
            impl FromValue for $t {
                fn from_value(value: &Value) -> Result<Self, Error> {
                    let what = || {
                        want(&format!("an integer from {} to {}", <$t>::MIN, <$t>::MAX), value)
                    };
                    let n = value.as_number().ok_or_else(what)?;
                    if let Some(i) = n.as_i64() {
                        return <$t>::try_from(i).map_err(|_| what());
                    }
                    n.as_u64()
                        .and_then(|u| <$t>::try_from(u).ok())
                        .ok_or_else(what)
                }
            }

            impl ToValue for $t {
                fn to_value(&self) -> Value {
                    Value::from(*self)
                }
            }
        )*
    };
}

from_value_integers!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(value: &Value) -> Result<Self, Error> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }

    fn missing() -> Option<Self> {
        Some(None)
    }
}

impl<T: FromValue> FromValue for Vec<T> {
    fn from_value(value: &Value) -> Result<Self, Error> {
        let items = value.as_array().ok_or_else(|| want("an array", value))?;
        items
            .iter()
            .enumerate()
            .map(|(i, v)| T::from_value(v).map_err(|e| within(&format!("[{}]", i), e)))
            .collect()
    }
}

impl<T: FromValue> FromValue for BTreeMap<String, T> {
    fn from_value(value: &Value) -> Result<Self, Error> {
        let members = value.as_object().ok_or_else(|| want("an object", value))?;
        let mut map = BTreeMap::new();
        for (k, v) in members {
            map.insert(k.clone(), T::from_value(v).map_err(|e| within(k, e))?);
        }
        Ok(map)
    }
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl ToValue for bool {
    fn to_value(&self) -> Value {
        Value::Bool(*self)
    }
}

impl ToValue for str {
    fn to_value(&self) -> Value {
        Value::from(self)
    }
}

impl ToValue for String {
    fn to_value(&self) -> Value {
        Value::from(self.as_str())
    }
}

impl ToValue for f64 {
    fn to_value(&self) -> Value {
        Number::from_f64(*self).map_or(Value::Null, Value::Number)
    }
}

impl ToValue for f32 {
    fn to_value(&self) -> Value {
        f64::from(*self).to_value()
    }
}

impl<T: ToValue> ToValue for Option<T> {
    fn to_value(&self) -> Value {
        match self {
            Some(v) => v.to_value(),
            None => Value::Null,
        }
    }
}

impl<T: ToValue> ToValue for Vec<T> {
    fn to_value(&self) -> Value {
        self[..].to_value()
    }
}

impl<T: ToValue> ToValue for [T] {
    fn to_value(&self) -> Value {
        Value::Array(self.iter().map(ToValue::to_value).collect())
    }
}

impl<T: ToValue> ToValue for BTreeMap<String, T> {
    fn to_value(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.to_value()))
                .collect(),
        )
    }
}

impl<T: ToValue + ?Sized> ToValue for &T {
    fn to_value(&self) -> Value {
        (**self).to_value()
    }
}

/// Defines a struct read from and written as a JSON object: each field is
/// the member of its name, of any type that is [`FromValue`] and
/// [`ToValue`] (numbers, `bool`, `String`, `Option`, `Vec`, `BTreeMap`,
/// [`Value`], or another `json_object!` struct). An `Option` field may be
/// missing or null; any other missing field is an error naming it. Members
/// the struct does not name are ignored.
///
/// The struct also converts `into()` a [`Value`], for a step's
/// `additional_output`:
///
/// ```
/// use agentrt::{json::Value, StepResult};
///
/// agentrt::json_object! {
///     pub struct Counts {
///         pub words: u64,
///         pub lines: u64,
///     }
/// }
///
/// let r = StepResult::output("counted").with_additional_output(Counts { words: 3, lines: 1 }.into());
/// assert_eq!(r.additional_output.unwrap()["words"].as_u64(), Some(3));
/// ```
#[macro_export]
macro_rules! json_object {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[$fmeta])*
                $fvis $field: $ty,
            )*
        }

        impl $crate::json::FromValue for $name {
            fn from_value(value: &$crate::json::Value) -> ::std::result::Result<Self, $crate::Error> {
                if !value.is_object() {
                    return ::std::result::Result::Err($crate::Error::new(::std::format!(
                        "want an object, got {}",
                        value.to_json()
                    )));
                }
                ::std::result::Result::Ok($name {
                    $(
                        $field: $crate::json::field::<$ty>(value, ::std::stringify!($field))?,
                    )*
                })
            }
        }

        impl $crate::json::ToValue for $name {
            fn to_value(&self) -> $crate::json::Value {
                $crate::json::Value::object()
                    $(
                        .with(::std::stringify!($field), $crate::json::ToValue::to_value(&self.$field))
                    )*
            }
        }

        impl ::std::convert::From<$name> for $crate::json::Value {
            fn from(v: $name) -> $crate::json::Value {
                $crate::json::ToValue::to_value(&v)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    crate::json_object! {
        #[derive(Debug, PartialEq)]
        struct Inner {
            n: i8,
        }
    }

    crate::json_object! {
        #[derive(Debug, PartialEq)]
        struct Outer {
            name: String,
            inner: Inner,
            list: Vec<Inner>,
            maybe: Option<u64>,
            map: BTreeMap<String, bool>,
            raw: Value,
        }
    }

    fn decode(text: &str) -> Result<Outer, Error> {
        parse(text).unwrap().decode()
    }

    #[test]
    fn reads_and_writes_nested_objects() {
        let text = r#"{"name":"x","inner":{"n":-3},"list":[{"n":1},{"n":2}],"maybe":null,"map":{"a":true},"raw":[1,"two"]}"#;
        let v = decode(text).unwrap();
        assert_eq!(v.inner, Inner { n: -3 });
        assert_eq!(v.list.len(), 2);
        assert_eq!(v.maybe, None);
        assert_eq!(v.to_value().to_json(), text);
    }

    #[test]
    fn names_where_a_value_is_wrong() {
        let base = r#"{"name":"x","inner":{"n":1},"list":[],"map":{},"raw":null"#;
        let cases = [
            (
                format!("{}}}", base.replace(r#""n":1"#, r#""n":300"#)),
                "inner: n: want an integer from -128 to 127, got 300",
            ),
            (
                format!(
                    "{}}}",
                    base.replace(r#""list":[]"#, r#""list":[{"n":1},{"n":"x"}]"#)
                ),
                "list: [1]: n: want an integer from -128 to 127, got \"x\"",
            ),
            (
                format!("{}}}", base.replace(r#""name":"x","#, "")),
                "name: missing",
            ),
            (
                format!("{}}}", base.replace(r#""name":"x""#, r#""name":null"#)),
                "name: want a string, got null",
            ),
            (
                format!("{},\"maybe\":-1}}", base),
                "maybe: want an integer from 0 to 18446744073709551615, got -1",
            ),
            (
                format!("{}}}", base.replace(r#""map":{}"#, r#""map":{"k":1}"#)),
                "map: k: want true or false, got 1",
            ),
        ];
        for (text, want) in cases.iter() {
            assert_eq!(decode(text).unwrap_err().message(), *want, "{}", text);
        }
        assert_eq!(
            parse("[1]")
                .unwrap()
                .decode::<Outer>()
                .unwrap_err()
                .message(),
            "want an object, got [1]"
        );
    }

    #[test]
    fn optional_members_may_be_missing() {
        let v = decode(r#"{"name":"x","inner":{"n":1},"list":[],"map":{},"raw":null,"extra":1}"#)
            .unwrap();
        assert_eq!(v.maybe, None);
        assert_eq!(v.raw, Value::Null);
    }
}
