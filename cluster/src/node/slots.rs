//! The slot table: who serves each slot, the slots being moved
//! (SETSLOT), ADDSLOTS/DELSLOTS, and taking claims by config epoch
//! (clusterUpdateSlotsConfigWith, UPDATE messages).

use super::{Node, Output};
use crate::message::{kind, node_flags, Body, Message};
use crate::{NodeName, SLOTS};

impl Node {
    /// Who serves `slot`, as this node believes.
    pub fn owner(&self, slot: u16) -> Option<&NodeName> {
        self.name_of_owner(self.owners[slot as usize])
    }

    /// Gives `slot` to owner number `id` (0: none), keeping the counts.
    pub(super) fn assign(&mut self, slot: u16, id: u16) {
        let was = std::mem::replace(&mut self.owners[slot as usize], id);
        self.slot_counts[usize::from(was)] -= 1;
        self.slot_counts[usize::from(id)] += 1;
    }

    /// The name behind an owner number (0: none).
    pub(super) fn name_of_owner(&self, id: u16) -> Option<&NodeName> {
        (id as usize).checked_sub(1).map(|i| &self.owner_names[i])
    }

    /// The owner number of `name`, given one if it has none yet.
    pub(super) fn owner_id(&mut self, name: &NodeName) -> u16 {
        match self.known_owner_id(name) {
            Some(id) => id,
            None => {
                self.owner_names.push(*name);
                self.slot_counts.push(0);
                self.owner_names.len() as u16
            }
        }
    }

    /// The owner number of `name`, if it ever owned a slot here.
    pub(super) fn known_owner_id(&self, name: &NodeName) -> Option<u16> {
        self.owner_names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u16 + 1)
    }

    /// Slots with an owner.
    pub fn assigned_slots(&self) -> usize {
        SLOTS - self.slot_counts[0] as usize
    }

    /// Masters that serve at least one slot (CLUSTER INFO's cluster_size).
    pub fn serving_masters(&self) -> usize {
        self.slot_counts[1..].iter().filter(|&&n| n > 0).count()
    }

    /// The node `slot` is migrating to (SETSLOT MIGRATING), if any.
    pub fn migrating_to(&self, slot: u16) -> Option<&NodeName> {
        self.migrating.get(&slot)
    }

    /// The node `slot` is being imported from (SETSLOT IMPORTING), if any.
    pub fn importing_from(&self, slot: u16) -> Option<&NodeName> {
        self.importing.get(&slot)
    }

    /// Slots migrating away from this node.
    pub fn migrating_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.migrating.keys().copied()
    }

    /// Slots this node is importing (SETSLOT IMPORTING).
    pub fn importing_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.importing.keys().copied()
    }

    /// SETSLOT MIGRATING (`Some`) or its end (`None`).
    pub fn set_migrating(&mut self, slot: u16, to: Option<NodeName>) -> Vec<Output> {
        match to {
            Some(to) => self.migrating.insert(slot, to),
            None => self.migrating.remove(&slot),
        };
        vec![Output::SaveConfig]
    }

    /// SETSLOT IMPORTING (`Some`) or its end (`None`).
    pub fn set_importing(&mut self, slot: u16, from: Option<NodeName>) -> Vec<Output> {
        match from {
            Some(from) => self.importing.insert(slot, from),
            None => self.importing.remove(&slot),
        };
        vec![Output::SaveConfig]
    }

    /// SETSLOT STABLE.
    pub fn set_stable(&mut self, slot: u16) -> Vec<Output> {
        self.migrating.remove(&slot);
        self.importing.remove(&slot);
        vec![Output::SaveConfig]
    }

    /// SETSLOT NODE, once the caller checked the node is known and no keys
    /// are left here if the slot goes elsewhere; `keys_here` is how many
    /// this node holds in it. Closing an import bumps this node's config
    /// epoch (without consensus, as Redis) and tells every node at once,
    /// so the new owner wins everywhere.
    pub fn assign_slot(&mut self, slot: u16, owner: NodeName, keys_here: usize) -> Vec<Output> {
        if keys_here == 0 {
            self.migrating.remove(&slot);
        }
        self.set_owner(slot, Some(owner));
        let mut out = vec![Output::SaveConfig];
        if owner == self.me && self.importing.remove(&slot).is_some() {
            let _ = self.bump_epoch();
            let pong = self.ping(kind::PONG);
            out.extend(self.broadcast(&pong));
        }
        out
    }

    /// Records `owner` as serving `slot` (this node's bitmap follows).
    pub(super) fn set_owner(&mut self, slot: u16, owner: Option<NodeName>) {
        let id = owner.map_or(0, |name| self.owner_id(&name));
        self.assign(slot, id);
        if owner == Some(self.me) {
            self.my_slots[slot as usize / 8] |= 1 << (slot % 8);
        } else {
            self.my_slots[slot as usize / 8] &= !(1 << (slot % 8));
        }
    }

    /// This node's slots, one bit each (bit `slot % 8` of byte `slot / 8`).
    pub fn my_slots(&self) -> &[u8; SLOTS / 8] {
        &self.my_slots
    }

    /// Frees slots this node serves (DELSLOTS, FLUSHSLOTS).
    pub fn del_slots(&mut self, slots: impl IntoIterator<Item = u16>) -> Vec<Output> {
        let me = self.owner_id(&self.me.clone());
        for slot in slots {
            if self.owners[slot as usize] == me {
                self.assign(slot, 0);
            }
            self.my_slots[slot as usize / 8] &= !(1 << (slot % 8));
        }
        vec![Output::SaveConfig]
    }

    /// CLUSTER BUMPEPOCH (without consensus): `Some(epoch)` when bumped.
    pub fn bump_epoch(&mut self) -> Option<u64> {
        let max = self
            .peers
            .values()
            .map(|p| p.config_epoch)
            .chain([self.current_epoch, self.config_epoch])
            .max()
            .unwrap_or(0);
        if self.config_epoch == 0 || self.config_epoch != max {
            self.current_epoch += 1;
            self.config_epoch = self.current_epoch;
            Some(self.config_epoch)
        } else {
            None
        }
    }

    /// Claims slots for this node (ADDSLOTS).
    pub fn add_slots(&mut self, slots: impl IntoIterator<Item = u16>) -> Vec<Output> {
        let me = self.owner_id(&self.me.clone());
        for slot in slots {
            self.assign(slot, me);
            self.my_slots[slot as usize / 8] |= 1 << (slot % 8);
        }
        vec![Output::SaveConfig]
    }

    /// Takes the slots `sender` claims whose owner has an older config
    /// epoch, or none (clusterUpdateSlotsConfigWith); a slot being
    /// imported is left to the operator. Then, if the master this node is
    /// (or replicates) lost its last slot to `sender`, this node
    /// replicates `sender`; else the slots taken from this node are
    /// reported, for their keys to go. Returns whether anything changed.
    pub(super) fn update_slots_with(
        &mut self,
        sender: &NodeName,
        epoch: u64,
        slots: &[u8; SLOTS / 8],
        out: &mut Vec<Output>,
    ) -> bool {
        if *sender == self.me {
            return false;
        }
        let mut changed = false;
        let mut lost = Vec::new();
        let sender_id = self.known_owner_id(sender);
        let me = self.known_owner_id(&self.me);
        // The master whose slots this node follows: itself, or its master.
        let current_master = self.my_master.unwrap_or(self.me);
        let current_master_id = self.known_owner_id(&current_master);
        let (mut sender_slots, mut ours_taken) = (0usize, 0usize);
        // Owners come in long runs: each one's epoch is looked up once a run.
        let mut last: Option<(u16, u64)> = None;
        for slot in claimed(slots) {
            sender_slots += 1;
            let owner = self.owners[slot as usize];
            if (owner != 0 && Some(owner) == sender_id) || self.importing.contains_key(&slot) {
                continue;
            }
            let older = owner == 0 || {
                let owner_epoch = match last {
                    Some((id, e)) if id == owner => e,
                    _ => {
                        let e = self.name_of_owner(owner).map_or(0, |o| self.epoch_of(o));
                        last = Some((owner, e));
                        e
                    }
                };
                owner_epoch < epoch
            };
            if older {
                if owner != 0 && Some(owner) == me {
                    lost.push(slot);
                }
                if owner != 0 && Some(owner) == current_master_id {
                    ours_taken += 1;
                }
                self.set_owner(slot, Some(*sender));
                changed = true;
            }
        }
        let grandmaster = self
            .my_master
            .and_then(|m| self.peers.get(&m))
            .and_then(|m| m.master.filter(|_| m.is_replica()))
            .filter(|g| *g != self.me);
        if ours_taken > 0
            && self.slot_count_of(&current_master) == 0
            && (self.failover_settings.allow_replica_migration || sender_slots == ours_taken)
        {
            // Failed over (a master), or the master this replica followed
            // was: follow the node that took the slots.
            out.extend(self.set_master(*sender));
        } else if let Some(grandmaster) = grandmaster {
            // This replica's master turned replica: no sub-replicas.
            out.extend(self.set_master(grandmaster));
        } else if !lost.is_empty() {
            out.push(Output::SlotsLost(lost));
        }
        changed
    }

    /// A sender that claims a slot this node knows is served with a newer
    /// config epoch is told so with an UPDATE about the owner (one per
    /// message, as Redis).
    pub(super) fn update_if_stale(&self, message: &Message) -> Vec<Output> {
        let header = &message.header;
        let Some(sender) = self.peers.get(&header.sender) else {
            return Vec::new();
        };
        let sender_id = self.known_owner_id(&header.sender);
        let mut last: Option<(u16, u64)> = None;
        let newer = claimed(&header.slots).find_map(|slot| {
            let owner = self.owners[slot as usize];
            if owner == 0 || Some(owner) == sender_id {
                return None;
            }
            let owner_epoch = match last {
                Some((id, e)) if id == owner => e,
                _ => {
                    let e = self.name_of_owner(owner).map_or(0, |o| self.epoch_of(o));
                    last = Some((owner, e));
                    e
                }
            };
            (owner_epoch > header.config_epoch).then_some(owner)
        });
        let Some(owner) = newer else {
            return Vec::new();
        };
        let mut slots = Box::new([0u8; SLOTS / 8]);
        for (slot, &o) in self.owners.iter().enumerate() {
            if o == owner {
                slots[slot / 8] |= 1 << (slot % 8);
            }
        }
        let Some(&owner) = self.name_of_owner(owner) else {
            return Vec::new();
        };
        vec![Output::Send {
            to: sender.name,
            ip: sender.ip.clone(),
            cport: sender.cport,
            message: Message {
                header: self.header(kind::UPDATE),
                body: Body::Update {
                    config_epoch: self.epoch_of(&owner),
                    node: owner,
                    slots,
                },
            },
        }]
    }

    /// Slots whose owner is reachable (this node, or a peer not FAIL).
    pub fn slots_ok(&self) -> usize {
        // Runs every tick: adds up the counts of the reachable owners.
        self.owner_names
            .iter()
            .zip(&self.slot_counts[1..])
            .filter(|(name, _)| {
                **name == self.me
                    || self
                        .peers
                        .get(*name)
                        .is_some_and(|p| p.flags & node_flags::FAIL == 0)
            })
            .map(|(_, &count)| count as usize)
            .sum()
    }

    /// This node is cut off with a minority of the masters serving slots:
    /// fewer than a majority of them (itself included) are neither PFAIL
    /// nor FAIL as it sees them (clusterUpdateState). Such a master stops
    /// serving, so that it takes no writes the majority's failover will
    /// discard.
    pub fn among_minority(&self) -> bool {
        let (mut size, mut reachable) = (0usize, 0usize);
        for (name, &count) in self.owner_names.iter().zip(&self.slot_counts[1..]) {
            if count == 0 {
                continue;
            }
            if *name == self.me {
                size += 1;
                reachable += 1;
                continue;
            }
            let Some(peer) = self.peers.get(name) else {
                continue;
            };
            if peer.is_replica() {
                continue;
            }
            size += 1;
            reachable += usize::from(!peer.failing());
        }
        reachable < size / 2 + 1
    }

    pub(super) fn epoch_of(&self, name: &NodeName) -> u64 {
        if *name == self.me {
            self.config_epoch
        } else {
            self.peers.get(name).map_or(0, |p| p.config_epoch)
        }
    }
}

/// The slots set in a slot bitmap.
pub(super) fn claimed(slots: &[u8; SLOTS / 8]) -> impl Iterator<Item = u16> + '_ {
    // A 64-bit word at a time, one trailing-zero count per set bit: every
    // PING's claims go through here.
    slots
        .chunks_exact(8)
        .enumerate()
        .flat_map(|(word_index, word)| {
            let mut bits = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some((word_index * 64 + bit) as u16)
            })
        })
}
