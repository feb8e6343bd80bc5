//! The checksum stored beside each compiled component: XXH64 (xxHash, 64
//! bits, seed 0), streamed over the file.
//!
//! It tells a damaged artifact (torn write, flipped bits) from a good one;
//! it is no defence against someone who can write the cache directory, who
//! could rewrite the checksum as well, which is why the directory must be
//! private to the user. A cryptographic hash would add nothing there and
//! costs several times as much: checking a 35 MB artifact of a Python
//! plugin with SHA-256 took longer than loading it.

use std::io::Read;

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

/// Bytes read at once; a multiple of the 32-byte stripe.
const BUF: usize = 1 << 20;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// XXH64 of everything `reader` yields.
pub(crate) fn xxh64(mut reader: impl Read) -> std::io::Result<u64> {
    let mut v = [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)];
    let mut buf = vec![0u8; BUF];
    let mut total: u64 = 0;
    let mut tail = Vec::new();
    loop {
        let n = fill(&mut reader, &mut buf)?;
        total += n as u64;
        let full = n - n % 32;
        for stripe in buf[..full].chunks_exact(32) {
            for (lane, chunk) in v.iter_mut().zip(stripe.chunks_exact(8)) {
                *lane = round(*lane, word(chunk));
            }
        }
        if n < BUF {
            tail.extend_from_slice(&buf[full..n]);
            break;
        }
    }
    let mut h = if total >= 32 {
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge(h, lane);
        }
        h
    } else {
        P5
    };
    h = h.wrapping_add(total);
    let mut rest = tail.as_slice();
    while rest.len() >= 8 {
        h ^= round(0, word(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&rest[..4]);
        h ^= u64::from(u32::from_le_bytes(w)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for &b in rest {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    Ok(h)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn fill(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match reader.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(bytes: &[u8]) -> u64 {
        xxh64(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn known_answers() {
        assert_eq!(of(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(of(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(of(b"abc"), 0x44BC_2CF5_AD77_0999);
    }

    #[test]
    fn stripes_buffers_and_tails_agree_with_one_flipped_bit() {
        // Long enough for several buffers and a tail of each kind.
        let data: Vec<u8> = (0..(2 * BUF + 45))
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let whole = of(&data);
        // Read in odd pieces: the same answer.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(out.len()).min(777);
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        assert_eq!(xxh64(Trickle(&data)).unwrap_or_default(), whole);
        for at in [0, 31, BUF - 1, BUF + 8, data.len() - 1] {
            let mut damaged = data.clone();
            damaged[at] ^= 0x80;
            assert_ne!(of(&damaged), whole, "flip at {at}");
        }
        assert_ne!(of(&data[..data.len() - 1]), whole);
    }
}
