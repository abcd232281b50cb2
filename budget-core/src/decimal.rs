//! Decimal digits written on the stack, for the headers written on every
//! request and call (`Server-Timing`'s milliseconds, `grpc-timeout`):
//! `write!` goes through the formatter's machinery.

/// The most digits a `u64` has.
pub(crate) const U64_DIGITS: usize = 20;

/// Writes `n` in decimal so that its last digit is at `buf[end - 1]`, and
/// returns where its first digit is. `buf[..end]` must have room for the
/// digits (at most [`U64_DIGITS`]).
pub(crate) fn digits_ending_at(buf: &mut [u8], end: usize, mut n: u64) -> usize {
    let mut at = end;
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_read_as_the_formatter_writes_them() {
        for n in [0, 7, 10, 1500, 99_999_999, u64::MAX] {
            let mut buf = [0u8; U64_DIGITS + 2];
            let start = digits_ending_at(&mut buf, U64_DIGITS + 1, n);
            assert_eq!(&buf[start..U64_DIGITS + 1], n.to_string().as_bytes());
            assert_eq!(buf[U64_DIGITS + 1], 0, "nothing after the end");
        }
    }
}
