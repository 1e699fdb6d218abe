//! The checkpoint chain: turns each new state into the next record (a delta against the
//! previous state, or a keyframe when the policy says so), links records with a hash chain, and
//! replays records back into state bytes, verifying every hash.
//!
//! A record rebuilds its state as follows. A keyframe's payload is the whole state. A delta
//! keeps the base state's first `prefix` bytes and applies the payload (a delta in the format of
//! [`crate::delta`]) to the rest of the base. The state hash is XXH64 of the whole state; the
//! chain hash is [`link`] of the previous record's chain hash and this record. Both are the same
//! in every backend (the Go fallback computes them with xxhash), so any backend replays any
//! chain.

use crate::delta;
use crate::hash::{xxh64, Snapshots};
use std::fmt;

/// Record kinds; the values are those of the record envelope (statefmt.RecordKind).
pub const KIND_KEYFRAME: u32 = 1;
pub const KIND_DELTA: u32 = 2;

/// What a record says about itself, apart from its payload. Shared with the C ABI.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct eternal_record_info {
    /// [`KIND_KEYFRAME`] or [`KIND_DELTA`].
    pub kind: u32,
    /// Always 0; keeps the layout free of implicit padding.
    pub reserved: u32,
    /// This record's sequence number (from 1).
    pub seq: u64,
    /// The record a delta applies to (seq - 1); seq itself for a keyframe.
    pub base_seq: u64,
    /// Bytes of the base state a delta keeps as they are (0 for a keyframe).
    pub prefix: u64,
    /// XXH64 of the state this record rebuilds.
    pub state_hash: u64,
    /// [`link`] of the previous record's chain hash and this record.
    pub chain_hash: u64,
    /// Length of the payload.
    pub raw_len: u64,
    /// Length of the state this record rebuilds.
    pub state_len: u64,
}

/// The chain hash of a record: XXH64 over the previous chain hash and every field that decides
/// what the record rebuilds, with the payload's own hash.
pub fn link(prev: u64, info: &eternal_record_info, payload: &[u8]) -> u64 {
    let mut b = [0u8; 8 * 8];
    let fields = [
        prev,
        info.kind as u64,
        info.seq,
        info.base_seq,
        info.prefix,
        info.state_hash,
        info.state_len,
        xxh64(payload),
    ];
    for (i, f) in fields.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
    }
    xxh64(&b)
}

/// When to write a keyframe instead of a delta.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// At most this many deltas follow a keyframe, so a restore replays at most this many.
    pub max_replay: u32,
    /// A keyframe is written when the delta bytes since the last keyframe would exceed this
    /// percentage of the state's size, so a chain stays within a small multiple of its state
    /// even when every step rewrites it. The default, 200%, never fires on append-mostly
    /// states (whose chains stay near the state's size anyway: a delta carries a little more
    /// than the bytes appended), where a lower bound would force needless keyframes.
    pub max_delta_pct: u32,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_replay: 1000,
            max_delta_pct: 200,
        }
    }
}

/// Why a record was refused by [`Chain::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    pub seq: u64,
    pub reason: String,
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "record {}: {}", self.seq, self.reason)
    }
}

impl std::error::Error for ChainError {}

/// One harness's chain: the current state, where the chain stands, and reusable scratch.
pub struct Chain {
    policy: Policy,
    state: Vec<u8>,
    hashes: Snapshots,
    head: eternal_record_info,
    has_state: bool,
    deltas_since_key: u32,
    delta_bytes_since_key: u64,
    encoder: delta::Encoder,
    scratch: Vec<u8>,
}

impl Chain {
    pub fn new(policy: Policy) -> Self {
        Chain {
            policy,
            state: Vec::new(),
            hashes: Snapshots::default(),
            head: eternal_record_info::default(),
            has_state: false,
            deltas_since_key: 0,
            delta_bytes_since_key: 0,
            encoder: delta::Encoder::new(),
            scratch: Vec::new(),
        }
    }

    /// The head record's info (all zero before the first record).
    pub fn head(&self) -> eternal_record_info {
        self.head
    }

    /// The current state bytes.
    pub fn state(&self) -> &[u8] {
        &self.state
    }

    fn reset(&mut self) {
        self.state.clear();
        self.hashes = Snapshots::default();
        self.head = eternal_record_info::default();
        self.has_state = false;
        self.deltas_since_key = 0;
        self.delta_bytes_since_key = 0;
    }

    /// Makes the next record for `new`, whose first `prefix_hint` bytes the caller knows to be
    /// unchanged since the previous state (0 when it knows nothing). Returns the record's info
    /// and payload. The hint is a promise: state encoders that lay out append-only data first
    /// (statefmt's BinaryEncoder) can make it; a wrong hint corrupts the chain.
    pub fn append(&mut self, new: &[u8], prefix_hint: usize) -> (eternal_record_info, Vec<u8>) {
        self.append_inserted(new, prefix_hint, 0)
    }

    /// Appends as [`Chain::append`] does, told also that the `insert_hint` bytes after the
    /// unchanged prefix are new and the rest of the previous state follows them (the state's log
    /// grew at its end, and what came after it moved along). A wrong insert hint costs only
    /// bytes; a wrong prefix hint corrupts the chain.
    pub fn append_inserted(
        &mut self,
        new: &[u8],
        prefix_hint: usize,
        insert_hint: usize,
    ) -> (eternal_record_info, Vec<u8>) {
        let seq = self.head.seq + 1;
        let keep = prefix_hint.min(new.len()).min(self.state.len());
        debug_assert!(new[..keep] == self.state[..keep], "prefix hint is wrong");
        let mut info = eternal_record_info {
            seq,
            state_len: new.len() as u64,
            ..Default::default()
        };
        let mut payload = Vec::new();
        let mut keyframe = !self.has_state || self.deltas_since_key >= self.policy.max_replay;
        if !keyframe {
            self.encoder.encode_inserted(
                &self.state[keep..],
                &new[keep..],
                insert_hint,
                &mut payload,
            );
            let total = self.delta_bytes_since_key + payload.len() as u64;
            keyframe = total * 100 > self.policy.max_delta_pct as u64 * new.len() as u64;
        }
        if keyframe {
            payload.clear();
            payload.extend_from_slice(new);
            info.kind = KIND_KEYFRAME;
            info.base_seq = seq;
            self.deltas_since_key = 0;
            self.delta_bytes_since_key = 0;
        } else {
            info.kind = KIND_DELTA;
            info.base_seq = self.head.seq;
            info.prefix = keep as u64;
            self.deltas_since_key += 1;
            self.delta_bytes_since_key += payload.len() as u64;
        }
        self.state.truncate(keep);
        self.state.extend_from_slice(&new[keep..]);
        info.state_hash = self.hashes.hash(&self.state, keep);
        info.raw_len = payload.len() as u64;
        info.chain_hash = link(self.head.chain_hash, &info, &payload);
        self.head = info;
        self.has_state = true;
        (info, payload)
    }

    /// Replays one record onto the chain, verifying it: a keyframe may start an empty chain; every
    /// other record must follow the head, and its state hash and chain hash must match. On error
    /// the chain is reset to empty (replay again up to the last good record to go on).
    pub fn push(&mut self, info: &eternal_record_info, payload: &[u8]) -> Result<(), ChainError> {
        let r = self.push_inner(info, payload);
        if r.is_err() {
            self.reset();
        }
        r
    }

    fn push_inner(&mut self, info: &eternal_record_info, payload: &[u8]) -> Result<(), ChainError> {
        let bad = |reason: String| ChainError {
            seq: info.seq,
            reason,
        };
        if info.raw_len != payload.len() as u64 {
            return Err(bad(format!(
                "payload is {} bytes, the record says {}",
                payload.len(),
                info.raw_len
            )));
        }
        if self.has_state && info.seq != self.head.seq + 1 {
            return Err(bad(format!(
                "does not follow the head (record {})",
                self.head.seq
            )));
        }
        let keep;
        match info.kind {
            KIND_KEYFRAME => {
                if info.seq == 0 || info.base_seq != info.seq || info.prefix != 0 {
                    return Err(bad("malformed keyframe header".into()));
                }
                self.state.clear();
                crate::paged::reserve(&mut self.state, payload.len());
                self.state.extend_from_slice(payload);
                keep = 0;
                self.deltas_since_key = 0;
                self.delta_bytes_since_key = 0;
            }
            KIND_DELTA => {
                if !self.has_state || info.base_seq != self.head.seq {
                    return Err(bad(format!(
                        "delta on record {} but the chain is at record {}",
                        info.base_seq, self.head.seq
                    )));
                }
                if info.prefix > self.state.len() as u64 {
                    return Err(bad(format!(
                        "keeps {} bytes of a {}-byte base",
                        info.prefix,
                        self.state.len()
                    )));
                }
                keep = info.prefix as usize;
                let want = (info.state_len as usize)
                    .saturating_sub(keep)
                    .min(delta::MAX_TARGET);
                let target_len = delta::check(self.state.len() - keep, payload, want)
                    .map_err(|e| bad(e.to_string()))?;
                self.scratch.clear();
                self.scratch.resize(target_len, 0);
                delta::apply_into(&self.state[keep..], payload, &mut self.scratch)
                    .map_err(|e| bad(e.to_string()))?;
                self.state.truncate(keep);
                self.state.extend_from_slice(&self.scratch);
                self.deltas_since_key += 1;
                self.delta_bytes_since_key += payload.len() as u64;
            }
            k => return Err(bad(format!("unknown record kind {k}"))),
        }
        if self.state.len() as u64 != info.state_len {
            return Err(bad(format!(
                "rebuilt {} bytes, the record says {}",
                self.state.len(),
                info.state_len
            )));
        }
        let h = self.hashes.hash(&self.state, keep);
        if h != info.state_hash {
            return Err(bad(format!(
                "state hash mismatch: rebuilt {h:016x}, the record says {:016x}",
                info.state_hash
            )));
        }
        // A keyframe that starts the replay is the anchor: its predecessors may be gone.
        if self.has_state || info.kind == KIND_DELTA {
            let want = link(self.head.chain_hash, info, payload);
            if want != info.chain_hash {
                return Err(bad(format!(
                    "chain hash mismatch: computed {want:016x}, the record says {:016x}",
                    info.chain_hash
                )));
            }
        }
        self.head = *info;
        self.has_state = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(n: usize) -> Vec<Vec<u8>> {
        // An append-mostly state: a growing history first, then a small changing rest.
        let mut hist = Vec::new();
        (0..n)
            .map(|i| {
                hist.extend_from_slice(format!("record {i}: some tool output line\n").as_bytes());
                let mut s = hist.clone();
                s.extend_from_slice(format!("rest: step {i} status running").as_bytes());
                s
            })
            .collect()
    }

    #[test]
    fn append_then_replay_verifies() {
        let ss = states(50);
        let mut w = Chain::new(Policy {
            max_replay: 8,
            max_delta_pct: 100,
        });
        let mut recs = Vec::new();
        let mut prev_hist_len = 0;
        for (i, s) in ss.iter().enumerate() {
            let hint = prev_hist_len;
            prev_hist_len = s.len() - format!("rest: step {i} status running").len();
            recs.push(w.append(s, hint));
            assert_eq!(w.state(), &s[..]);
            assert_eq!(w.head().state_hash, xxh64(s));
        }
        assert_eq!(recs[0].0.kind, KIND_KEYFRAME);
        assert!(recs.iter().filter(|r| r.0.kind == KIND_KEYFRAME).count() >= 50 / 9);
        // Late in the chain a delta carries the new record and the changed rest, not the state.
        let (info, p) = &recs[45];
        assert!(
            info.kind == KIND_DELTA && p.len() < 100,
            "{info:?}, {} bytes",
            p.len()
        );
        // Replay from every keyframe to the end.
        for start in 0..recs.len() {
            if recs[start].0.kind != KIND_KEYFRAME {
                continue;
            }
            let mut r = Chain::new(Policy::default());
            for (info, p) in &recs[start..] {
                r.push(info, p).expect("replay");
            }
            assert_eq!(r.state(), &ss[49][..]);
            assert_eq!(r.head(), w.head());
        }
    }

    #[test]
    fn a_wrong_insert_hint_still_replays() {
        let ss = states(40);
        let mut w = Chain::new(Policy {
            max_replay: 1000,
            max_delta_pct: u32::MAX,
        });
        let mut recs = Vec::new();
        for (i, s) in ss.iter().enumerate() {
            recs.push(w.append_inserted(s, 0, [0, 3, 1 << 20, i * 37][i % 4]));
            assert_eq!(w.state(), &s[..]);
        }
        assert!(recs[1..].iter().all(|r| r.0.kind == KIND_DELTA));
        let mut r = Chain::new(Policy::default());
        for (info, p) in &recs {
            r.push(info, p).expect("replay");
        }
        assert_eq!(r.state(), &ss[39][..]);
        assert_eq!(r.head(), w.head());
    }

    #[test]
    fn damage_is_reported_with_the_sequence() {
        let ss = states(10);
        let mut w = Chain::new(Policy::default());
        let recs: Vec<_> = ss.iter().map(|s| w.append(s, 0)).collect();
        for victim in 1..recs.len() {
            let mut r = Chain::new(Policy::default());
            for (i, (info, p)) in recs.iter().enumerate() {
                let (mut info, mut p) = (*info, p.clone());
                if i == victim {
                    if p.len() > 8 {
                        let n = p.len();
                        p[n - 3] ^= 1;
                    } else {
                        info.state_hash ^= 1;
                    }
                }
                match r.push(&info, &p) {
                    Ok(()) => assert!(i < victim, "damaged record {victim} accepted"),
                    Err(e) => {
                        assert_eq!(e.seq, victim as u64 + 1);
                        break;
                    }
                }
            }
        }
        // Gaps and stale records are refused.
        let mut r = Chain::new(Policy::default());
        r.push(&recs[0].0, &recs[0].1).unwrap();
        assert!(r.push(&recs[2].0, &recs[2].1).is_err());
        let mut r = Chain::new(Policy::default());
        assert!(
            r.push(&recs[1].0, &recs[1].1).is_err(),
            "delta without a base"
        );
    }

    #[test]
    fn delta_budget_forces_keyframes() {
        // Unrelated states: every delta is as big as the state, so a 100% budget forces a
        // keyframe at least every other record.
        let mut w = Chain::new(Policy {
            max_replay: 1000,
            max_delta_pct: 100,
        });
        let mut x = 7u64;
        let mut kinds = Vec::new();
        for _ in 0..20 {
            let s: Vec<u8> = (0..1000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            kinds.push(w.append(&s, 0).0.kind);
        }
        assert!(kinds.windows(2).all(|k| k != [KIND_DELTA, KIND_DELTA]));
    }
}
