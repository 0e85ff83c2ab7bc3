//! The node's local state for the cached mode: one entry per identity
//! (scope, id, tier) holding the states of its limits inline.
//!
//! A check hashes its identity once, takes one shard lock and finds every
//! limit it needs in one entry: no lock per limit, no reference count, no
//! key prefix kept per limit (a sync builds the prefixes of the limits it
//! calls for). That is what keeps a cached decision to one lookup and a
//! tracked limit to about 160 bytes (docs/client.md).
//!
//! Bounded: at most `capacity` limit states. A full shard evicts its least
//! recently used identity (from a sample, as Redis's approximated LRU
//! does), queueing its unused leases to be given back, so memory does not
//! grow with spoofed identities and no reserved budget is lost.

mod state;

pub use state::{Counting, GiveBacks, LimitState, LEASE_MIN_RATE, LEASE_SPAN_MS};

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use hashbrown::{DefaultHashBuilder, HashTable};
use parking_lot::Mutex;

use crate::keys::prefix_of;
use crate::rules::{LimitName, TierPlan};

/// Shards of the map (a power of two).
const SHARDS: usize = 16;
/// Identities examined to pick an eviction victim.
const EVICTION_SAMPLE: usize = 8;

/// Everything this node keeps about one identity.
#[derive(Debug)]
pub struct Entry {
    key: EntryKey,
    /// Tells this entry from a later one of the same identity (evicted and
    /// made again while a call was in flight): replies go to the entry
    /// their call was made for. (With the hash, 32 bits tell them apart.)
    serial: u32,
    /// The rules generation its plan and ceilings were resolved in (its
    /// low 32 bits); another one (or 0: a window rolled in a sync) makes
    /// the next check resolve them again.
    generation: u32,
    /// The tier's limits (see [`TierPlan`]).
    pub plan: Arc<TierPlan>,
    /// Last admitted use (unix s), for eviction.
    last_used_secs: u32,
    /// The hash slot of the identity's keys (the node serving it is looked
    /// up at each call: slots move).
    pub slot: u16,
    /// In its shard's active list: the next sync looks at it.
    active: bool,
    /// The global limit's state first (when the tier has one), then those
    /// of the endpoints it has been seen on.
    pub limits: Box<[LimitState]>,
}

/// Which of an entry's states a request uses: at most two (global, then
/// the endpoint's), packed in one word (the count in the low byte, then
/// each index in 28 bits). One word, not a small struct: the fast path
/// writes it and copies it on, and a copy of a struct written field by
/// field stalled on store forwarding (~10% of the fast path's samples).
#[derive(Debug, Clone, Copy, Default)]
pub struct Picked(u64);

impl Picked {
    const INDEX_BITS: u32 = 28;
    const INDEX_MASK: u64 = (1 << Self::INDEX_BITS) - 1;

    #[inline]
    fn push(&mut self, index: usize) {
        let len = self.len();
        debug_assert!(len < 2 && (index as u64) <= Self::INDEX_MASK);
        let shift = 8 + Self::INDEX_BITS * len as u32;
        self.0 = (self.0 + 1) | ((index as u64 & Self::INDEX_MASK) << shift);
    }

    /// The state indices, global first.
    #[inline]
    pub fn indices(&self) -> impl Iterator<Item = usize> {
        let word = self.0;
        (0..self.len() as u32)
            .map(move |k| ((word >> (8 + Self::INDEX_BITS * k)) & Self::INDEX_MASK) as usize)
    }

    /// How many limits apply.
    #[inline]
    pub fn len(&self) -> usize {
        (self.0 & 0xff) as usize
    }

    /// True when no limit applies.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Entry {
    /// An entry with no states, whose plan is resolved on first use
    /// (generation 0 is never current).
    pub fn new(key: &EntryKeyRef<'_>, serial: u32, slot: u16) -> Entry {
        Entry {
            key: EntryKey::new(key),
            serial,
            generation: 0,
            plan: Arc::default(),
            last_used_secs: 0,
            slot,
            active: false,
            limits: Box::default(),
        }
    }

    /// Whose entry it is.
    pub fn key(&self) -> EntryKeyRef<'_> {
        self.key.as_ref()
    }

    /// See [`Entry::serial`].
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// True when its plan and ceilings were resolved in rules generation
    /// `generation`.
    #[inline]
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation == generation as u32
    }

    /// Its plan and ceilings are resolved in rules generation `generation`.
    pub fn set_generation(&mut self, generation: u64) {
        self.generation = generation as u32;
    }

    /// The next check resolves its plan and ceilings again (a window
    /// rolled: a limit an update changed takes its new value).
    pub fn outdate(&mut self) {
        self.generation = 0;
    }

    /// Notes a use at `now_ms` (for eviction).
    #[inline]
    pub fn touch(&mut self, now_ms: u64) {
        self.last_used_secs = (now_ms / 1000) as u32;
    }

    /// The key prefix of `state`'s limit: `rl:{scope:id}:<endpoint part>`.
    pub fn prefix(&self, state: &LimitState) -> String {
        let key = self.key();
        prefix_of(key.scope, key.id, state.key_part())
    }

    /// The states a request to `endpoint` uses, by the entry's plan; `None`
    /// when the endpoint has a limit this entry has no state for yet.
    #[inline(always)]
    pub fn pick(&self, endpoint: &str) -> Option<Picked> {
        let mut picked = Picked::default();
        // The global state is first when there is one.
        let global = matches!(self.limits.first(), Some(s) if s.name == LimitName::Global);
        let first_endpoint = usize::from(global);
        if global {
            picked.push(0);
        }
        let held = self.limits.iter().enumerate().skip(first_endpoint);
        for (i, state) in held {
            if matches!(&state.name, LimitName::Endpoint(e) if *e == endpoint) {
                picked.push(i);
                return Some(picked);
            }
        }
        if self.plan.endpoints.is_empty() || !self.plan.endpoints.contains_key(endpoint) {
            Some(picked)
        } else {
            None
        }
    }

    /// The index of the state of limit `name`.
    pub fn find(&self, name: &LimitName) -> Option<usize> {
        self.limits.iter().position(|s| s.name == *name)
    }

    /// Adds a state (the global one goes first).
    pub fn add(&mut self, state: LimitState) -> usize {
        let mut limits = std::mem::take(&mut self.limits).into_vec();
        let at = if state.name == LimitName::Global {
            0
        } else {
            limits.len()
        };
        limits.insert(at, state);
        self.limits = limits.into_boxed_slice();
        at
    }

    /// Removes the states `keep` refuses, returning their unused tokens.
    pub fn remove_unless(&mut self, mut keep: impl FnMut(&LimitState) -> bool) -> Vec<Orphan> {
        if self.limits.iter().all(&mut keep) {
            return Vec::new();
        }
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.limits)
            .into_vec()
            .into_iter()
            .partition(keep);
        self.limits = kept.into_boxed_slice();
        gone.iter().flat_map(|s| self.orphans_of(s)).collect()
    }

    /// The unused tokens a state holds, as give-backs for a sync to send
    /// once the state is gone.
    fn orphans_of<'a>(&'a self, state: &'a LimitState) -> impl Iterator<Item = Orphan> + 'a {
        // GCRA tokens cannot be given back (CL.THROTTLE takes no negative
        // quantity): they are spent.
        let returnable = !matches!(state.counting, Counting::Gcra { .. });
        let unused = state
            .give_back
            .iter()
            .chain((state.lease > 0).then_some((state.window_start(), state.lease)))
            .filter(move |_| returnable);
        unused.map(move |(window_start, tokens)| Orphan {
            slot: self.slot,
            prefix: self.prefix(state),
            window_start,
            window_seconds: state.window_seconds(),
            tokens,
            ceiling: state.ceiling,
            counting: state.counting,
        })
    }
}

/// Key of an entry: scope, id and tier in one allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EntryKey {
    /// The three parts back to back.
    text: Box<str>,
    /// Where scope and id end in `text`.
    ends: [u32; 2],
}

impl EntryKey {
    fn new(key: &EntryKeyRef<'_>) -> EntryKey {
        EntryKey {
            text: [key.scope, key.id, key.tier].concat().into_boxed_str(),
            ends: [
                key.scope.len() as u32,
                (key.scope.len() + key.id.len()) as u32,
            ],
        }
    }

    fn as_ref(&self) -> EntryKeyRef<'_> {
        let [a, b] = self.ends.map(|e| e as usize);
        EntryKeyRef {
            scope: &self.text[..a],
            id: &self.text[a..b],
            tier: &self.text[b..],
        }
    }
}

/// An entry's key, borrowed: what a check looks up without allocating.
#[derive(Debug, Hash, PartialEq, Eq, Clone, Copy)]
pub struct EntryKeyRef<'a> {
    /// Identity scope.
    pub scope: &'a str,
    /// Identity id.
    pub id: &'a str,
    /// Identity tier.
    pub tier: &'a str,
}

impl<'a> EntryKeyRef<'a> {
    /// The key of `identity`.
    pub fn of(identity: &'a crate::keys::Identity) -> EntryKeyRef<'a> {
        EntryKeyRef {
            scope: &identity.scope,
            id: &identity.id,
            tier: &identity.tier,
        }
    }
}

/// Tokens to give back for a state that left the cache.
#[derive(Debug, Clone)]
pub struct Orphan {
    /// The hash slot of its keys.
    pub slot: u16,
    /// Key prefix.
    pub prefix: String,
    /// The window the tokens were reserved in.
    pub window_start: u64,
    /// Its length.
    pub window_seconds: u64,
    /// Tokens.
    pub tokens: u64,
    /// The ceiling (the lease script needs one).
    pub ceiling: u64,
    /// How its limit counts (see [`Counting`]).
    pub counting: Counting,
}

/// Where a closure given an entry puts it on the active list and counts
/// the decisions it makes.
pub struct Activity<'a> {
    hash: u64,
    list: &'a mut Vec<u64>,
    decided: &'a mut Decided,
}

/// Decisions made from an entry without the server, (allowed, denied):
/// counted in the shard under the lock the decision holds anyway, not in
/// a counter every thread's decisions would write.
type Decided = [u64; 2];

impl Activity<'_> {
    /// Puts `entry` on the active list for the next sync (once until the
    /// sync that takes it: the fast path only tests a flag).
    #[inline]
    pub fn mark(&mut self, entry: &mut Entry) {
        if !entry.active {
            entry.active = true;
            self.list.push(self.hash);
        }
    }

    /// Counts a decision made without the server.
    #[inline]
    pub fn count_decision(&mut self, allowed: bool) {
        self.decided[usize::from(!allowed)] += 1;
    }
}

/// One shard: its entries (boxed: a table slot costs a pointer, not an
/// entry), the hashes of its active entries, its count of states and of
/// the decisions made from its entries.
#[derive(Default)]
struct Shard {
    entries: HashTable<Box<Entry>>,
    active: Vec<u64>,
    states: usize,
    decided: Decided,
}

/// The bounded cache of identities and their limit states.
pub struct Cache {
    hasher: DefaultHashBuilder,
    shards: Box<[Mutex<Shard>]>,
    /// Limit states a shard holds before it evicts.
    per_shard: usize,
    orphans: Mutex<Vec<Orphan>>,
    next_serial: AtomicU32,
}

impl Cache {
    /// A cache of at most `capacity` limit states.
    pub fn new(capacity: usize) -> Cache {
        Cache {
            hasher: DefaultHashBuilder::default(),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            orphans: Mutex::new(Vec::new()),
            next_serial: AtomicU32::new(1),
        }
    }

    /// The hash an entry is filed under (one hash per check: the shard and
    /// the bucket both come from it).
    #[inline]
    pub fn hash(&self, key: &EntryKeyRef<'_>) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[(hash as usize) & (SHARDS - 1)]
    }

    fn rehash(&self) -> impl Fn(&Box<Entry>) -> u64 + '_ {
        |entry| self.hash(&entry.key())
    }

    /// Runs `f` on the entry for `key`, if cached, under its shard's lock:
    /// the cached mode's fast path. `f` does not add or remove states.
    #[inline]
    pub fn with_entry<R>(
        &self,
        key: &EntryKeyRef<'_>,
        hash: u64,
        f: impl FnOnce(&mut Entry, &mut Activity<'_>) -> R,
    ) -> Option<R> {
        self.with_found(hash, |e| e.key() == *key, f)
    }

    /// Runs `f` on the entry for `key`, made when absent; `f` may add and
    /// remove states. A shard left holding more states than its share
    /// evicts other identities.
    pub fn with_entry_or_insert<R>(
        &self,
        key: &EntryKeyRef<'_>,
        hash: u64,
        slot: u16,
        f: impl FnOnce(&mut Entry, &mut Activity<'_>) -> R,
    ) -> R {
        let mut shard = self.shard(hash).lock();
        let Shard {
            entries,
            active,
            states,
            decided,
        } = &mut *shard;
        let entry = match entries.find_entry(hash, |e| e.key() == *key) {
            Ok(found) => found.into_mut(),
            Err(absent) => {
                let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
                let table = absent.into_table();
                table
                    .insert_unique(hash, Box::new(Entry::new(key, serial, slot)), self.rehash())
                    .into_mut()
            }
        };
        let before = entry.limits.len();
        let serial = entry.serial;
        let mut activity = Activity {
            hash,
            list: active,
            decided,
        };
        let result = f(entry, &mut activity);
        let after = entry.limits.len();
        *states = *states + after - before;
        if *states > self.per_shard {
            self.evict(&mut shard, serial);
        }
        result
    }

    /// Runs `f` on the entry `serial` of the identity filed under `hash`
    /// (the one a call in flight was made for), if still cached.
    pub fn with_serial<R>(
        &self,
        hash: u64,
        serial: u32,
        f: impl FnOnce(&mut Entry, &mut Activity<'_>) -> R,
    ) -> Option<R> {
        self.with_found(hash, |e| e.serial == serial, f)
    }

    /// Runs `f` under the shard's lock on the entry filed under `hash`
    /// that `is_it` picks, if any.
    #[inline]
    fn with_found<R>(
        &self,
        hash: u64,
        is_it: impl Fn(&Entry) -> bool,
        f: impl FnOnce(&mut Entry, &mut Activity<'_>) -> R,
    ) -> Option<R> {
        let mut shard = self.shard(hash).lock();
        let Shard {
            entries,
            active,
            decided,
            ..
        } = &mut *shard;
        let entry = entries.find_mut(hash, |e| is_it(e))?;
        let mut activity = Activity {
            hash,
            list: active,
            decided,
        };
        Some(f(entry, &mut activity))
    }

    /// Evicts the least recently used identities of a sample until the
    /// shard holds its share of states, sparing entry `spared` (the one
    /// just used). Their unused tokens become orphans.
    fn evict(&self, shard: &mut Shard, spared: u32) {
        while shard.states > self.per_shard {
            let victim = shard
                .entries
                .iter()
                .filter(|e| e.serial != spared)
                .take(EVICTION_SAMPLE)
                .min_by_key(|e| e.last_used_secs)
                .map(|e| (self.hash(&e.key()), e.serial));
            let Some((hash, serial)) = victim else {
                return;
            };
            let Ok(found) = shard.entries.find_entry(hash, |e| e.serial == serial) else {
                return;
            };
            let (victim, _) = found.remove();
            shard.states -= victim.limits.len();
            self.orphans
                .lock()
                .extend(victim.limits.iter().flat_map(|s| victim.orphans_of(s)));
        }
    }

    /// Runs `f` on every entry on an active list, taking the lists: `f`
    /// returns whether the entry stays active (for the next sync).
    pub fn sweep_active(&self, mut f: impl FnMut(&mut Entry, u64) -> bool) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let mut listed = std::mem::take(&mut shard.active);
            // Two identities with one hash are listed twice: visit once.
            listed.sort_unstable();
            listed.dedup();
            let mut still = Vec::with_capacity(listed.len());
            for hash in listed {
                let mut stays = false;
                for entry in shard.entries.iter_hash_mut(hash) {
                    if entry.active {
                        entry.active = f(entry, hash);
                        stays |= entry.active;
                    }
                }
                if stays {
                    still.push(hash);
                }
            }
            // Checks made meanwhile cannot have listed anything: the lock
            // was held.
            shard.active = still;
        }
    }

    /// Queues tokens to give back for states that are gone.
    pub fn orphan(&self, orphans: impl IntoIterator<Item = Orphan>) {
        self.orphans.lock().extend(orphans);
    }

    /// Takes the queued give-backs of states that are gone.
    pub fn take_orphans(&self) -> Vec<Orphan> {
        std::mem::take(&mut *self.orphans.lock())
    }

    /// Decisions made from cached entries without the server, (allowed,
    /// denied).
    pub fn decided(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(allowed, denied), shard| {
            let [a, d] = shard.lock().decided;
            (allowed + a, denied + d)
        })
    }

    /// Number of cached limit states.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().states).sum()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(ceiling: u64) -> LimitState {
        LimitState::new(LimitName::Global, *b"000000", ceiling, 60)
    }

    #[test]
    fn picked_states_come_back_in_order() {
        let none = Picked::default();
        assert!(none.is_empty());
        assert_eq!(none.indices().count(), 0);
        let mut one = Picked::default();
        one.push(7);
        assert_eq!((one.len(), one.indices().collect::<Vec<_>>()), (1, vec![7]));
        let mut two = Picked::default();
        two.push(0);
        two.push((1 << 28) - 1);
        assert_eq!(
            (two.len(), two.indices().collect::<Vec<_>>()),
            (2, vec![0, (1 << 28) - 1])
        );
    }

    #[test]
    fn the_cache_stays_bounded_and_keeps_evicted_leases_for_give_back() {
        let cache = Cache::new(32);
        for i in 0..10_000u64 {
            let id = format!("{i}");
            let key = EntryKeyRef {
                scope: "ip",
                id: &id,
                tier: "free",
            };
            cache.with_entry_or_insert(&key, cache.hash(&key), 0, |entry, _| {
                let at = entry.add(global(100));
                let state = &mut entry.limits[at];
                state.roll_to(60);
                state.lease = 1;
                entry.touch(i * 1000);
            });
        }
        assert!(cache.len() <= 32, "{}", cache.len());
        let orphans = cache.take_orphans();
        assert_eq!(orphans.len() as u64 + cache.len() as u64, 10_000);
        assert!(orphans
            .iter()
            .all(|o| o.tokens == 1 && o.window_start == 60 && o.prefix.starts_with("rl:{ip:")));
    }

    #[test]
    fn an_entry_picks_the_global_state_and_the_endpoints_own() {
        let mut plan = TierPlan {
            global: true,
            ..TierPlan::default()
        };
        let search = crate::rules::PlannedEndpoint {
            name: LimitName::Endpoint("GET /search"),
            key_hash: *b"abcdef",
        };
        plan.endpoints.insert("GET /search".into(), search.clone());
        let key = EntryKeyRef {
            scope: "user",
            id: "u_1",
            tier: "free",
        };
        let mut entry = Entry::new(&key, 1, 0);
        entry.plan = Arc::new(plan);
        entry.add(LimitState::new(search.name, search.key_hash, 10, 60));
        entry.add(global(100));
        let picked = |entry: &Entry, endpoint| {
            entry
                .pick(endpoint)
                .map(|p| p.indices().collect::<Vec<_>>())
        };
        assert_eq!(picked(&entry, "GET /search"), Some(vec![0, 1]));
        assert_eq!(
            picked(&entry, "GET /other"),
            Some(vec![0]),
            "no limit of its own"
        );
        assert_eq!(entry.prefix(&entry.limits[0]), "rl:{user:u_1}:*");
        assert_eq!(entry.prefix(&entry.limits[1]), "rl:{user:u_1}:abcdef");
        // A limited endpoint without a state yet: the slow path makes it.
        entry.remove_unless(|s| s.name == LimitName::Global);
        assert_eq!(picked(&entry, "GET /search"), None);
        assert_eq!(entry.key(), key);
    }

    #[test]
    fn an_active_entry_is_swept_once_per_listing() {
        let cache = Cache::new(100);
        let key = EntryKeyRef {
            scope: "user",
            id: "u_1",
            tier: "free",
        };
        let hash = cache.hash(&key);
        for _ in 0..3 {
            cache.with_entry_or_insert(&key, hash, 0, |entry, activity| {
                if entry.limits.is_empty() {
                    entry.add(global(10));
                }
                activity.mark(entry);
            });
        }
        let mut visits = 0;
        cache.sweep_active(|_, _| {
            visits += 1;
            true
        });
        cache.sweep_active(|_, _| {
            visits += 1;
            false
        });
        cache.sweep_active(|_, _| {
            visits += 1;
            false
        });
        assert_eq!(visits, 2, "listed once, kept once, then off the list");
    }

    #[test]
    fn a_tracked_limit_stays_small() {
        // docs/client.md's bytes per tracked limit follow from these: an
        // identity costs an entry, its key's text, its states and a slot
        // in the table.
        assert_eq!(std::mem::size_of::<LimitState>(), 96);
        assert_eq!(std::mem::size_of::<Entry>(), 64);
    }
}
