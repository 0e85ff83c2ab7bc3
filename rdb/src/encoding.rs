//! RDB's primitive encodings (rdb.c): lengths, strings with their integer
//! and LZF forms, and scores.

use crate::Error;

/// Length prefixes (the top two bits of the first byte).
const LEN_6BIT: u8 = 0;
const LEN_14BIT: u8 = 1;
const LEN_32BIT: u8 = 0x80;
const LEN_64BIT: u8 = 0x81;
const LEN_ENCVAL: u8 = 3;

/// String encodings after an ENCVAL prefix.
const ENC_INT8: u8 = 0;
const ENC_INT16: u8 = 1;
const ENC_INT32: u8 = 2;
const ENC_LZF: u8 = 3;

/// A cursor over bytes being read.
pub struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

/// A length, or the special string encoding an ENCVAL prefix names.
pub enum Length {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data, at: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.at
    }

    pub fn remaining(&self) -> usize {
        self.data.len() - self.at
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.remaining() < n {
            return Err(Error::Truncated);
        }
        let out = &self.data[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    pub fn byte(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u32_le(&mut self) -> Result<u32, Error> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64_le(&mut self) -> Result<u64, Error> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.bytes(8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// rdbLoadLenByRef.
    pub fn length_or_encoding(&mut self) -> Result<Length, Error> {
        let first = self.byte()?;
        match first >> 6 {
            LEN_6BIT => Ok(Length::Plain((first & 0x3f) as u64)),
            LEN_14BIT => Ok(Length::Plain(
                (((first & 0x3f) as u64) << 8) | self.byte()? as u64,
            )),
            LEN_ENCVAL => Ok(Length::Encoded(first & 0x3f)),
            _ => match first {
                LEN_32BIT => {
                    let b = self.bytes(4)?;
                    Ok(Length::Plain(
                        u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64
                    ))
                }
                LEN_64BIT => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(self.bytes(8)?);
                    Ok(Length::Plain(u64::from_be_bytes(b)))
                }
                other => Err(Error::Corrupt(format!("unknown length encoding {other}"))),
            },
        }
    }

    /// A plain length (an encoded one is corruption here).
    pub fn length(&mut self) -> Result<u64, Error> {
        match self.length_or_encoding()? {
            Length::Plain(n) => Ok(n),
            Length::Encoded(_) => Err(Error::Corrupt(
                "a string encoding where a length belongs".into(),
            )),
        }
    }

    /// A length used as a count of items that follow, checked against
    /// what is left so a corrupt count cannot make the caller reserve
    /// memory for billions of items.
    pub fn count(&mut self, min_bytes_each: usize) -> Result<usize, Error> {
        let n = self.length()?;
        if n.saturating_mul(min_bytes_each.max(1) as u64) > self.remaining() as u64 {
            return Err(Error::Truncated);
        }
        Ok(n as usize)
    }

    /// rdbGenericLoadStringObject: raw, integer-encoded or LZF.
    pub fn string(&mut self) -> Result<Vec<u8>, Error> {
        match self.length_or_encoding()? {
            Length::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| Error::Truncated)?;
                Ok(self.bytes(n)?.to_vec())
            }
            Length::Encoded(ENC_INT8) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Encoded(ENC_INT16) => {
                let b = self.bytes(2)?;
                Ok(i16::from_le_bytes([b[0], b[1]]).to_string().into_bytes())
            }
            Length::Encoded(ENC_INT32) => Ok((self.u32_le()? as i32).to_string().into_bytes()),
            Length::Encoded(ENC_LZF) => {
                let compressed = self.length()? as usize;
                let plain = self.length()? as usize;
                let data = self.bytes(compressed)?;
                // A back-reference expands 3 bytes to at most 264: a longer
                // claim is corruption, refused before anything is reserved.
                if plain == 0 || plain > compressed.saturating_mul(100) + 64 {
                    return Err(Error::Corrupt("LZF string of impossible length".into()));
                }
                crate::lzf::decompress(data, plain)
                    .ok_or_else(|| Error::Corrupt("LZF data does not decompress".into()))
            }
            Length::Encoded(other) => {
                Err(Error::Corrupt(format!("unknown string encoding {other}")))
            }
        }
    }

    /// rdbLoadDoubleValue: the old text form of a score (RDB_TYPE_ZSET).
    pub fn text_double(&mut self) -> Result<f64, Error> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            len => {
                let text = self.bytes(len as usize)?;
                parse_double(text).ok_or_else(|| Error::Corrupt("bad score".into()))
            }
        }
    }

    /// rdbLoadBinaryDoubleValue (RDB_TYPE_ZSET_2).
    pub fn binary_double(&mut self) -> Result<f64, Error> {
        Ok(f64::from_bits(self.u64_le()?))
    }
}

/// strtod over a whole string, as Redis reads scores back.
pub fn parse_double(text: &[u8]) -> Option<f64> {
    std::str::from_utf8(text).ok()?.trim().parse().ok()
}

/// rdbSaveLen.
pub fn write_length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(((n >> 8) as u8) | (LEN_14BIT << 6));
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// string2ll's strict form: the canonical decimal text of an i64 (no sign
/// but '-', no leading zeros, no "-0"), which Redis stores as a number.
/// Every string of a file passes here, so it allocates nothing.
pub fn canonical_int(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // "0" is canonical; "01", "-0" and "-01" are not.
    if digits[0] == b'0' && (digits.len() > 1 || digits.len() != text.len()) {
        return None;
    }
    // Only digits and a leading '-': valid UTF-8, and the parse fails only
    // on overflow.
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// An integer string as rdbSaveRawString writes its decimal text: a
/// number when it fits 32 bits, else the text itself.
pub fn write_int(out: &mut Vec<u8>, value: i64) {
    if write_int_encoded(out, value) {
        return;
    }
    let mut digits = [0u8; 20];
    let text = format_i64(value, &mut digits);
    write_length(out, text.len() as u64);
    out.extend_from_slice(text);
}

/// The decimal text of `value`, written at the end of `buf`.
fn format_i64(value: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = value.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if value < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

/// rdbEncodeInteger: the INT8/16/32 forms for values that fit.
fn write_int_encoded(out: &mut Vec<u8>, value: i64) -> bool {
    if let Ok(v) = i8::try_from(value) {
        out.push((LEN_ENCVAL << 6) | ENC_INT8);
        out.push(v as u8);
    } else if let Ok(v) = i16::try_from(value) {
        out.push((LEN_ENCVAL << 6) | ENC_INT16);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = i32::try_from(value) {
        out.push((LEN_ENCVAL << 6) | ENC_INT32);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// rdbSaveRawString: integers of up to 11 characters as numbers, strings
/// over 20 bytes LZF-compressed when `compress` and it saves at least 4
/// bytes (as Redis's rdbSaveLzfStringObject), the rest as they are.
pub fn write_string(out: &mut Vec<u8>, text: &[u8], compress: bool) {
    if text.len() <= 11 {
        if let Some(value) = canonical_int(text) {
            if write_int_encoded(out, value) {
                return;
            }
        }
    }
    if compress && text.len() > 20 && write_lzf(out, text) {
        return;
    }
    write_length(out, text.len() as u64);
    out.extend_from_slice(text);
}

fn write_lzf(out: &mut Vec<u8>, text: &[u8]) -> bool {
    let Some(compressed) = crate::lzf::compress(text) else {
        return false;
    };
    out.push((LEN_ENCVAL << 6) | ENC_LZF);
    write_length(out, compressed.len() as u64);
    write_length(out, text.len() as u64);
    out.extend_from_slice(&compressed);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string_of(text: &[u8], compress: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_string(&mut out, text, compress);
        out
    }

    #[test]
    fn canonical_integers_are_told_from_other_text() {
        for (text, value) in [
            (&b"0"[..], Some(0)),
            (b"7", Some(7)),
            (b"-7", Some(-7)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"01", None),
            (b"-01", None),
            (b"+1", None),
            (b"", None),
            (b"-", None),
            (b"1 ", None),
            (b"12a", None),
        ] {
            assert_eq!(
                canonical_int(text),
                value,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn an_integer_is_written_as_its_text_would_be() {
        for value in [
            0,
            7,
            -1,
            127,
            128,
            -32769,
            1 << 31,
            -(1 << 31) - 1,
            i64::MIN,
            i64::MAX,
        ] {
            let mut direct = Vec::new();
            write_int(&mut direct, value);
            assert_eq!(
                direct,
                string_of(value.to_string().as_bytes(), true),
                "{value}"
            );
        }
    }

    #[test]
    fn lengths_take_redis_s_four_forms() {
        for (n, bytes) in [
            (10u64, vec![10u8]),
            (300, vec![0x41, 0x2c]),
            (70000, vec![0x80, 0, 1, 0x11, 0x70]),
            (1 << 33, vec![0x81, 0, 0, 0, 2, 0, 0, 0, 0]),
        ] {
            let mut out = Vec::new();
            write_length(&mut out, n);
            assert_eq!(out, bytes, "{n}");
            assert_eq!(Input::new(&out).length().ok(), Some(n));
        }
    }

    #[test]
    fn strings_take_integer_and_lzf_forms() {
        assert_eq!(string_of(b"-5", false), [0xc0, 0xfb]);
        assert_eq!(string_of(b"1000", false), [0xc1, 0xe8, 0x03]);
        assert_eq!(string_of(b"100000", false), [0xc2, 0xa0, 0x86, 0x01, 0x00]);
        // Not canonical, or too long: kept as text.
        assert_eq!(string_of(b"007", false), [3, b'0', b'0', b'7']);
        assert_eq!(string_of(b"12345678901", false)[0], 11);
        let long = vec![b'a'; 100];
        let packed = string_of(&long, true);
        assert_eq!(packed[0], 0xc3);
        assert!(packed.len() < 20);
        for text in [&b"-5"[..], b"100000", b"007", &long] {
            for compress in [false, true] {
                let bytes = string_of(text, compress);
                assert_eq!(Input::new(&bytes).string().unwrap(), text);
            }
        }
    }

    #[test]
    fn a_corrupt_count_is_refused_before_anything_is_reserved() {
        let mut out = Vec::new();
        write_length(&mut out, 1 << 40);
        assert_eq!(Input::new(&out).count(1).err(), Some(Error::Truncated));
    }
}
