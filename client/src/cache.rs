//! The node's local state for the cached mode: per limit, the lease (budget
//! reserved on the server and not yet used), the deny cache, and what the
//! next sync must give back or ask for.
//!
//! Bounded: at most `capacity` limit states. A full shard evicts its least
//! recently used state (from a sample, as Redis's approximated LRU does),
//! queueing its unused lease to be given back, so memory does not grow with
//! spoofed identities and no reserved budget is lost.

use std::hash::{BuildHasher, Hash};
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::Mutex;

use crate::rules::LimitName;

/// Shards of the maps (a power of two).
const SHARDS: usize = 16;
/// States examined to pick an eviction victim.
const EVICTION_SAMPLE: usize = 8;
/// Uses per sync interval below which a node does not lease: a lease is
/// reserved and (when unused) given back in sync round trips, so it pays
/// only when it serves more decisions than those round trips cost; below
/// this rate every check asks the server, as exact mode does.
pub const LEASE_MIN_RATE: f64 = 2.0;
/// How much use a lease covers: half a second (at least three sync
/// intervals), so that a busy limit is topped up a few times a second.
pub const LEASE_SPAN_MS: u64 = 500;

/// One limit of one identity, as this node sees it.
#[derive(Debug)]
pub struct LimitState {
    /// `rl:{scope:id}:<endpoint hash>`.
    pub prefix: Arc<str>,
    /// Global or endpoint.
    pub name: LimitName,
    /// The ceiling enforced.
    pub ceiling: u64,
    /// Window length.
    pub window_seconds: u64,
    /// The hash slot of its keys (the node serving it is looked up at
    /// each call: slots move).
    pub slot: u16,
    /// The window (start, unix s) the lease belongs to.
    pub window_start: u64,
    /// Tokens reserved on the server for `window_start` and not used yet.
    pub lease: u64,
    /// Unused leases of ended windows: (window start, tokens) to give back.
    pub give_back: GiveBacks,
    /// Tokens used since the last sync (see [`LimitState::note_use`]).
    pub used_since_sync: u32,
    /// Tokens used per sync interval, smoothed: sizes the next lease.
    pub rate: f32,
    /// Tokens asked of this node (admitted or denied here) since it last
    /// asked the server, and when that was (unix ms, its low 32 bits: only
    /// the time since matters): its demand while the deny cache kept it
    /// from asking.
    pub asked_since_ask: u32,
    pub last_ask_ms: u32,
    /// The server's remaining budget at the last contact (leases counted as used).
    pub remaining: u64,
    /// End of the window (unix s) at the last contact.
    pub reset: u64,
    /// Denied until this time (ms): the deny cache.
    pub denied_until_ms: u64,
    /// Last use (ms), for eviction.
    pub last_used_ms: u64,
    /// In the cache's active list: the next sync looks at it.
    pub active: bool,
    /// The server's denials of this node's asks in a row (see
    /// `Limiter::deny_for`).
    pub denials_in_row: u8,
    /// The server denied this limit and has not had budget left since:
    /// the next ask takes whatever has been freed meanwhile (see
    /// [`LimitState::wanted_on_ask`]).
    pub scarce: bool,
}

impl LimitState {
    /// A state with no lease yet.
    pub fn new(
        prefix: Arc<str>,
        name: LimitName,
        ceiling: u64,
        window_seconds: u64,
        slot: u16,
    ) -> LimitState {
        LimitState {
            prefix,
            name,
            ceiling,
            window_seconds,
            slot,
            window_start: 0,
            lease: 0,
            give_back: GiveBacks::default(),
            used_since_sync: 0,
            asked_since_ask: 0,
            last_ask_ms: 0,
            rate: 0.0,
            remaining: ceiling,
            reset: 0,
            denied_until_ms: 0,
            last_used_ms: 0,
            active: false,
            denials_in_row: 0,
            scarce: false,
        }
    }

    /// Counts `cost` tokens used since the last sync.
    #[inline]
    pub fn note_use(&mut self, cost: u64) {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.used_since_sync = self.used_since_sync.saturating_add(cost);
    }

    /// Moves to the window starting at `start`: an unused lease of an earlier
    /// window is queued to be given back (it was reserved on that window's key).
    pub fn roll_to(&mut self, start: u64) {
        if self.window_start == start {
            return;
        }
        if self.lease > 0 && self.window_start > 0 {
            self.give_back.push((self.window_start, self.lease));
        }
        self.lease = 0;
        self.scarce = false;
        self.window_start = start;
        self.remaining = self.ceiling;
        self.reset = start + self.window_seconds;
    }

    /// Moves to the window that contains `now_secs`.
    pub fn roll_at(&mut self, now_secs: u64) {
        self.roll_to(crate::keys::window_start(now_secs, self.window_seconds));
    }

    /// The tokens this node can expect to use before its window ends, at
    /// `per_ms` tokens a millisecond: a lease beyond that would sit unused
    /// when the window ends, budget the identity's other nodes were denied.
    fn usable_before_window_end(&self, per_ms: f64, now_ms: u64) -> u64 {
        let end_ms = (self.window_start + self.window_seconds) * 1000;
        (per_ms * end_ms.saturating_sub(now_ms) as f64) as u64
    }

    /// The lease a top-up asks for at `now_ms`, when syncs come every
    /// `interval_ms`: none below [`LEASE_MIN_RATE`] (exact checks are
    /// cheaper there), else half a second of recent use and at least three
    /// intervals' worth, at most a tenth of the ceiling (so that leases
    /// held by many nodes cannot starve an identity below its limit) and
    /// at most what recent use would take before the window ends.
    pub fn lease_target(&self, interval_ms: u64, now_ms: u64) -> u64 {
        let rate = f64::from(self.rate);
        if rate < LEASE_MIN_RATE {
            return 0;
        }
        let interval_ms = interval_ms.max(1) as f64;
        let intervals = (LEASE_SPAN_MS as f64 / interval_ms).max(3.0);
        let wanted = (rate * intervals).ceil() as u64;
        wanted
            .min((self.ceiling / 10).max(1))
            .min(self.usable_before_window_end(rate / interval_ms, now_ms))
    }

    /// Below this the next sync tops the lease up: half the target, so a
    /// busy limit costs one round trip per quarter second or so whatever
    /// the sync interval, and its lease lasts until the next sync.
    pub fn lease_low(&self, interval_ms: u64, now_ms: u64) -> u64 {
        self.lease_target(interval_ms, now_ms).div_ceil(2)
    }

    /// What a check that asks the server at `now_ms` also asks to lease.
    /// Normally the top-up. For a limit the server has been denying, what
    /// this node was asked for since it last asked the server: its denials
    /// are cached for at least a sync interval, so that much covers it
    /// until it asks again, and the budget the sliding window freed
    /// meanwhile is not left unused (one token per ask would admit less
    /// than the limit when few nodes serve the identity). More would sit
    /// unused while the identity's other nodes are denied (at 100 nodes, a
    /// tenth of the limit to whichever node asked first cost 1% of the
    /// limit in some windows). The grant is what is free, no more.
    pub fn wanted_on_ask(&self, interval_ms: u64, now_ms: u64) -> u64 {
        if self.scarce {
            let elapsed_ms = (now_ms as u32).wrapping_sub(self.last_ask_ms).max(1);
            let per_ms = f64::from(self.asked_since_ask) / elapsed_ms as f64;
            u64::from(self.asked_since_ask)
                .min((self.ceiling / 10).max(1))
                .min(self.usable_before_window_end(per_ms, now_ms))
                .saturating_sub(self.lease)
        } else {
            self.lease_target(interval_ms, now_ms)
                .saturating_sub(self.lease)
        }
    }

    /// Counts a check of `cost` decided here (admitted or denied) towards
    /// the node's demand between its asks.
    #[inline]
    pub fn note_asked(&mut self, cost: u64) {
        let cost = u32::try_from(cost).unwrap_or(u32::MAX);
        self.asked_since_ask = self.asked_since_ask.saturating_add(cost);
    }

    /// The node asks the server now: its demand is counted afresh.
    pub fn note_ask(&mut self, now_ms: u64) {
        self.asked_since_ask = 0;
        self.last_ask_ms = now_ms as u32;
    }
}

/// Unused leases of ended windows, (window start, tokens), waiting to be
/// given back: almost always none or one, so kept out of line (8 bytes in
/// every state instead of a `Vec`'s 24).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[allow(clippy::box_collection)] // the point: one pointer, not a Vec's three words
pub struct GiveBacks(Option<Box<Vec<(u64, u64)>>>);

impl GiveBacks {
    /// Queues tokens of the window starting at `window_start`.
    pub fn push(&mut self, give_back: (u64, u64)) {
        self.0.get_or_insert_with(Box::default).push(give_back);
    }

    /// Takes the last queued give-back.
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        let queued = self.0.as_mut()?;
        let last = queued.pop();
        if queued.is_empty() {
            self.0 = None;
        }
        last
    }

    /// True when nothing waits to be given back.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Drops everything queued.
    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// What is queued, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().flat_map(|v| v.iter().copied())
    }
}

/// A shared, lockable limit state.
pub type SharedState = Arc<Mutex<LimitState>>;

/// The limits of one (identity, endpoint): global first.
#[derive(Debug)]
pub struct Class {
    /// Whose requests to which endpoint it holds the limits of.
    pub key: ClassKey,
    /// The limit states, in lock order (global, then endpoint).
    pub limits: Box<[SharedState]>,
    /// The rules generation the class was built from.
    pub generation: u64,
    /// The hash slot of the identity's keys.
    pub slot: u16,
}

/// Key of a class: scope, id, tier and endpoint, in one allocation (the
/// cache holds one per identity and endpoint: four `String`s were 96 bytes
/// and four allocations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassKey {
    /// The four parts back to back.
    text: Box<str>,
    /// Where scope, id and tier end in `text`.
    ends: [u32; 3],
}

impl ClassKey {
    /// The key of `identity`'s requests to `endpoint`.
    pub fn new(key: &ClassKeyRef<'_>) -> ClassKey {
        let parts = [key.scope, key.id, key.tier, key.endpoint];
        let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
        let mut ends = [0u32; 3];
        for (i, part) in parts.iter().enumerate() {
            text.push_str(part);
            if i < 3 {
                ends[i] = text.len() as u32;
            }
        }
        ClassKey {
            text: text.into_boxed_str(),
            ends,
        }
    }

    /// The borrowed form (what lookups hash).
    pub fn as_ref(&self) -> ClassKeyRef<'_> {
        let [a, b, c] = self.ends.map(|e| e as usize);
        ClassKeyRef {
            scope: &self.text[..a],
            id: &self.text[a..b],
            tier: &self.text[b..c],
            endpoint: &self.text[c..],
        }
    }
}

/// A class's key, borrowed: what a check looks up without allocating.
#[derive(Hash, PartialEq, Eq)]
pub struct ClassKeyRef<'a> {
    /// Identity scope.
    pub scope: &'a str,
    /// Identity id.
    pub id: &'a str,
    /// Identity tier.
    pub tier: &'a str,
    /// Endpoint.
    pub endpoint: &'a str,
}

impl<'a> ClassKeyRef<'a> {
    /// The key of `identity`'s requests to `endpoint`.
    pub fn of(identity: &'a crate::keys::Identity, endpoint: &'a str) -> ClassKeyRef<'a> {
        ClassKeyRef {
            scope: &identity.scope,
            id: &identity.id,
            tier: &identity.tier,
            endpoint,
        }
    }
}

/// Tokens to give back for a state that left the cache.
#[derive(Debug, Clone)]
pub struct Orphan {
    /// The hash slot of its keys.
    pub slot: u16,
    /// Key prefix.
    pub prefix: Arc<str>,
    /// The window the tokens were reserved in.
    pub window_start: u64,
    /// Its length.
    pub window_seconds: u64,
    /// Tokens.
    pub tokens: u64,
    /// The ceiling (the lease script needs one).
    pub ceiling: u64,
}

/// One shard of the class map (a class holds its own key).
type ClassTable = HashTable<Arc<Class>>;

/// One shard of the state map, filed by each state's key prefix.
type StateTable = HashTable<SharedState>;

/// The bounded cache of classes and limit states.
pub struct Cache {
    hasher: DefaultHashBuilder,
    /// Filed by the hash of a [`ClassKeyRef`], computed once per check.
    classes: Vec<Mutex<ClassTable>>,
    states: Vec<Mutex<StateTable>>,
    per_shard: usize,
    orphans: Mutex<Vec<Orphan>>,
    /// States the next sync must look at: used since the last one, or
    /// holding a lease or tokens to give back. The rest cost a sync nothing.
    active: Mutex<Vec<SharedState>>,
}

impl Cache {
    /// A cache of at most `capacity` limit states (and as many classes).
    pub fn new(capacity: usize) -> Cache {
        Cache {
            hasher: DefaultHashBuilder::default(),
            classes: (0..SHARDS).map(|_| Mutex::new(HashTable::new())).collect(),
            states: (0..SHARDS).map(|_| Mutex::new(HashTable::new())).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            orphans: Mutex::new(Vec::new()),
            active: Mutex::new(Vec::new()),
        }
    }

    /// The hash a class is filed under (one hash per check: the shard and
    /// the bucket both come from it).
    #[inline]
    pub fn class_hash(&self, key: &ClassKeyRef<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Runs `f` on the class for a request, if cached and built from
    /// `generation`, under its shard's lock: the cached mode's fast path,
    /// with no reference count touched.
    #[inline]
    pub fn with_class<R>(
        &self,
        key: &ClassKeyRef<'_>,
        hash: u64,
        generation: u64,
        f: impl FnOnce(&Class) -> R,
    ) -> Option<R> {
        let classes = self.classes[(hash as usize) & (SHARDS - 1)].lock();
        let class = classes.find(hash, |c| c.key.as_ref() == *key)?;
        (class.generation == generation).then(|| f(class))
    }

    /// The class for a request, if cached and built from `generation`.
    pub fn class(&self, key: &ClassKeyRef<'_>, hash: u64, generation: u64) -> Option<Arc<Class>> {
        let classes = self.classes[(hash as usize) & (SHARDS - 1)].lock();
        let class = classes.find(hash, |c| c.key.as_ref() == *key)?;
        (class.generation == generation).then(|| class.clone())
    }

    fn hash_of(&self, key: &ClassKey) -> u64 {
        self.class_hash(&key.as_ref())
    }

    /// Stores a class, replacing an older one for the same key, or evicting
    /// the least recently used of a sample when the shard is full.
    pub fn put_class(&self, class: Arc<Class>) {
        let hash = self.hash_of(&class.key);
        let mut classes = self.classes[(hash as usize) & (SHARDS - 1)].lock();
        if let Ok(old) = classes.find_entry(hash, |c| c.key == class.key) {
            old.remove();
        } else if classes.len() >= self.per_shard {
            let victim = classes
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|c| {
                    c.limits
                        .iter()
                        .map(|s| s.lock().last_used_ms)
                        .max()
                        .unwrap_or(0)
                })
                .cloned();
            if let Some(victim) = victim {
                let victim_hash = self.hash_of(&victim.key);
                if let Ok(entry) = classes.find_entry(victim_hash, |c| Arc::ptr_eq(c, &victim)) {
                    entry.remove();
                }
            }
        }
        classes.insert_unique(hash, class, |c| self.hash_of(&c.key));
    }

    /// The state of a limit, created by `make` when absent. States are
    /// filed by their own prefix (the table holds one pointer per state);
    /// a state's lock is a leaf, taken here under the shard's.
    pub fn state(&self, prefix: &Arc<str>, make: impl FnOnce() -> LimitState) -> SharedState {
        let hash = self.hasher.hash_one(&**prefix);
        let shard = &self.states[(hash as usize) & (SHARDS - 1)];
        let mut states = shard.lock();
        if let Some(state) = states.find(hash, |s| s.lock().prefix == *prefix) {
            return state.clone();
        }
        if states.len() >= self.per_shard {
            let victim = states
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|s| s.lock().last_used_ms)
                .cloned();
            if let Some(victim) = victim {
                let victim_hash = self.hasher.hash_one(&*victim.lock().prefix);
                if let Ok(entry) = states.find_entry(victim_hash, |s| Arc::ptr_eq(s, &victim)) {
                    entry.remove();
                }
                let mut victim = victim.lock();
                self.orphan(&victim);
                // Its tokens now travel as orphans: the state itself (still
                // on the active list, maybe) holds none.
                victim.lease = 0;
                victim.give_back.clear();
            }
        }
        let state = Arc::new(Mutex::new(make()));
        states.insert_unique(hash, state.clone(), |s| {
            self.hasher.hash_one(&*s.lock().prefix)
        });
        state
    }

    fn orphan(&self, state: &LimitState) {
        let mut orphans = self.orphans.lock();
        let unused = state
            .give_back
            .iter()
            .chain((state.lease > 0).then_some((state.window_start, state.lease)));
        for (window_start, tokens) in unused {
            orphans.push(Orphan {
                slot: state.slot,
                prefix: state.prefix.clone(),
                window_start,
                window_seconds: state.window_seconds,
                tokens,
                ceiling: state.ceiling,
            });
        }
    }

    /// Takes the queued give-backs of evicted states.
    pub fn take_orphans(&self) -> Vec<Orphan> {
        std::mem::take(&mut *self.orphans.lock())
    }

    /// Puts a state just used (`state` is `shared`, locked) on the active
    /// list, once until the sync that takes it.
    #[inline]
    pub fn mark_active(&self, shared: &SharedState, state: &mut LimitState) {
        if !state.active {
            state.active = true;
            self.active.lock().push(shared.clone());
        }
    }

    /// Takes the active list (a sync puts back what stays active).
    pub fn take_active(&self) -> Vec<SharedState> {
        std::mem::take(&mut *self.active.lock())
    }

    /// Puts states back on the active list.
    pub fn put_active(&self, states: impl IntoIterator<Item = SharedState>) {
        self.active.lock().extend(states);
    }

    /// Number of cached limit states.
    pub fn len(&self) -> usize {
        self.states.iter().map(|s| s.lock().len()).sum()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_stays_bounded_and_keeps_evicted_leases_for_give_back() {
        let cache = Cache::new(32);
        for i in 0..10_000u64 {
            let prefix: Arc<str> = format!("rl:{{ip:{i}}}:*").into();
            let state = cache.state(&prefix, || {
                LimitState::new(prefix.clone(), LimitName::Global, 100, 60, 0)
            });
            let mut state = state.lock();
            state.roll_to(60);
            state.lease = 1;
            state.last_used_ms = i;
        }
        assert!(cache.len() <= 32 + SHARDS, "{}", cache.len());
        let orphans = cache.take_orphans();
        assert_eq!(orphans.len() as u64 + cache.len() as u64, 10_000);
        assert!(orphans
            .iter()
            .all(|o| o.tokens == 1 && o.window_start == 60));
    }

    #[test]
    fn rolling_to_a_new_window_queues_the_unused_lease() {
        let mut state = LimitState::new("p".into(), LimitName::Global, 1000, 60, 0);
        state.roll_to(60);
        state.lease = 7;
        state.roll_to(120);
        assert_eq!(state.lease, 0);
        assert_eq!(state.give_back.iter().collect::<Vec<_>>(), vec![(60, 7)]);
        assert_eq!(state.reset, 180);
    }

    #[test]
    fn a_denied_node_asks_for_its_own_demand_and_nothing_past_the_window() {
        let mut state = LimitState::new("p".into(), LimitName::Global, 1000, 60, 0);
        state.roll_to(60); // the window 60..120 s
        state.scarce = true;
        state.note_ask(70_000);
        state.note_asked(1);
        state.note_asked(1);
        // Two requests in the second since its last ask: it asks for two,
        // not for a tenth of the limit (which would sit unused while the
        // identity's other nodes are denied).
        assert_eq!(state.wanted_on_ask(100, 71_000), 2);
        // Two a second leave room for none in the window's last 400 ms.
        assert_eq!(state.wanted_on_ask(100, 119_600), 0);
        // A busy node asked 500 times in 100 ms: a tenth of the limit.
        state.asked_since_ask = 500;
        assert_eq!(state.wanted_on_ask(100, 70_100), 100);
        // A top-up is cut to what recent use takes before the window ends.
        state.scarce = false;
        state.rate = 10.0; // per 100 ms interval
        assert_eq!(state.lease_target(100, 70_000), 50);
        assert_eq!(state.lease_target(100, 119_800), 20);
    }

    #[test]
    fn leases_follow_recent_use_within_bounds() {
        let mut state = LimitState::new("p".into(), LimitName::Global, 1000, 60, 0);
        assert_eq!(state.lease_target(100, 0), 0, "no use, no lease");
        state.rate = 1.5;
        assert_eq!(state.lease_target(100, 0), 0, "too slow to pay for a lease");
        state.rate = 2.0;
        assert_eq!(
            (state.lease_target(100, 0), state.lease_low(100, 0)),
            (10, 5)
        );
        state.rate = 10.0;
        // Half a second of use at 100 ms, three intervals at 200 ms.
        assert_eq!(
            (state.lease_target(100, 0), state.lease_low(100, 0)),
            (50, 25)
        );
        assert_eq!(state.lease_target(20, 0), 100);
        assert_eq!(state.lease_target(200, 0), 30);
        state.rate = 10_000.0;
        assert_eq!(state.lease_target(100, 0), 100);
    }
}
