//! The bytes a skip over JSON stops at, found 64 at a time, one bit per byte: quotes,
//! backslashes and, for a container, brackets; for a string, control characters. With
//! WebAssembly SIMD (a guest built with `-C target-feature=+simd128`) sixteen bytes are
//! compared at once, otherwise eight in a machine word. A loop per byte would cost more than it saves: the host
//! checks its epoch deadline on every loop iteration of guest code.

/// Bytes per block.
pub(super) const BLOCK: usize = 64;

/// Bit `i` of each mask stands for byte `i` of the block. A container's block has no
/// `control` bits, a string's no `open` or `close` bits: each looks only for what ends it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Block {
    pub quote: u64,
    pub backslash: u64,
    /// `{` and `[`.
    pub open: u64,
    /// `}` and `]`.
    pub close: u64,
    /// Control characters, which JSON does not allow in a string.
    pub control: u64,
}

/// The container masks of the 64 bytes of `bytes` from `at`; bytes past the end count as
/// spaces.
pub(super) fn container(bytes: &[u8], at: usize) -> Block {
    with_block(bytes, at, |block| {
        let mut masks = Block::default();
        for_chunks(block, BLOCK / LANES, |shift, chunk| {
            let folded = chunk.and(NOT_CASE);
            masks.quote |= chunk.eq(b'"') << shift;
            masks.backslash |= chunk.eq(b'\\') << shift;
            masks.open |= folded.eq(b'[') << shift;
            masks.close |= folded.eq(b']') << shift;
        });
        masks
    })
}

/// The string masks of the `CHUNKS` * 16 bytes from `at` (the other bits clear): the first 16
/// bytes end most keys and short strings for a quarter of the work.
pub(super) fn string<const CHUNKS: usize>(bytes: &[u8], at: usize) -> Block {
    with_block(bytes, at, |block| {
        let mut masks = Block::default();
        for_chunks(block, 16 / LANES * CHUNKS, |shift, chunk| {
            masks.quote |= chunk.eq(b'"') << shift;
            masks.backslash |= chunk.eq(b'\\') << shift;
            masks.control |= chunk.below(0x20) << shift;
        });
        masks
    })
}

/// Bit `i` set where byte `i` of a block of `span` bytes is escaped: it follows a backslash
/// that is not escaped itself. `carry`: on the way in, whether a backslash at the end of the
/// previous block escapes this one's first byte; on the way out, the same for the next block.
#[inline]
pub(super) fn escaped(mut backslash: u64, span: u32, carry: &mut bool) -> u64 {
    // Most blocks: nothing escaped.
    if backslash == 0 && !*carry {
        return 0;
    }
    let mut escaped = 0;
    if std::mem::take(carry) {
        escaped = 1;
        backslash &= !1;
    }
    while backslash != 0 {
        let bit = backslash.trailing_zeros();
        backslash &= backslash - 1;
        if bit + 1 == span {
            *carry = true;
            break;
        }
        escaped |= 1 << (bit + 1);
        // An escaped backslash escapes nothing.
        backslash &= !(1 << (bit + 1));
    }
    escaped
}

/// Bit `i` set where byte `i` is inside a string (its opening quote included), given where the
/// `quote` bits are and whether the block began inside a string.
pub(super) fn strings(quote: u64, inside: bool) -> u64 {
    // Each quote flips in and out: the prefix XOR of the quote bits.
    let mut mask = quote;
    for shift in [1, 2, 4, 8, 16, 32] {
        mask ^= mask << shift;
    }
    if inside { !mask } else { mask }
}

// `{` and `[` differ only in bit 5, as `}` and `]` do: the comparisons mask it out.
const NOT_CASE: u8 = 0xDF;

#[inline(always)]
fn with_block<T>(bytes: &[u8], at: usize, read: impl FnOnce(&[u8; BLOCK]) -> T) -> T {
    match bytes
        .get(at..at + BLOCK)
        .and_then(|block| <&[u8; BLOCK]>::try_from(block).ok())
    {
        Some(block) => read(block),
        None => {
            let rest = bytes.get(at..).unwrap_or_default();
            let mut padded = [b' '; BLOCK];
            padded[..rest.len()].copy_from_slice(rest);
            read(&padded)
        }
    }
}

/// Calls `each` with the first `count` chunks of `block` and the bit each one starts at.
#[inline(always)]
fn for_chunks(block: &[u8; BLOCK], count: usize, mut each: impl FnMut(u32, Chunk)) {
    for (i, bytes) in block.chunks_exact(LANES).take(count).enumerate() {
        each((i * LANES) as u32, Chunk::load(bytes));
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use simd::{Chunk, LANES};
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use word::{Chunk, LANES};

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use core::arch::wasm32::{u8x16_bitmask, u8x16_eq, u8x16_lt, u8x16_splat, v128, v128_and, v128_load};

    pub(super) const LANES: usize = 16;

    /// Sixteen bytes in a SIMD register.
    #[derive(Clone, Copy)]
    pub(super) struct Chunk(v128);

    impl Chunk {
        #[inline(always)]
        pub(super) fn load(bytes: &[u8]) -> Self {
            assert!(bytes.len() >= LANES);
            // SAFETY: 16 readable bytes (checked above); `v128_load` takes any alignment.
            Self(unsafe { v128_load(bytes.as_ptr().cast()) })
        }

        #[inline(always)]
        pub(super) fn and(self, byte: u8) -> Self {
            Self(v128_and(self.0, u8x16_splat(byte)))
        }

        /// One bit per byte equal to `byte`.
        #[inline(always)]
        pub(super) fn eq(self, byte: u8) -> u64 {
            u64::from(u8x16_bitmask(u8x16_eq(self.0, u8x16_splat(byte))))
        }

        /// One bit per byte below `byte`.
        #[inline(always)]
        pub(super) fn below(self, byte: u8) -> u64 {
            u64::from(u8x16_bitmask(u8x16_lt(self.0, u8x16_splat(byte))))
        }
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod word {
    pub(super) const LANES: usize = 8;

    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const ONES: u64 = 0x0101_0101_0101_0101;

    /// Eight bytes in a machine word.
    #[derive(Clone, Copy)]
    pub(super) struct Chunk(u64);

    impl Chunk {
        #[inline(always)]
        pub(super) fn load(bytes: &[u8]) -> Self {
            let mut word = [0; LANES];
            word.copy_from_slice(&bytes[..LANES]);
            Self(u64::from_le_bytes(word))
        }

        #[inline(always)]
        pub(super) fn and(self, byte: u8) -> Self {
            Self(self.0 & (ONES * u64::from(byte)))
        }

        /// One bit per byte equal to `byte`: the high bit of each zero byte of
        /// `word ^ byte…` (exact, no borrow between bytes), gathered into the low eight bits.
        #[inline(always)]
        pub(super) fn eq(self, byte: u8) -> u64 {
            let x = self.0 ^ (ONES * u64::from(byte));
            let zero = !(((x & LOW7) + LOW7) | x | LOW7);
            gather(zero)
        }

        /// One bit per byte below `byte` (at most 0x80): the low seven bits plus `0x80 - byte`
        /// carry into the high bit exactly when they reach `byte`, and never into the next byte.
        #[inline(always)]
        pub(super) fn below(self, byte: u8) -> u64 {
            let reached = (self.0 & LOW7) + ONES * u64::from(0x80 - byte);
            gather(!(reached | self.0) & !LOW7)
        }
    }

    /// The high bit of each byte of `bits`, gathered into the low eight bits.
    #[inline(always)]
    fn gather(bits: u64) -> u64 {
        (bits >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The container and string masks as a loop over the bytes would find them.
    fn by_byte(bytes: &[u8], at: usize) -> (Block, Block) {
        let (mut container, mut string) = (Block::default(), Block::default());
        for i in 0..BLOCK {
            let bit = 1u64 << i;
            match bytes.get(at + i) {
                Some(b'"') => {
                    container.quote |= bit;
                    string.quote |= bit;
                }
                Some(b'\\') => {
                    container.backslash |= bit;
                    string.backslash |= bit;
                }
                Some(b'{' | b'[') => container.open |= bit,
                Some(b'}' | b']') => container.close |= bit,
                Some(0..0x20) => string.control |= bit,
                _ => {}
            }
        }
        (container, string)
    }

    fn check(bytes: &[u8], at: usize) {
        let (container_masks, string_masks) = by_byte(bytes, at);
        assert_eq!(container(bytes, at), container_masks, "container block at {at}");
        assert_eq!(string::<4>(bytes, at), string_masks, "string block at {at}");
        let first16 = |m: u64| m & 0xFFFF;
        let head = Block {
            quote: first16(string_masks.quote),
            backslash: first16(string_masks.backslash),
            control: first16(string_masks.control),
            ..Block::default()
        };
        assert_eq!(string::<1>(bytes, at), head, "first 16 bytes of a string at {at}");
    }

    #[test]
    fn every_byte_value_lands_in_its_own_mask_only() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for at in [0, 1, 7, 63, 64, 100, 200, 450, 511, 512] {
            check(&all, at);
        }
    }

    #[test]
    fn a_json_text_is_masked_as_by_a_byte_loop() {
        let text = br#"{"a":[1,2,{"b":"x\"}]"}],"c\\":"{[","d":{}}"#.repeat(5);
        for at in 0..=text.len() {
            check(&text, at);
        }
    }

    #[test]
    fn a_backslash_escapes_the_next_byte_unless_escaped_itself() {
        let mut carry = false;
        //                  bytes: \\ \" a \  (at 0, 1, 3, 6)
        assert_eq!(escaped(0b100_1011, 64, &mut carry), 0b1000_0010 | 0b1_0000);
        assert!(!carry);
        // A backslash in the last byte escapes the next block's first.
        assert_eq!(escaped(1 << 63, 64, &mut carry), 0);
        assert!(carry);
        assert_eq!(
            escaped(0b11, 64, &mut carry),
            0b101,
            "the first byte escaped, then `\\x`"
        );
        assert!(!carry);
        assert_eq!(escaped(1 << 15, 16, &mut carry), 0, "a 16-byte block ends at bit 15");
        assert!(carry);
    }

    #[test]
    fn strings_cover_from_the_opening_to_before_the_closing_quote() {
        //            bytes: a " b " c "  (then inside until the end)
        let quote = 0b10_1010;
        assert_eq!(strings(quote, false) & 0b11_1111, 0b10_0110);
        assert_eq!(strings(quote, false) >> 63, 1, "the last quote opens a string");
        assert_eq!(strings(quote, true) & 0b11_1111, 0b01_1001);
        assert_eq!(strings(0, true), !0);
    }
}
