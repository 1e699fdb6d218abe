//! XXH64, the content hash of the engine.
//!
//! The checkpoint chain stores the hash of every state it reconstructs, and every backend (Rust,
//! and the Go fallback through github.com/cespare/xxhash/v2) must compute the same value, so the
//! algorithm is the published XXH64 with seed 0, bit for bit. It is a corruption check, not a
//! cryptographic commitment.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

#[inline(always)]
fn read64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

#[inline(always)]
fn read32(b: &[u8], at: usize) -> u64 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes")) as u64
}

#[inline(always)]
fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

#[inline(always)]
fn merge(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// The four XXH64 accumulators after some whole number of 32-byte stripes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acc([u64; 4]);

impl Acc {
    /// The accumulators before any stripe.
    pub fn new() -> Self {
        Acc([P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)])
    }

    /// Consumes whole stripes; `data.len()` must be a multiple of 32.
    pub fn stripes(mut self, data: &[u8]) -> Self {
        debug_assert!(data.len() % 32 == 0);
        for s in data.chunks_exact(32) {
            self.0[0] = round(self.0[0], read64(s, 0));
            self.0[1] = round(self.0[1], read64(s, 8));
            self.0[2] = round(self.0[2], read64(s, 16));
            self.0[3] = round(self.0[3], read64(s, 24));
        }
        self
    }
}

impl Default for Acc {
    fn default() -> Self {
        Self::new()
    }
}

/// Finishes XXH64 of a `total`-byte input whose whole stripes were consumed into `acc` and whose
/// remaining `tail` (fewer than 32 bytes) follows.
pub fn finish(acc: Acc, total: u64, tail: &[u8]) -> u64 {
    let mut h: u64 = if total >= 32 {
        let [v1, v2, v3, v4] = acc.0;
        let mut h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
        h = merge(h, v1);
        h = merge(h, v2);
        h = merge(h, v3);
        merge(h, v4)
    } else {
        P5
    };
    h = h.wrapping_add(total);
    let mut at = 0;
    let len = tail.len();
    while at + 8 <= len {
        h ^= round(0, read64(tail, at));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        at += 8;
    }
    if at + 4 <= len {
        h ^= read32(tail, at).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        at += 4;
    }
    while at < len {
        h ^= (tail[at] as u64).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
        at += 1;
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

/// Bytes between two saved accumulator snapshots in [`Snapshots`].
pub(crate) const SNAPSHOT_EVERY: usize = 4 * 1024;

/// XXH64 of a byte string that changes only at its end: accumulators are saved every
/// [`SNAPSHOT_EVERY`] bytes, so after the first `keep` bytes stay the same, rehashing costs the
/// bytes after the last snapshot at or before `keep`, not the whole string.
#[derive(Clone, Debug, Default)]
pub struct Snapshots {
    /// `snaps[i]` is the accumulator after `i * SNAPSHOT_EVERY` bytes.
    snaps: Vec<Acc>,
}

impl Snapshots {
    /// Hashes `data`, of which the first `keep` bytes are unchanged since the previous call
    /// (pass 0 when nothing is known). Returns exactly `xxh64(data)`.
    pub fn hash(&mut self, data: &[u8], keep: usize) -> u64 {
        let keep_snaps = (keep.min(data.len()) / SNAPSHOT_EVERY) + 1;
        self.snaps.truncate(keep_snaps);
        if self.snaps.is_empty() {
            self.snaps.push(Acc::new());
        }
        let mut at = (self.snaps.len() - 1) * SNAPSHOT_EVERY;
        let mut acc = *self.snaps.last().expect("one snapshot");
        let whole = data.len() - data.len() % 32;
        while at < whole {
            let end = (at + SNAPSHOT_EVERY).min(whole);
            acc = acc.stripes(&data[at..end]);
            at = end;
            if at % SNAPSHOT_EVERY == 0 && at / SNAPSHOT_EVERY == self.snaps.len() {
                self.snaps.push(acc);
            }
        }
        finish(acc, data.len() as u64, &data[whole..])
    }
}

/// XXH64 of `data` with seed 0.
pub fn xxh64(data: &[u8]) -> u64 {
    let whole = data.len() - data.len() % 32;
    finish(
        Acc::new().stripes(&data[..whole]),
        data.len() as u64,
        &data[whole..],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        // Reference values from the xxHash project (XXH64, seed 0).
        assert_eq!(xxh64(b""), 0xEF46_DB37_51D8_E999);
        assert_eq!(xxh64(b"a"), 0xD24E_C4F1_A98C_6E5B);
        assert_eq!(xxh64(b"abc"), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition"),
            0xFBCE_A83C_8A37_8BF1
        );
    }

    #[test]
    fn snapshots_match_the_one_shot_hash() {
        let mut x: u64 = 1;
        let mut data: Vec<u8> = (0..300_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut s = Snapshots::default();
        assert_eq!(s.hash(&data, 0), xxh64(&data));
        // Change the end, keep a prefix; shrink; grow; change everything.
        for (keep, new_len) in [
            (250_000usize, 310_000usize),
            (100_000, 120_000),
            (120_000, 400_000),
            (0, 31),
            (0, 200_000),
            (65_536, 65_536),
            (65_535, 70_000),
        ] {
            data.resize(new_len, 0);
            for b in data[keep.min(new_len)..].iter_mut() {
                *b = b.wrapping_add(1);
            }
            assert_eq!(
                s.hash(&data, keep),
                xxh64(&data),
                "keep {keep} len {new_len}"
            );
        }
    }

    #[test]
    fn every_length_path_differs() {
        // Lengths 0..100 cross every tail path (32-byte stripes, 8, 4 and 1 byte tails).
        let data: Vec<u8> = (0..100u8).collect();
        let mut seen = std::collections::HashSet::new();
        for n in 0..data.len() {
            assert!(seen.insert(xxh64(&data[..n])), "collision at length {n}");
        }
    }
}
