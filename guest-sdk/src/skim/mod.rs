//! A typed parse of the custom resource that skims over what the type does not name.
//!
//! serde_json tokenizes and validates every value, even one it ignores; in a hook that reads a
//! few fields of a CR, that is most of the call (a 4 KB object: about 9 µs of a 21 µs call).
//! Here a value the type does not name is skipped by matching brackets and quotes, and every
//! value the type does read is handed to serde_json, so numbers, escapes and error cases are
//! serde_json's own. The object comes from the host, which serialized it with serde_json, so
//! the skipped parts are valid JSON; should anything fail here (a type this module does not
//! serve the way serde_json would, a map with integer keys, nesting past serde_json's limit),
//! the parse is done again by serde_json, whose result and error stand.

mod blocks;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use serde_json::Error;

use blocks::BLOCK;

/// `text` parsed into `T`: the same result as `serde_json::from_str`, faster when `T` names
/// only part of it.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    skim(text).or_else(|_| serde_json::from_str(text))
}

/// The parse without serde_json's second look.
fn skim<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let mut skim = Skim { text, pos: 0, depth: 0 };
    let value = T::deserialize(&mut skim)?;
    skim.end()?;
    Ok(value)
}

/// serde_json's nesting limit (a container at this depth is refused): deeper input fails here
/// and then in serde_json, which names it.
const MAX_DEPTH: usize = 128;

struct Skim<'de> {
    text: &'de str,
    pos: usize,
    depth: usize,
}

/// JSON's whitespace.
fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\n' | b'\r' | b'\t')
}

fn malformed(what: &str) -> Error {
    de::Error::custom(format_args!("malformed JSON: {what}"))
}

impl<'de> Skim<'de> {
    fn bytes(&self) -> &'de [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        let rest = self.bytes().get(self.pos..).unwrap_or_default();
        self.pos += rest.iter().position(|&b| !is_whitespace(b)).unwrap_or(rest.len());
    }

    /// The next byte after whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Result<u8, Error> {
        // The host's text is compact: most of the time there is no whitespace to skip.
        match self.bytes().get(self.pos) {
            Some(&byte) if !is_whitespace(byte) => Ok(byte),
            _ => {
                self.skip_whitespace();
                self.bytes()
                    .get(self.pos)
                    .copied()
                    .ok_or_else(|| malformed("unexpected end"))
            }
        }
    }

    #[inline]
    fn expect(&mut self, byte: u8) -> Result<(), Error> {
        if self.peek()? != byte {
            return Err(malformed("unexpected character"));
        }
        self.pos += 1;
        Ok(())
    }

    fn end(&mut self) -> Result<(), Error> {
        self.skip_whitespace();
        if self.pos == self.text.len() {
            Ok(())
        } else {
            Err(malformed("trailing characters"))
        }
    }

    /// From the opening quote at `pos` to past the closing one. Whether the string is plain
    /// (no escapes, no control characters, which serde_json refuses): then its content is the
    /// text between the quotes.
    fn skip_string(&mut self) -> Result<bool, Error> {
        let bytes = self.bytes();
        let mut at = self.pos + 1;
        let mut plain = true;
        let mut carry = false;
        // Most strings end within 16 bytes: look there first.
        let mut masks = blocks::string::<1>(bytes, at);
        let mut span = 16;
        loop {
            let escaped = blocks::escaped(masks.backslash, span, &mut carry);
            let ends = masks.quote & !escaped;
            let unplain = masks.backslash | masks.control;
            if ends != 0 {
                let bit = ends.trailing_zeros();
                self.pos = at + bit as usize + 1;
                return Ok(plain && unplain & ((1 << bit) - 1) == 0);
            }
            plain &= unplain == 0;
            at += span as usize;
            if at >= bytes.len() {
                return Err(malformed("unterminated string"));
            }
            masks = blocks::string::<4>(bytes, at);
            span = BLOCK as u32;
        }
    }

    /// The string at `pos` and past it, when it is plain; otherwise `None`, and `pos` stays.
    fn plain_string(&mut self) -> Result<Option<&'de str>, Error> {
        let start = self.pos;
        if self.skip_string()? {
            return Ok(Some(&self.text[start + 1..self.pos - 1]));
        }
        self.pos = start;
        Ok(None)
    }

    /// Past the value at `pos`, which the caller will not read: brackets and quotes are
    /// matched, nothing else is looked at.
    fn skip_value(&mut self) -> Result<(), Error> {
        match self.peek()? {
            b'"' => self.skip_string().map(drop),
            b'{' | b'[' => self.skip_container(),
            _ => {
                let rest = self.bytes().get(self.pos..).unwrap_or_default();
                let len = rest
                    .iter()
                    .position(|&b| matches!(b, b',' | b'}' | b']') || is_whitespace(b))
                    .unwrap_or(rest.len());
                if len == 0 {
                    return Err(malformed("expected a value"));
                }
                self.pos += len;
                Ok(())
            }
        }
    }

    /// From the bracket at `pos` to past the one that closes it, a block at a time: brackets
    /// inside strings do not count, nor quotes a backslash escapes.
    fn skip_container(&mut self) -> Result<(), Error> {
        let bytes = self.bytes();
        let mut at = self.pos;
        let mut level = 0u32;
        let mut inside = false;
        let mut carry = false;
        while at < bytes.len() {
            let masks = blocks::container(bytes, at);
            let escaped = blocks::escaped(masks.backslash, BLOCK as u32, &mut carry);
            let strings = blocks::strings(masks.quote & !escaped, inside);
            inside = strings >> 63 == 1;
            let open = masks.open & !strings;
            let close = masks.close & !strings;
            // Too few closing brackets to get back to the start: count, do not look.
            if close.count_ones() < level {
                level = level + open.count_ones() - close.count_ones();
                at += BLOCK;
                continue;
            }
            // The level after each closing bracket: the level before the block, plus the
            // opening brackets before it, minus the closing ones up to it.
            let mut closes = close;
            let mut closed = 0;
            while closes != 0 {
                let bit = closes.trailing_zeros();
                closes &= closes - 1;
                closed += 1;
                let opened = (open & ((1u64 << bit) - 1)).count_ones();
                match (level + opened).checked_sub(closed) {
                    Some(0) => {
                        self.pos = at + bit as usize + 1;
                        return Ok(());
                    }
                    Some(_) => {}
                    None => return Err(malformed("unbalanced brackets")),
                }
            }
            level = level + open.count_ones() - closed;
            at += BLOCK;
        }
        Err(malformed("unterminated container"))
    }

    /// The value at `pos` read by serde_json, through `read`, the same method the caller
    /// asked of this deserializer.
    fn delegate<T>(
        &mut self,
        read: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'de>>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.skip_whitespace();
        let start = self.pos;
        self.skip_value()?;
        let mut json = serde_json::Deserializer::from_str(&self.text[start..self.pos]);
        let value = read(&mut json)?;
        json.end()?;
        Ok(value)
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        self.pos += 1;
        Ok(())
    }

    fn map<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let value = visitor.visit_map(Items {
            skim: self,
            first: true,
        })?;
        self.expect(b'}')?;
        self.depth -= 1;
        Ok(value)
    }

    fn seq<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value, Error> {
        self.enter()?;
        let value = visitor.visit_seq(Items {
            skim: self,
            first: true,
        })?;
        self.expect(b']')?;
        self.depth -= 1;
        Ok(value)
    }

    /// A container the visitor may read in part, or anything else read by serde_json.
    fn container<V: Visitor<'de>>(
        &mut self,
        visitor: V,
        read: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'de>>, V) -> Result<V::Value, Error>,
    ) -> Result<V::Value, Error> {
        match self.peek()? {
            b'{' => self.map(visitor),
            b'[' => self.seq(visitor),
            _ => self.delegate(|json| read(json, visitor)),
        }
    }
}

/// Methods whose values serde_json reads, exactly as it would from the whole text.
macro_rules! delegated {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            self.delegate(|json| de::Deserializer::$method(json, visitor))
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Skim<'de> {
    type Error = Error;

    delegated! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_bytes
        deserialize_byte_buf deserialize_unit deserialize_identifier
    }

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'"' {
            return self.deserialize_str(visitor);
        }
        self.container(visitor, |json, visitor| {
            de::Deserializer::deserialize_any(json, visitor)
        })
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'"'
            && let Some(content) = self.plain_string()?
        {
            return visitor.visit_borrowed_str(content);
        }
        self.delegate(|json| de::Deserializer::deserialize_str(json, visitor))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        if self.peek()? == b'n' {
            return self.delegate(|json| de::Deserializer::deserialize_option(json, visitor));
        }
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.delegate(|json| de::Deserializer::deserialize_unit_struct(json, name, visitor))
    }

    // serde_json gives some newtypes (its RawValue) special treatment: leave them to it.
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        self.delegate(|json| de::Deserializer::deserialize_newtype_struct(json, name, visitor))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.peek()? {
            b'[' => self.seq(visitor),
            _ => self.delegate(|json| de::Deserializer::deserialize_seq(json, visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.peek()? {
            b'{' => self.map(visitor),
            _ => self.delegate(|json| de::Deserializer::deserialize_map(json, visitor)),
        }
    }

    // serde_json reads a struct from an object or an array.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.container(visitor, |json, visitor| {
            de::Deserializer::deserialize_struct(json, name, fields, visitor)
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.delegate(|json| de::Deserializer::deserialize_enum(json, name, variants, visitor))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.skip_value()?;
        visitor.visit_unit()
    }
}

/// Separators between entries or elements: none before the first, a comma before the others.
fn next_item(skim: &mut Skim<'_>, first: &mut bool, close: u8) -> Result<bool, Error> {
    let byte = skim.peek()?;
    if byte == close {
        return Ok(false);
    }
    if !std::mem::take(first) {
        if byte != b',' {
            return Err(malformed("expected a comma"));
        }
        skim.pos += 1;
    }
    Ok(true)
}

/// The entries of an object or the elements of an array, as the visitor asks for them.
struct Items<'a, 'de> {
    skim: &'a mut Skim<'de>,
    first: bool,
}

impl<'de> de::MapAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if !next_item(self.skim, &mut self.first, b'}')? {
            return Ok(None);
        }
        if self.skim.peek()? != b'"' {
            return Err(malformed("expected a key"));
        }
        match self.skim.plain_string()? {
            Some(key) => seed
                .deserialize(de::value::BorrowedStrDeserializer::<Error>::new(key))
                .map(Some),
            // Escaped keys are rare: serde_json reads them as strings (keys of other types,
            // such as a map's integer keys, fail here and so go to serde_json whole).
            None => self.skim.delegate(|json| seed.deserialize(json)).map(Some),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.skim.expect(b':')?;
        seed.deserialize(&mut *self.skim)
    }
}

impl<'de> de::SeqAccess<'de> for Items<'_, 'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if !next_item(self.skim, &mut self.first, b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.skim).map(Some)
    }
}

#[cfg(test)]
mod tests;
