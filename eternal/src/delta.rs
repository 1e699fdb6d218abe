//! The delta codec: COPY/ADD deltas from a base byte string to a target byte string.
//!
//! # Format (delta format version 1)
//!
//! ```text
//! delta  := magic "ETD" version:u8=1  uvarint(base_len)  uvarint(target_len)  op*
//! op     := uvarint(head) payload
//!   head & 1 == 0  ADD   n = head >> 1 (n >= 1), payload: n literal bytes
//!   head & 1 == 1  COPY  n = head >> 1 (n >= 1), payload: svarint(d); the copy reads
//!                        base[c + d .. c + d + n] where c is the base cursor, the end of the
//!                        previous COPY (0 at the start); afterwards c = c + d + n
//! ```
//!
//! The ops end exactly when `target_len` bytes have been produced, and the delta must end there
//! too. uvarint is unsigned LEB128 (at most 10 bytes, no bits beyond 64); svarint is a zigzag
//! uvarint. COPY offsets are relative to the cursor so that the common case, an edit followed by
//! the rest of the base in order, costs one or two bytes.
//!
//! # Encoder
//!
//! The encoder walks base and target in step, extending each match with chunked memcmp, so that
//! unchanged runs cost one memcmp pass. At a mismatch it resynchronises in three stages, cheapest
//! first:
//! 1. small edits: a substitution, insertion or deletion of up to [`QUICK_SPAN`] bytes;
//! 2. a local search that walks both sides forward together with a gear rolling hash, sampling
//!    content-defined anchors into two small tables, until an anchor of one side is found in the
//!    other (cost proportional to the size of the edit, bounded by [`LOCAL_LIMIT`]);
//! 3. a global index of the base's anchors, built once per encode and only when stage 2 ran out
//!    (data moved far away, or a very large insertion).
//!
//! Every match is verified byte by byte before it is used, so the heuristics only ever affect the
//! size of a delta, never its correctness.

use std::fmt;

/// The delta format version written after the magic. Versions only ever grow; a retired one stays
/// reserved here.
pub const ETERNAL_DELTA_FORMAT_VERSION: u8 = 1;
const MAGIC: [u8; 3] = *b"ETD";
/// The largest target the engine rebuilds when the caller gives no tighter limit (16 GiB).
pub(crate) const MAX_TARGET: usize = 1 << 34;
/// Header bytes before the two lengths.
const PREFIX_LEN: usize = 4;

/// A match shorter than this is not worth a COPY op.
const MIN_COPY: usize = 16;
/// Stage 1 tries edits of up to this many bytes.
const QUICK_SPAN: usize = 16;
/// Stage 2 walks at most this many bytes on each side.
const LOCAL_LIMIT: usize = 64 * 1024;
/// Bytes compared to confirm an anchor hit (the gear hash covers the last 32 bytes).
const ANCHOR_LEN: usize = 32;
/// An anchor is sampled where the top bits of the gear hash are zero: 1 position in 16.
const SAMPLE_SHIFT: u32 = 60;
/// Slots in each local anchor table (power of two).
const LOCAL_SLOTS: usize = 1 << 13;

/// Why a delta was refused by [`apply`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeltaError {
    /// The delta is malformed: truncated, bad magic, an op that reads outside its inputs.
    Invalid { offset: usize, reason: String },
    /// The delta was made for a base of another length.
    BaseMismatch { expected: u64, actual: usize },
    /// The delta's target is larger than the caller allows.
    TooLarge { target_len: u64, max: usize },
}

impl fmt::Display for DeltaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeltaError::Invalid { offset, reason } => {
                write!(f, "invalid delta at byte {offset}: {reason}")
            }
            DeltaError::BaseMismatch { expected, actual } => write!(
                f,
                "delta was made for a base of {expected} bytes, but the base has {actual} bytes"
            ),
            DeltaError::TooLarge { target_len, max } => write!(
                f,
                "delta target of {target_len} bytes exceeds the limit of {max} bytes"
            ),
        }
    }
}

impl std::error::Error for DeltaError {}

// ---------------------------------------------------------------------------------------------
// varints

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_svarint(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A cursor over the delta being decoded; every read is bounds-checked.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn invalid(&self, reason: impl Into<String>) -> DeltaError {
        DeltaError::Invalid {
            offset: self.pos,
            reason: reason.into(),
        }
    }

    fn uvarint(&mut self, what: &str) -> Result<u64, DeltaError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.invalid(format!("truncated {what}")));
            };
            if i == 9 && b > 1 {
                return Err(self.invalid(format!("{what} overflows 64 bits")));
            }
            self.pos += 1;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.invalid(format!("{what} is longer than 10 bytes")))
    }

    fn svarint(&mut self, what: &str) -> Result<i64, DeltaError> {
        let u = self.uvarint(what)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], DeltaError> {
        if self.buf.len() - self.pos < n {
            return Err(self.invalid(format!(
                "{what} of {n} bytes runs past the end of the delta ({} bytes left)",
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
}

/// The lengths a delta declares, read without applying it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub base_len: u64,
    pub target_len: u64,
}

/// Reads and checks a delta's header.
pub fn header(delta: &[u8]) -> Result<(Header, usize), DeltaError> {
    if delta.len() < PREFIX_LEN {
        return Err(DeltaError::Invalid {
            offset: 0,
            reason: format!("{} bytes is too short for a delta header", delta.len()),
        });
    }
    if delta[..3] != MAGIC {
        return Err(DeltaError::Invalid {
            offset: 0,
            reason: "bad magic (not an Eternal delta)".into(),
        });
    }
    if delta[3] != ETERNAL_DELTA_FORMAT_VERSION {
        return Err(DeltaError::Invalid {
            offset: 3,
            reason: format!(
                "delta format version {} is not supported (supported: {ETERNAL_DELTA_FORMAT_VERSION})",
                delta[3]
            ),
        });
    }
    let mut r = Reader {
        buf: delta,
        pos: PREFIX_LEN,
    };
    let base_len = r.uvarint("base length")?;
    let target_len = r.uvarint("target length")?;
    Ok((
        Header {
            base_len,
            target_len,
        },
        r.pos,
    ))
}

/// One op of a delta, as [`walk`] yields it: already checked against the base and the target.
enum Op<'a> {
    Add(&'a [u8]),
    Copy { off: usize, n: usize },
}

/// Walks the ops of a delta whose header said `target_len` bytes, checking every op against
/// `base_len` and the target, and the end of the delta. `f` sees each op once it is known valid.
fn walk<'a>(
    delta: &'a [u8],
    start: usize,
    base_len: usize,
    target_len: usize,
    mut f: impl FnMut(usize, Op<'a>),
) -> Result<(), DeltaError> {
    let mut r = Reader {
        buf: delta,
        pos: start,
    };
    let mut produced = 0usize;
    let mut cursor: u64 = 0;
    while produced < target_len {
        let op_at = r.pos;
        let head = r.uvarint("op header")?;
        let n = head >> 1;
        let remaining = (target_len - produced) as u64;
        if n == 0 {
            return Err(DeltaError::Invalid {
                offset: op_at,
                reason: "op of length 0".into(),
            });
        }
        if n > remaining {
            return Err(DeltaError::Invalid {
                offset: op_at,
                reason: format!("op of {n} bytes overruns the target ({remaining} bytes left)"),
            });
        }
        let n = n as usize;
        if head & 1 == 0 {
            let lit = r.bytes(n, "ADD literal")?;
            f(produced, Op::Add(lit));
        } else {
            let d = r.svarint("COPY offset")?;
            let off = (cursor as i128) + (d as i128);
            if off < 0 || off + n as i128 > base_len as i128 {
                return Err(DeltaError::Invalid {
                    offset: op_at,
                    reason: format!(
                        "COPY of {n} bytes at base offset {off} reads outside the base ({base_len} bytes)"
                    ),
                });
            }
            let off = off as usize;
            f(produced, Op::Copy { off, n });
            cursor = (off + n) as u64;
        }
        produced += n;
    }
    if r.pos != delta.len() {
        return Err(DeltaError::Invalid {
            offset: r.pos,
            reason: format!(
                "{} trailing bytes after the target was complete",
                delta.len() - r.pos
            ),
        });
    }
    Ok(())
}

/// Validates a whole delta for a base of `base_len` bytes without producing the target, and
/// returns the target's length. It refuses exactly what [`apply`] refuses, so a caller can size
/// an output buffer from it without trusting a forged length.
pub fn check(base_len: usize, delta: &[u8], max_target_len: usize) -> Result<usize, DeltaError> {
    let (h, start) = header(delta)?;
    if h.base_len != base_len as u64 {
        return Err(DeltaError::BaseMismatch {
            expected: h.base_len,
            actual: base_len,
        });
    }
    if h.target_len > max_target_len as u64 {
        return Err(DeltaError::TooLarge {
            target_len: h.target_len,
            max: max_target_len,
        });
    }
    let target_len = h.target_len as usize;
    walk(delta, start, base_len, target_len, |_, _| {})?;
    Ok(target_len)
}

/// Rebuilds the target into `out`, which must hold at least the target's length, and returns
/// that length. Every op is checked before it writes; on error `out` may hold a partial target.
pub fn apply_into(base: &[u8], delta: &[u8], out: &mut [u8]) -> Result<usize, DeltaError> {
    let (h, start) = header(delta)?;
    if h.base_len != base.len() as u64 {
        return Err(DeltaError::BaseMismatch {
            expected: h.base_len,
            actual: base.len(),
        });
    }
    if h.target_len > out.len() as u64 {
        return Err(DeltaError::TooLarge {
            target_len: h.target_len,
            max: out.len(),
        });
    }
    let target_len = h.target_len as usize;
    walk(delta, start, base.len(), target_len, |at, op| match op {
        Op::Add(lit) => out[at..at + lit.len()].copy_from_slice(lit),
        Op::Copy { off, n } => out[at..at + n].copy_from_slice(&base[off..off + n]),
    })?;
    Ok(target_len)
}

/// Rebuilds the target from `base` and `delta`, refusing any delta that is malformed, made for a
/// base of another length, or whose target exceeds `max_target_len` bytes. The delta is checked
/// in full before the target is allocated, so a forged length costs no memory.
pub fn apply(base: &[u8], delta: &[u8], max_target_len: usize) -> Result<Vec<u8>, DeltaError> {
    let target_len = check(base.len(), delta, max_target_len)?;
    let mut out = vec![0u8; target_len];
    apply_into(base, delta, &mut out)?;
    Ok(out)
}

/// Writes ops into a delta, merging nothing and checking nothing: the encoder is its only user.
struct Emitter<'a> {
    out: &'a mut Vec<u8>,
    cursor: usize,
}

impl Emitter<'_> {
    fn add(&mut self, lit: &[u8]) {
        if lit.is_empty() {
            return;
        }
        put_uvarint(self.out, (lit.len() as u64) << 1);
        self.out.extend_from_slice(lit);
    }

    fn copy(&mut self, off: usize, n: usize) {
        debug_assert!(n > 0);
        put_uvarint(self.out, ((n as u64) << 1) | 1);
        put_svarint(self.out, off as i64 - self.cursor as i64);
        self.cursor = off + n;
    }
}

/// Writes a delta that rebuilds `target` from nothing but literals: what an engine without an
/// encoder (the Go fallback) produces. Exposed so both sides agree on its exact bytes.
pub fn encode_literal(base_len: usize, target: &[u8], out: &mut Vec<u8>) {
    out.clear();
    write_header(base_len, target.len(), out);
    Emitter { out, cursor: 0 }.add(target);
}

fn write_header(base_len: usize, target_len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.push(ETERNAL_DELTA_FORMAT_VERSION);
    put_uvarint(out, base_len as u64);
    put_uvarint(out, target_len as u64);
}

// ---------------------------------------------------------------------------------------------
// matching

/// Length of the common prefix of `a` and `b`: large chunks through memcmp, then words.
#[inline]
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut off = 0;
    // Most mismatches after a resync are close; look at the first words before any memcmp call.
    while off + 8 <= n && off < 32 {
        let x = word(a, off) ^ word(b, off);
        if x != 0 {
            return off + (x.trailing_zeros() / 8) as usize;
        }
        off += 8;
    }
    for chunk in [4096usize, 128] {
        while off + chunk <= n && a[off..off + chunk] == b[off..off + chunk] {
            off += chunk;
        }
    }
    while off + 8 <= n {
        let x = word(a, off) ^ word(b, off);
        if x != 0 {
            return off + (x.trailing_zeros() / 8) as usize;
        }
        off += 8;
    }
    while off < n && a[off] == b[off] {
        off += 1;
    }
    off
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Length of the common suffix of `a[..ai]` and `b[..bi]`, at most `limit`.
#[inline]
fn common_suffix(a: &[u8], ai: usize, b: &[u8], bi: usize, limit: usize) -> usize {
    let max = ai.min(bi).min(limit);
    let mut k = 0;
    while k < max && a[ai - 1 - k] == b[bi - 1 - k] {
        k += 1;
    }
    k
}

/// The gear table: one pseudo-random 64-bit value per byte (splitmix64 of the byte), fixed
/// forever because it only steers the search, never the format.
const GEAR: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    let mut x: u64 = 0x6A09_E667_F3BC_C909;
    while i < 256 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        t[i] = z ^ (z >> 31);
        i += 1;
    }
    t
};

/// Gear hash step: shifting by 2 makes the hash depend on the last 32 bytes only.
#[inline(always)]
fn gear(h: u64, b: u8) -> u64 {
    (h << 2).wrapping_add(GEAR[b as usize])
}

#[inline(always)]
fn sampled(h: u64) -> bool {
    h >> SAMPLE_SHIFT == 0
}

/// A lossy open-addressed map from anchor hash to the position where the anchor ends, cleared in
/// O(1) by bumping a generation.
struct AnchorTable {
    keys: Vec<u64>,
    pos: Vec<u32>,
    gens: Vec<u32>,
    gen: u32,
    mask: usize,
}

impl AnchorTable {
    fn new(slots: usize) -> Self {
        debug_assert!(slots.is_power_of_two());
        AnchorTable {
            keys: vec![0; slots],
            pos: vec![0; slots],
            gens: vec![0; slots],
            gen: 1,
            mask: slots - 1,
        }
    }

    fn clear(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.gens.iter_mut().for_each(|g| *g = 0);
            self.gen = 1;
        }
    }

    #[inline(always)]
    fn slot(&self, h: u64) -> usize {
        // The low bits of a gear hash come from the newest byte only; mix before indexing.
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask
    }

    /// Records that an anchor with hash `h` ends at `p`, unless the same anchor was seen
    /// earlier: the earliest occurrence wins. Text that repeats (a plan's near-identical
    /// steps) then aligns with where the walk began rather than with a later look-alike, which
    /// would shift every following match by a step and cost a few bytes per step.
    #[inline(always)]
    fn insert(&mut self, h: u64, p: usize) {
        let s = self.slot(h);
        if self.gens[s] == self.gen && self.keys[s] == h {
            return;
        }
        self.keys[s] = h;
        self.pos[s] = p as u32;
        self.gens[s] = self.gen;
    }

    #[inline(always)]
    fn get(&self, h: u64) -> Option<usize> {
        let s = self.slot(h);
        (self.gens[s] == self.gen && self.keys[s] == h).then(|| self.pos[s] as usize)
    }
}

/// Reusable scratch for encoding: the anchor tables survive between calls so that the steady
/// state allocates only the output. One encoder serves one thread at a time.
pub struct Encoder {
    local_target: AnchorTable,
    local_base: AnchorTable,
    global: AnchorTable,
    global_ready: bool,
    /// Bytes the local search hashed, both sides (the tests count the search's work).
    #[cfg(test)]
    walked: usize,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    pub fn new() -> Self {
        Encoder {
            local_target: AnchorTable::new(LOCAL_SLOTS),
            local_base: AnchorTable::new(LOCAL_SLOTS),
            global: AnchorTable::new(1),
            global_ready: false,
            #[cfg(test)]
            walked: 0,
        }
    }

    /// Encodes a delta from `base` to `target` into `out` (cleared first).
    pub fn encode(&mut self, base: &[u8], target: &[u8], out: &mut Vec<u8>) {
        self.encode_inserted(base, target, 0, out)
    }

    /// Encodes a delta from `base` to `target` into `out` (cleared first), told that the first
    /// `inserted` bytes of `target` are new and what follows them continues `base` from its
    /// start: the search begins there instead of walking the new bytes to find where `base`
    /// resumes. The hint is advice: the delta is correct whatever it says, and a wrong one costs
    /// only bytes (the inserted span is written literally).
    pub fn encode_inserted(
        &mut self,
        base: &[u8],
        target: &[u8],
        inserted: usize,
        out: &mut Vec<u8>,
    ) {
        out.clear();
        write_header(base.len(), target.len(), out);
        if base.len() > u32::MAX as usize || target.len() > u32::MAX as usize {
            // Anchor tables hold 32-bit positions; states this large are out of scope for
            // deltas, so they travel as literals (the chain then writes a keyframe).
            Emitter { out, cursor: 0 }.add(target);
            return;
        }
        self.global_ready = false;
        let mut em = Emitter { out, cursor: 0 };
        let (mut i, mut j) = (inserted.min(target.len()), 0usize);
        let mut add_start = 0usize;
        while i < target.len() {
            if j < base.len() {
                let m = common_prefix(&target[i..], &base[j..]);
                if m >= MIN_COPY || (m > 0 && i + m == target.len()) {
                    em.add(&target[add_start..i]);
                    em.copy(j, m);
                    i += m;
                    j += m;
                    add_start = i;
                    continue;
                }
            }
            match self.resync(base, target, i, j, add_start) {
                Some((ti, bj)) => {
                    i = ti;
                    j = bj;
                }
                None => break,
            }
        }
        em.add(&target[add_start..]);
    }

    /// Finds the next place at or after target position `i` where a match of at least
    /// [`MIN_COPY`] bytes starts, extended backwards as far as `add_start` allows.
    fn resync(
        &mut self,
        base: &[u8],
        target: &[u8],
        i: usize,
        j: usize,
        add_start: usize,
    ) -> Option<(usize, usize)> {
        if let Some(hit) = quick_resync(base, target, i, j) {
            return Some(hit);
        }
        let (hit, exhausted) = self.local_resync(base, target, i, j);
        if let Some((ti, bj)) = hit {
            let back = common_suffix(target, ti, base, bj, ti - add_start);
            return Some((ti - back, bj - back));
        }
        if exhausted {
            return None;
        }
        self.global_resync(base, target, i, add_start)
    }

    /// Walks target from `i` and base from `j` together, hashing both with the gear hash; a
    /// sampled anchor of one side is looked up among the other side's anchors seen so far.
    /// Returns the hit (start of the verified anchor in target and base), and whether both sides
    /// ran out before the step limit.
    fn local_resync(
        &mut self,
        base: &[u8],
        target: &[u8],
        i: usize,
        j: usize,
    ) -> (Option<(usize, usize)>, bool) {
        self.local_target.clear();
        self.local_base.clear();
        let t_end = target.len().min(i + LOCAL_LIMIT);
        let b_end = base.len().min(j + LOCAL_LIMIT);
        let (mut ht, mut hb) = (0u64, 0u64);
        let (mut tp, mut bp) = (i, j);
        while tp < t_end || bp < b_end {
            #[cfg(test)]
            {
                self.walked += 2;
            }
            if tp < t_end {
                ht = gear(ht, target[tp]);
                tp += 1;
                if tp - i >= ANCHOR_LEN && sampled(ht) {
                    if let Some(be) = self.local_base.get(ht) {
                        let (ts, bs) = (tp - ANCHOR_LEN, be - ANCHOR_LEN);
                        if target[ts..tp] == base[bs..be] {
                            return (Some((ts, bs)), false);
                        }
                    }
                    self.local_target.insert(ht, tp);
                }
            }
            if bp < b_end {
                hb = gear(hb, base[bp]);
                bp += 1;
                if bp - j >= ANCHOR_LEN && sampled(hb) {
                    if let Some(te) = self.local_target.get(hb) {
                        let (ts, bs) = (te - ANCHOR_LEN, bp - ANCHOR_LEN);
                        if target[ts..te] == base[bs..bp] {
                            return (Some((ts, bs)), false);
                        }
                    }
                    self.local_base.insert(hb, bp);
                }
            }
        }
        let exhausted = t_end == target.len() && b_end == base.len();
        (None, exhausted)
    }

    /// Scans target from `i` against an index of every sampled anchor of the whole base.
    fn global_resync(
        &mut self,
        base: &[u8],
        target: &[u8],
        i: usize,
        add_start: usize,
    ) -> Option<(usize, usize)> {
        if !self.global_ready {
            let want = (base.len() / 8).next_power_of_two().max(1024);
            if self.global.keys.len() != want {
                self.global = AnchorTable::new(want);
            } else {
                self.global.clear();
            }
            let mut h = 0u64;
            for (p, &b) in base.iter().enumerate() {
                h = gear(h, b);
                if p + 1 >= ANCHOR_LEN && sampled(h) {
                    self.global.insert(h, p + 1);
                }
            }
            self.global_ready = true;
        }
        let mut h = 0u64;
        for tp in i..target.len() {
            h = gear(h, target[tp]);
            let end = tp + 1;
            if end - i >= ANCHOR_LEN && sampled(h) {
                if let Some(be) = self.global.get(h) {
                    let (ts, bs) = (end - ANCHOR_LEN, be - ANCHOR_LEN);
                    if target[ts..end] == base[bs..be] {
                        let back = common_suffix(target, ts, base, bs, ts - add_start);
                        return Some((ts - back, bs - back));
                    }
                }
            }
        }
        None
    }
}

/// Stage 1: a substitution, insertion or deletion of up to [`QUICK_SPAN`] bytes at (i, j).
fn quick_resync(base: &[u8], target: &[u8], i: usize, j: usize) -> Option<(usize, usize)> {
    let eq = |ti: usize, bj: usize| {
        ti + MIN_COPY <= target.len()
            && bj + MIN_COPY <= base.len()
            && target[ti..ti + MIN_COPY] == base[bj..bj + MIN_COPY]
    };
    for k in 1..=QUICK_SPAN {
        if eq(i + k, j + k) {
            return Some((i + k, j + k));
        }
        if eq(i + k, j) {
            return Some((i + k, j));
        }
        if eq(i, j + k) {
            return Some((i, j + k));
        }
    }
    None
}

/// Encodes a delta with a fresh encoder (convenience for tests and one-off callers).
pub fn encode(base: &[u8], target: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Encoder::new().encode(base, target, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator so tests need no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
        /// Text-like bytes: words from a small vocabulary, as agent state mostly is.
        fn text(&mut self, n: usize) -> Vec<u8> {
            const WORDS: [&str; 12] = [
                "the",
                "tool",
                "result",
                "file",
                "\"path\":",
                "{",
                "}",
                "ok",
                "line",
                "error",
                "agent",
                "\n",
            ];
            let mut v = Vec::with_capacity(n + 16);
            while v.len() < n {
                v.extend_from_slice(WORDS[self.below(WORDS.len())].as_bytes());
                v.push(b' ');
                if self.below(8) == 0 {
                    v.extend_from_slice(self.next().to_string().as_bytes());
                }
            }
            v.truncate(n);
            v
        }
    }

    fn roundtrip(base: &[u8], target: &[u8]) -> Vec<u8> {
        let d = encode(base, target);
        let got = apply(base, &d, usize::MAX).expect("apply own delta");
        assert!(got == target, "round trip mismatch");
        d
    }

    #[test]
    fn empty_and_identical() {
        roundtrip(b"", b"");
        roundtrip(b"abc", b"");
        roundtrip(b"", b"abc");
        let x = Rng(1).bytes(10_000);
        let d = roundtrip(&x, &x);
        assert!(d.len() < 16, "identical inputs gave {} bytes", d.len());
    }

    #[test]
    fn scattered_edits_in_one_megabyte_stay_small() {
        let mut rng = Rng(7);
        let base = rng.text(1 << 20);
        let mut target = base.clone();
        for _ in 0..10 {
            let at = rng.below(target.len() - 100);
            match rng.below(3) {
                0 => target[at] ^= 0x5a,
                1 => {
                    let ins = rng.text(20);
                    target.splice(at..at, ins);
                }
                _ => {
                    target.drain(at..at + 5);
                }
            }
        }
        let d = roundtrip(&base, &target);
        assert!(d.len() < 1024, "delta of {} bytes for 10 edits", d.len());
    }

    #[test]
    fn append_mostly_state() {
        // A header counter changes, a record is appended in the middle, a trailer changes.
        let mut rng = Rng(9);
        let head = rng.text(200);
        let hist = rng.text(500_000);
        let tail = rng.text(3_000);
        let rec = rng.text(1_500);
        let mut base = head.clone();
        base.extend_from_slice(&hist);
        base.extend_from_slice(&tail);
        let mut target = head.clone();
        target[10] = b'#';
        target.extend_from_slice(&hist);
        target.extend_from_slice(&rec);
        target.extend_from_slice(&tail);
        let n = target.len();
        target[n - 7] = b'!';
        let d = roundtrip(&base, &target);
        assert!(
            d.len() < rec.len() + 100,
            "delta {} for a {} byte append",
            d.len(),
            rec.len()
        );
    }

    /// The state's tail after its log grew: new entries, then the rest (a few fields changed).
    fn grown_tail(rng: &mut Rng) -> (Vec<u8>, Vec<u8>, usize) {
        let rest = rng.text(6_000);
        let entries = rng.text(2_000);
        let mut target = entries.clone();
        target.extend_from_slice(&rest);
        for k in [10, 3_000, 5_990] {
            target[entries.len() + k] ^= 0x21;
        }
        (rest, target, entries.len())
    }

    #[test]
    fn an_insert_hint_starts_the_match_after_the_new_bytes() {
        let (base, target, inserted) = grown_tail(&mut Rng(21));
        let mut e = Encoder::new();
        let mut told = Vec::new();
        e.encode_inserted(&base, &target, inserted, &mut told);
        assert!(apply(&base, &told, usize::MAX).unwrap() == target);
        // Told, the search does not walk the new bytes (the rest's few changed bytes are small
        // edits); untold, it walks them on both sides before the rest shows up.
        let told_walk = e.walked;
        e.walked = 0;
        let mut d = Vec::new();
        e.encode(&base, &target, &mut d);
        assert!(
            told_walk < 64 && e.walked >= inserted,
            "the search walked {told_walk} bytes told, {} untold, {inserted} inserted",
            e.walked
        );
        let untold = roundtrip(&base, &target);
        assert!(
            told.len() <= untold.len() && told.len() < inserted + 60,
            "told {} bytes, untold {}, {inserted} inserted",
            told.len(),
            untold.len()
        );
    }

    #[test]
    fn any_insert_hint_gives_a_correct_delta() {
        let mut rng = Rng(22);
        let mut e = Encoder::new();
        let mut d = Vec::new();
        for round in 0..200 {
            let (base, target) = if round % 2 == 0 {
                let (b, t, _) = grown_tail(&mut rng);
                (b, t)
            } else {
                let (n, m) = (rng.below(3_000), rng.below(3_000));
                (rng.text(n), rng.bytes(m))
            };
            let some = rng.below(target.len() + 1);
            for hint in [0, 1, some, target.len(), target.len() + 1, usize::MAX] {
                e.encode_inserted(&base, &target, hint, &mut d);
                let got = apply(&base, &d, usize::MAX).expect("apply");
                assert!(
                    got == target,
                    "round {round}, hint {hint}: round trip mismatch"
                );
            }
        }
    }

    /// A plan-like skeleton: thousands of near-identical entries that differ in a few digits.
    fn skeleton(n: usize) -> Vec<u8> {
        const FILES: [&str; 4] = ["GPL-3", "MPL-2.0", "Apache-2.0", "LGPL-2.1"];
        let mut v = b"h\x01a\x0112:00:00".to_vec();
        for i in 0..n {
            let f = FILES[i * 7 % FILES.len()];
            v.extend_from_slice(
                format!(
                    "\x06s{i:05}\x27read /usr/share/common-licenses/{f}\x01A\x01s{:05}\x02\x00",
                    i.max(1) - 1
                )
                .as_bytes(),
            );
        }
        v
    }

    #[test]
    fn insertion_before_a_repetitive_skeleton_stays_aligned() {
        // What a checkpoint's tail looks like: new log entries, then the rest of the state (a
        // plan of near-identical steps) shifted by them, one step's status changed. Matching
        // on sampled anchors alone lands on a later, identical-looking step and pays a few
        // bytes per step for the whole plan.
        let mut rng = Rng(13);
        for (n, ins) in [(3000usize, 4_000usize), (3000, 150_000), (200, 40)] {
            let base = skeleton(n);
            let mut target = rng.text(ins);
            let mut rest = base.clone();
            // The rest's first bytes (an update time) and one step's status change.
            rest[4..12].copy_from_slice(b"12:00:07");
            let at = rest.len() / 3;
            rest[at] ^= 0x21;
            target.extend_from_slice(&rest);
            let d = roundtrip(&base, &target);
            assert!(
                d.len() < ins + 200,
                "{n} steps, {ins}-byte insertion: delta of {} bytes",
                d.len()
            );
        }
    }

    #[test]
    fn far_move_uses_global_index() {
        let mut rng = Rng(11);
        let a = rng.bytes(200_000);
        let b = rng.bytes(200_000);
        let mut base = a.clone();
        base.extend_from_slice(&b);
        let mut target = b.clone();
        target.extend_from_slice(&a);
        let d = roundtrip(&base, &target);
        assert!(d.len() < 200, "moved halves gave {} bytes", d.len());
    }

    #[test]
    fn random_pairs_roundtrip() {
        let mut rng = Rng(3);
        for round in 0..300 {
            let n = rng.below(5000);
            let base = if round % 2 == 0 {
                rng.bytes(n)
            } else {
                rng.text(n)
            };
            let mut target = base.clone();
            for _ in 0..rng.below(6) {
                if target.is_empty() {
                    target.extend(rng.bytes(10));
                    continue;
                }
                let at = rng.below(target.len());
                match rng.below(4) {
                    0 => target[at] = rng.next() as u8,
                    1 => {
                        let k = rng.below(300);
                        let ins = rng.bytes(k);
                        target.splice(at..at, ins);
                    }
                    2 => {
                        let end = (at + rng.below(300)).min(target.len());
                        target.drain(at..end);
                    }
                    _ => {
                        let end = (at + rng.below(500)).min(target.len());
                        let moved: Vec<u8> = target.drain(at..end).collect();
                        target.extend(moved);
                    }
                }
            }
            roundtrip(&base, &target);
        }
    }

    #[test]
    fn repetitive_inputs() {
        let base = vec![0u8; 100_000];
        let mut target = vec![0u8; 100_050];
        target[5_000] = 1;
        let d = roundtrip(&base, &target);
        // COPY, 1 literal, COPY, then the 50 bytes past the end of the base as a literal: the
        // encoder never indexes the whole base just because the target grew at its end.
        assert!(d.len() < 80, "{} bytes", d.len());
        let pat: Vec<u8> = b"abcabcabd".iter().cycle().take(50_000).copied().collect();
        let mut t2 = pat.clone();
        t2.insert(777, b'x');
        roundtrip(&pat, &t2);
    }

    #[test]
    fn literal_delta_applies() {
        let mut out = Vec::new();
        encode_literal(3, b"hello", &mut out);
        assert_eq!(apply(b"abc", &out, 100).unwrap(), b"hello");
        encode_literal(3, b"", &mut out);
        assert_eq!(apply(b"abc", &out, 100).unwrap(), b"");
    }

    #[test]
    fn forged_deltas_are_refused() {
        let base = b"0123456789abcdefghij".to_vec();
        let target = b"0123456789ABCDEFghij-tail".to_vec();
        let good = encode(&base, &target);
        assert_eq!(apply(&base, &good, 1 << 20).unwrap(), target);

        // Every truncation fails.
        for n in 0..good.len() {
            assert!(
                apply(&base, &good[..n], 1 << 20).is_err(),
                "truncated to {n}"
            );
        }
        // Trailing garbage fails.
        let mut long = good.clone();
        long.push(0);
        assert!(apply(&base, &long, 1 << 20).is_err());
        // Wrong base length, bad magic, bad version.
        assert!(matches!(
            apply(&base[1..], &good, 1 << 20),
            Err(DeltaError::BaseMismatch { .. })
        ));
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(apply(&base, &bad, 1 << 20).is_err());
        let mut bad = good.clone();
        bad[3] = 9;
        let e = apply(&base, &bad, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("version 9") && e.contains("supported: 1"), "{e}");
        // Declared target over the limit.
        assert!(matches!(
            apply(&base, &good, 4),
            Err(DeltaError::TooLarge { .. })
        ));
        // A COPY that points past the base.
        let mut forged = Vec::new();
        write_header(base.len(), 10, &mut forged);
        put_uvarint(&mut forged, (10 << 1) | 1);
        put_svarint(&mut forged, 15);
        let e = apply(&base, &forged, 1 << 20).unwrap_err().to_string();
        assert!(e.contains("outside the base"), "{e}");
        // A negative COPY offset.
        let mut forged = Vec::new();
        write_header(base.len(), 4, &mut forged);
        put_uvarint(&mut forged, (4 << 1) | 1);
        put_svarint(&mut forged, -1);
        assert!(apply(&base, &forged, 1 << 20).is_err());
        // A huge declared target with tiny ops is refused without a huge allocation.
        let mut forged = Vec::new();
        write_header(base.len(), u64::MAX as usize, &mut forged);
        assert!(apply(&base, &forged, usize::MAX).is_err());
        // Overlong varints.
        let mut forged = MAGIC.to_vec();
        forged.push(ETERNAL_DELTA_FORMAT_VERSION);
        forged.extend_from_slice(&[0xff; 11]);
        assert!(apply(&base, &forged, 1 << 20).is_err());
        // Zero-length op.
        let mut forged = Vec::new();
        write_header(base.len(), 1, &mut forged);
        put_uvarint(&mut forged, 0);
        assert!(apply(&base, &forged, 1 << 20).is_err());
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = Rng(5);
        let base = rng.bytes(1000);
        for _ in 0..20_000 {
            let k = rng.below(64);
            let mut d = rng.bytes(k);
            if rng.below(2) == 0 && d.len() >= 4 {
                d[..3].copy_from_slice(&MAGIC);
                d[3] = ETERNAL_DELTA_FORMAT_VERSION;
            }
            let _ = apply(&base, &d, 1 << 16);
        }
        // Mutations of a valid delta.
        let target = rng.bytes(1200);
        let good = encode(&base, &target);
        for _ in 0..20_000 {
            let mut d = good.clone();
            let at = rng.below(d.len());
            d[at] ^= 1 << rng.below(8);
            if let Ok(t) = apply(&base, &d, 1 << 16) {
                assert!(t.len() <= 1 << 16);
            }
        }
    }

    #[test]
    fn varint_edges() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_uvarint(&mut b, v);
            let mut r = Reader { buf: &b, pos: 0 };
            assert_eq!(r.uvarint("v").unwrap(), v);
            assert_eq!(r.pos, b.len());
        }
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            put_svarint(&mut b, v);
            let mut r = Reader { buf: &b, pos: 0 };
            assert_eq!(r.svarint("v").unwrap(), v);
        }
    }
}
