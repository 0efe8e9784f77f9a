//! A hierarchical hashed timing wheel (Varghese & Lauck), single-threaded and
//! generic over the item it stores.
//!
//! # Layout
//!
//! Time is measured in *ticks* of one millisecond, counted from an epoch the
//! caller chooses. The wheel has [`LEVELS`] (6) levels of [`SLOTS`] (64)
//! slots. A slot of level `L` covers `64^L` ticks and the whole level covers
//! `64^(L+1)` ticks, so level 0 has one slot per tick (64 ms in all), level 1
//! one slot per 64 ms (~4 s in all), and so on up to level 5 whose slots are
//! `2^30` ms (~12 days) wide and which covers `2^36` ms (~2.2 years).
//!
//! Every slot is an intrusive doubly linked list threaded through a slab of
//! entries (a `Vec` plus a free list), so inserting and removing an entry are
//! O(1) and never search. Each level keeps an `occupied: u64` bitmap with bit
//! `s` set while slot `s` holds at least one entry, so the next non-empty slot
//! of a level is found with a mask and a `trailing_zeros`. A [`Key`] is a slab
//! index plus the generation of that slab cell; the generation is bumped
//! whenever the cell is freed, so a key kept after its entry fired or was
//! removed never matches a newer entry that reuses the cell.
//!
//! # Slot math
//!
//! The wheel keeps its current tick, `elapsed`. An entry with deadline `when`
//! (`when > elapsed`) goes to the lowest level whose window, aligned to that
//! level's range, holds both `elapsed` and `when`: the level is the index of
//! the highest bit in which they differ divided by 6
//! (`(63 - ((elapsed ^ when) | 63).leading_zeros()) / 6`), and the slot is the
//! six bits of `when` that belong to that level
//! (`(when >> (6 * level)) & 63`). Because `elapsed` and `when` agree on every
//! bit above the level and `when > elapsed`, the entry's slot comes strictly
//! after the slot `elapsed` is in, so the *start* of the slot (the `when`
//! with the level's lower bits cleared) is a tick in `(elapsed, when]`. That
//! start is the slot's *deadline*: the tick at which the slot is processed.
//!
//! An entry whose `when` is at or before `elapsed` goes to a separate *ready*
//! list and fires on the next [`Wheel::advance`], whatever tick it is given.
//!
//! A deadline further away than the top level can express is clamped: the
//! entry is placed as if its deadline were `elapsed + 2^36 - 2^30` (the
//! farthest tick whose top-level slot is still strictly ahead of the current
//! one, possibly in the top level's next rotation), but the entry keeps its
//! true `when`. When that slot comes due the entry is simply placed again,
//! clamped again if still too far, and it fires only once its true deadline
//! is reached. At the top level a slot index below the current one therefore
//! stands for the next rotation (`window start + 2^36 + slot * 2^30`).
//!
//! # Cascading and advancing
//!
//! [`Wheel::advance`] repeatedly takes the non-empty slot with the earliest
//! deadline, provided that deadline is at or before the target tick, sets
//! `elapsed` to the deadline and empties the slot: each entry whose `when` is
//! at or before the deadline fires, every other one is placed again relative
//! to the new `elapsed`, which puts it on a lower level (it *cascades*) or, for
//! a clamped entry, in a later top-level slot. Every placement lands in a slot
//! whose deadline is strictly later than the one being processed, so the loop
//! terminates. Finally `elapsed` becomes the target tick. Empty slots are never
//! visited: the bitmaps jump straight to the next occupied slot, so the cost
//! is proportional to the entries fired or cascaded (each entry cascades at
//! most five times, plus once per ~2.2 years for a clamped one) plus the
//! levels, never to the number of elapsed ticks. A jump of a full top-level
//! rotation (`2^36` ticks) or more instead re-places every entry once against
//! the target tick (O(entries)), so even a jump of centuries costs no more
//! than one pass over the wheel.
//!
//! Ready entries (all due at or before the current tick) fire first, in
//! insertion order; the others fire in non-decreasing order of deadline, and
//! entries of equal deadline in insertion order, except on a jump of a full
//! rotation or more, where the order is unspecified.
//!
//! # What `next_expiration` returns
//!
//! [`Wheel::next_expiration`] returns the smallest slot deadline over all
//! levels (the lowest non-empty level always holds it, since a level's slots
//! all lie before the next level's), or, while the ready list is non-empty, a
//! tick at or before the current one (the smallest deadline put on the ready
//! list since it was last empty). For a level-0 entry the slot deadline is its
//! exact `when`. For an entry on a higher level it is the start of the entry's
//! slot, which may be earlier than the entry's `when`: at that tick the slot
//! cascades and nothing fires unless some entry's `when` equals the slot
//! start. The returned tick is thus never later than the earliest deadline in
//! the wheel, so a caller that sleeps until it never oversleeps a timer; and
//! since `advance` only fires entries whose `when` is at or before the target
//! tick, waking at an early tick never fires a timer early, it only costs an
//! extra wake-up after which `next_expiration` reports a later tick.
//!
//! # Re-entrancy and panics
//!
//! The `fire` callback takes items by value and cannot reach the wheel, which
//! is mutably borrowed for the whole call; the caller wakes tasks afterwards.
//! Each entry is unlinked and freed before its item is handed to `fire`, so if
//! `fire` panics the wheel stays consistent and the entries not yet fired are
//! still in it (due), to fire on the next `advance`.

use std::fmt;

/// Bits of a tick consumed by one level.
const SLOT_BITS: u32 = 6;
/// Slots per level.
const SLOTS: usize = 1 << SLOT_BITS;
/// Mask selecting a slot index out of a shifted tick.
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Number of levels.
const LEVELS: usize = 6;
/// Number of slot lists over all levels; list `level * SLOTS + slot`.
const WHEEL_LISTS: usize = LEVELS * SLOTS;
/// List id of the ready list: entries due at or before the current tick.
const READY: usize = WHEEL_LISTS;
/// Width in ticks of one top-level slot (`64^5`).
const TOP_SLOT_TICKS: u64 = 1 << (SLOT_BITS * (LEVELS as u32 - 1));
/// Ticks covered by the whole top level, one rotation (`64^6`).
const RANGE: u64 = 1 << (SLOT_BITS * LEVELS as u32);
/// The farthest distance from the current tick at which an entry is placed;
/// a later deadline is placed at this distance and placed again when its slot
/// comes due. It keeps the placement's top-level slot strictly ahead of the
/// current top-level slot, whatever the current tick's offset in its slot.
const MAX_SPAN: u64 = RANGE - TOP_SLOT_TICKS;
/// Null link in the slab.
const NIL: u32 = u32::MAX;

/// Position of an entry: slab index + generation (so a stale key never
/// removes a reused slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    /// Index of the entry's cell in the slab.
    pub(crate) index: u32,
    /// Generation of that cell when the entry was inserted.
    pub(crate) gen: u32,
}

/// One cell of the slab: a live entry (with `item` set) or a free cell.
struct Entry<T> {
    /// The stored item; `None` while the cell is free.
    item: Option<T>,
    /// Bumped each time the cell is freed, to tell stale keys apart.
    gen: u32,
    /// The entry's true deadline.
    when: u64,
    /// The list the entry is linked in (a slot list or [`READY`]).
    list: u16,
    /// Previous entry in the list, or [`NIL`].
    prev: u32,
    /// Next entry in the list, or [`NIL`]; the next free cell while free.
    next: u32,
}

/// Head and tail of an intrusive list of slab entries.
#[derive(Clone, Copy)]
struct List {
    /// First entry, or [`NIL`] when empty.
    head: u32,
    /// Last entry, or [`NIL`] when empty.
    tail: u32,
}

impl List {
    /// The empty list.
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
    };
}

/// A hierarchical hashed timing wheel of 6 levels of 64 slots, one tick
/// (millisecond) per level-0 slot, storing items of type `T`.
pub(crate) struct Wheel<T> {
    /// The wheel's current tick.
    elapsed: u64,
    /// The slab holding every entry, live or free.
    entries: Vec<Entry<T>>,
    /// Head of the slab's free list, or [`NIL`].
    free: u32,
    /// Number of live entries.
    len: usize,
    /// The slot lists (`level * SLOTS + slot`), then the ready list.
    lists: Box<[List]>,
    /// Per level, bit `s` is set while slot `s` is non-empty.
    occupied: [u64; LEVELS],
    /// The smallest `when` linked into the ready list since it was last
    /// empty; `u64::MAX` while it is empty.
    ready_min: u64,
    /// Slots processed and re-placement passes made by `advance`, to check
    /// that its cost does not grow with the elapsed ticks.
    #[cfg(test)]
    steps: u64,
}

impl<T> Wheel<T> {
    /// An empty wheel whose clock starts at tick `now` (ticks are
    /// milliseconds since an epoch chosen by the caller).
    pub(crate) fn new(now: u64) -> Self {
        Wheel {
            elapsed: now,
            entries: Vec::new(),
            free: NIL,
            len: 0,
            lists: vec![List::EMPTY; WHEEL_LISTS + 1].into_boxed_slice(),
            occupied: [0; LEVELS],
            ready_min: u64::MAX,
            #[cfg(test)]
            steps: 0,
        }
    }

    /// Inserts `item` to fire at tick `when`. A `when` at or before the
    /// wheel's current tick fires on the next `advance` call (never dropped).
    /// A `when` more than ~2.2 years ahead is clamped for placement and
    /// placed again when its slot comes due; it still fires only at `when`.
    /// O(1).
    ///
    /// # Panics
    ///
    /// If the wheel would hold `u32::MAX` entries.
    pub(crate) fn insert(&mut self, when: u64, item: T) -> Key {
        self.insert_at(when, item).0
    }

    /// [`insert`](Self::insert), and the tick at which the wheel looks at
    /// the new entry: its slot's start (or `when` itself, when it is due).
    /// The wheel's next expiration after the insert is the earlier of this
    /// and the one before it, so a caller that keeps a copy of it updates
    /// the copy without [`next_expiration`](Self::next_expiration)'s scan
    /// of the levels. O(1).
    pub(crate) fn insert_at(&mut self, when: u64, item: T) -> (Key, u64) {
        let index = self.alloc(when, item);
        let (list, at) = self.place(when);
        self.link(index, list);
        self.len += 1;
        let key = Key {
            index,
            gen: self.entries[index as usize].gen,
        };
        (key, at)
    }

    /// Removes the entry of `key` if it is still in the wheel; `None` if it
    /// fired or was removed (or the key is stale). O(1): the entry is
    /// unlinked from its slot list through its own links, no search.
    pub(crate) fn remove(&mut self, key: Key) -> Option<T> {
        let entry = self.entries.get(key.index as usize)?;
        if entry.gen != key.gen || entry.item.is_none() {
            return None;
        }
        self.unlink(key.index);
        Some(self.release(key.index))
    }

    /// The earliest tick at which some entry may fire, `None` when empty.
    ///
    /// Never later than the earliest deadline in the wheel. It is exact when
    /// the earliest entry sits on level 0; when it sits on a higher level the
    /// tick returned is the start of its slot, at which the slot cascades
    /// (possibly earlier than any deadline; advancing to it fires nothing
    /// early). While entries are due (inserted at or before the current
    /// tick and not yet fired) it is a tick at or before the current one.
    /// O(levels).
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        let due = self.next_due().map(|(_, deadline)| deadline);
        if self.lists[READY].head == NIL {
            due
        } else {
            Some(due.map_or(self.ready_min, |d| d.min(self.ready_min)))
        }
    }

    /// Advances the wheel's clock to `now` (monotonic: a smaller `now` is
    /// treated as the current tick), calling `fire(item)` for every entry
    /// whose `when <= now`, exactly once each, and cascading higher-level
    /// entries down as their slots come due. Entries with `when > now` are
    /// never fired. The cost is proportional to the entries fired or
    /// cascaded plus the levels, not to the number of elapsed ticks.
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(T)) {
        let now = now.max(self.elapsed);
        if now - self.elapsed >= RANGE {
            self.replace_all(now);
        }
        while let Some(index) = self.pop_front(READY) {
            fire(self.release(index));
        }
        while let Some((list, deadline)) = self.next_due() {
            if deadline > now {
                break;
            }
            // A deadline before `elapsed` is only left behind by a panic in
            // `fire`; the slot is then simply processed at the current tick.
            let at = deadline.max(self.elapsed);
            self.elapsed = at;
            #[cfg(test)]
            {
                self.steps += 1;
            }
            while let Some(index) = self.pop_front(list) {
                let when = self.entries[index as usize].when;
                if when <= at {
                    fire(self.release(index));
                } else {
                    let to = self.list_for(when);
                    debug_assert_ne!(to, list, "an entry must leave the slot being processed");
                    self.link(index, to);
                }
            }
        }
        self.elapsed = now;
    }

    // Used by the tests (and kept for callers that inspect a wheel).
    #[cfg_attr(not(test), allow(dead_code))]
    /// The number of entries in the wheel.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    // Used by the tests (and kept for callers that inspect a wheel).
    #[cfg_attr(not(test), allow(dead_code))]
    /// Whether the wheel holds no entries.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    // Used by the tests (and kept for callers that inspect a wheel).
    #[cfg_attr(not(test), allow(dead_code))]
    /// The wheel's current tick.
    pub(crate) fn now(&self) -> u64 {
        self.elapsed
    }

    /// Takes every entry out (for shutdown), in any order, calling `f` with
    /// each item. The clock is left as it is; keys of drained entries become
    /// stale.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(T)) {
        for list in 0..=WHEEL_LISTS {
            while let Some(index) = self.pop_front(list) {
                f(self.release(index));
            }
        }
    }

    /// The list an entry of deadline `when` belongs in, relative to the
    /// current tick: [`READY`] if it is due, otherwise a slot list whose
    /// deadline lies in `(elapsed, when]`.
    fn list_for(&self, when: u64) -> usize {
        self.place(when).0
    }

    /// [`list_for`](Self::list_for), and the list's tick: the slot's start
    /// (module docs, "Slot math"), or `when` for [`READY`].
    fn place(&self, when: u64) -> (usize, u64) {
        if when <= self.elapsed {
            return (READY, when);
        }
        let target = when.min(self.elapsed.saturating_add(MAX_SPAN));
        let level = level_for(self.elapsed, target);
        let start = target & !((1u64 << (SLOT_BITS * level as u32)) - 1);
        (level * SLOTS + slot_for(target, level), start)
    }

    /// The non-empty slot with the earliest deadline, as its list id and
    /// deadline; `None` when every slot is empty. O(levels).
    fn next_due(&self) -> Option<(usize, u64)> {
        let mut best: Option<(usize, u64)> = None;
        for (level, &occupied) in self.occupied.iter().enumerate() {
            if occupied == 0 {
                continue;
            }
            let (slot, deadline) = slot_deadline(self.elapsed, level, occupied);
            if best.is_none_or(|(_, d)| deadline < d) {
                best = Some((level * SLOTS + slot, deadline));
            }
        }
        best
    }

    /// Re-places every slot entry against the tick `now`, which becomes the
    /// current tick; entries due by then move to the ready list. Used for a
    /// jump of a full top-level rotation or more, where visiting slots in
    /// order could cycle the clamped entries many times. Calls no user code.
    fn replace_all(&mut self, now: u64) {
        #[cfg(test)]
        {
            self.steps += 1;
        }
        let mut chains = [NIL; WHEEL_LISTS];
        for (chain, list) in chains.iter_mut().zip(self.lists.iter_mut()) {
            *chain = list.head;
            *list = List::EMPTY;
        }
        self.occupied = [0; LEVELS];
        self.elapsed = now;
        for chain in chains {
            let mut index = chain;
            while index != NIL {
                let entry = &self.entries[index as usize];
                let (next, when) = (entry.next, entry.when);
                let to = self.list_for(when);
                self.link(index, to);
                index = next;
            }
        }
    }

    /// Takes a free slab cell (or grows the slab) and fills it.
    fn alloc(&mut self, when: u64, item: T) -> u32 {
        if self.free != NIL {
            let index = self.free;
            let entry = &mut self.entries[index as usize];
            self.free = entry.next;
            entry.item = Some(item);
            entry.when = when;
            index
        } else {
            let index = self.entries.len();
            assert!(index < NIL as usize, "timer wheel is full");
            self.entries.push(Entry {
                item: Some(item),
                gen: 0,
                when,
                list: READY as u16,
                prev: NIL,
                next: NIL,
            });
            index as u32
        }
    }

    /// Frees the (already unlinked) cell `index`, bumping its generation,
    /// and returns its item.
    fn release(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        let item = entry.item.take().expect("released a free cell");
        entry.gen = entry.gen.wrapping_add(1);
        entry.next = self.free;
        self.free = index;
        self.len -= 1;
        item
    }

    /// Links the entry `index` at the tail of `list`.
    fn link(&mut self, index: u32, list: usize) {
        let tail = self.lists[list].tail;
        let entry = &mut self.entries[index as usize];
        entry.list = list as u16;
        entry.prev = tail;
        entry.next = NIL;
        let when = entry.when;
        if tail == NIL {
            self.lists[list].head = index;
            if list < WHEEL_LISTS {
                self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
            }
        } else {
            self.entries[tail as usize].next = index;
        }
        self.lists[list].tail = index;
        if list == READY {
            self.ready_min = self.ready_min.min(when);
        }
    }

    /// Unlinks the entry `index` from the list it is in.
    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (list, prev, next) = (entry.list as usize, entry.prev, entry.next);
        if prev == NIL {
            self.lists[list].head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        if self.lists[list].head == NIL {
            if list < WHEEL_LISTS {
                self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
            } else {
                self.ready_min = u64::MAX;
            }
        }
    }

    /// Unlinks and returns the first entry of `list`, if any.
    fn pop_front(&mut self, list: usize) -> Option<u32> {
        let head = self.lists[list].head;
        if head == NIL {
            return None;
        }
        self.unlink(head);
        Some(head)
    }
}

impl<T> fmt::Debug for Wheel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wheel")
            .field("now", &self.elapsed)
            .field("len", &self.len)
            .field("next_expiration", &self.next_expiration())
            .finish_non_exhaustive()
    }
}

/// The level for an entry due at `when` (`when > elapsed`): the highest bit
/// in which the two ticks differ, divided by the bits per level, capped at
/// the top level.
fn level_for(elapsed: u64, when: u64) -> usize {
    let masked = (elapsed ^ when) | SLOT_MASK;
    let significant = 63 - masked.leading_zeros();
    (significant / SLOT_BITS).min(LEVELS as u32 - 1) as usize
}

/// The slot of tick `when` on `level`.
fn slot_for(when: u64, level: usize) -> usize {
    ((when >> (SLOT_BITS * level as u32)) & SLOT_MASK) as usize
}

/// The first non-empty slot of `level` (whose bitmap is `occupied`, not zero)
/// at or after the slot of `elapsed`, wrapping to the level's next rotation,
/// and that slot's deadline (its first tick).
fn slot_deadline(elapsed: u64, level: usize, occupied: u64) -> (usize, u64) {
    let shift = SLOT_BITS * level as u32;
    let window_bits = shift + SLOT_BITS;
    let current = (elapsed >> shift) & SLOT_MASK;
    let window_start = elapsed & !((1u64 << window_bits) - 1);
    let ahead = occupied & (u64::MAX << current);
    let (slot, start) = if ahead != 0 {
        (ahead.trailing_zeros(), window_start)
    } else {
        // Only top-level slots are ever behind the current one: they belong
        // to the next rotation.
        (
            occupied.trailing_zeros(),
            window_start.saturating_add(1 << window_bits),
        )
    };
    (
        slot as usize,
        start.saturating_add(u64::from(slot) << shift),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// SplitMix64: a small deterministic generator for the randomized tests.
    struct Rng(u64);

    impl Rng {
        /// The next 64 random bits.
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// A value in `0..n` (`n > 0`).
        fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
    }

    /// Advances `wheel` to `now` and returns the fired items in order.
    fn fired<T>(wheel: &mut Wheel<T>, now: u64) -> Vec<T> {
        let mut out = Vec::new();
        wheel.advance(now, |item| out.push(item));
        out
    }

    #[test]
    fn insert_advance_fire() {
        let mut w = Wheel::new(100);
        assert!(w.is_empty());
        assert_eq!(w.next_expiration(), None);
        w.insert(110, "a");
        w.insert(105, "b");
        w.insert(110, "c");
        assert_eq!(w.len(), 3);
        assert_eq!(w.next_expiration(), Some(105));
        assert!(fired(&mut w, 104).is_empty());
        assert_eq!(w.now(), 104);
        assert_eq!(fired(&mut w, 105), ["b"]);
        assert_eq!(w.next_expiration(), Some(110));
        assert!(fired(&mut w, 109).is_empty());
        assert_eq!(fired(&mut w, 200), ["a", "c"]);
        assert!(w.is_empty());
        assert_eq!(w.next_expiration(), None);
        assert_eq!(w.now(), 200);
    }

    #[test]
    fn remove_before_fire() {
        let mut w = Wheel::new(0);
        let a = w.insert(10, 1);
        let b = w.insert(5_000, 2);
        let c = w.insert(10, 3);
        assert_eq!(w.remove(a), Some(1));
        assert_eq!(w.remove(a), None);
        assert_eq!(w.len(), 2);
        assert_eq!(w.remove(b), Some(2));
        assert_eq!(w.next_expiration(), Some(10));
        assert_eq!(fired(&mut w, 10_000), [3]);
        assert_eq!(w.remove(c), None);
        assert!(w.is_empty());
    }

    #[test]
    fn stale_keys_never_match() {
        let mut w = Wheel::new(0);
        let a = w.insert(1, 'a');
        assert_eq!(fired(&mut w, 1), ['a']);
        assert_eq!(w.remove(a), None);
        // The freed cell is reused with a new generation.
        let b = w.insert(2, 'b');
        assert_eq!(a.index, b.index);
        assert_ne!(a, b);
        assert_eq!(w.remove(a), None);
        assert_eq!(w.len(), 1);
        assert_eq!(w.remove(b), Some('b'));
        let c = w.insert(3, 'c');
        assert_eq!(w.remove(b), None);
        assert_eq!(w.remove(a), None);
        assert_eq!(fired(&mut w, 3), ['c']);
        assert_eq!(w.remove(c), None);
        // A key from another wheel's larger slab is just unknown.
        let mut big = Wheel::new(0);
        let mut far = big.insert(0, 0);
        for i in 1..10 {
            far = big.insert(i, i);
        }
        assert_eq!(w.remove(Key { gen: 0, ..far }), None);
    }

    #[test]
    fn past_deadlines_fire_on_next_advance() {
        let mut w = Wheel::new(1_000);
        w.insert(1_000, 'a');
        w.insert(3, 'b');
        w.insert(1_001, 'c');
        assert_eq!(w.next_expiration(), Some(3));
        // A smaller `now` is the current tick: due entries still fire.
        assert_eq!(fired(&mut w, 10), ['a', 'b']);
        assert_eq!(w.now(), 1_000);
        assert_eq!(w.next_expiration(), Some(1_001));
        assert_eq!(fired(&mut w, 1_001), ['c']);
        // Removing the only due entry clears the ready bound.
        let k = w.insert(0, 'd');
        assert_eq!(w.next_expiration(), Some(0));
        assert_eq!(w.remove(k), Some('d'));
        assert_eq!(w.next_expiration(), None);
    }

    #[test]
    fn higher_levels_cascade_and_report_slot_start() {
        let mut w = Wheel::new(0);
        // Level 1 (64 ms slots): 100 sits in the slot starting at 64.
        w.insert(100, 100);
        assert_eq!(w.next_expiration(), Some(64));
        assert!(fired(&mut w, 64).is_empty());
        assert_eq!(w.next_expiration(), Some(100));
        assert!(fired(&mut w, 99).is_empty());
        assert_eq!(fired(&mut w, 100), [100]);
        // Level 3 (262 s slots), deadline on a slot start.
        let when = 3 * 64 * 64 * 64;
        w.insert(when, 1);
        w.insert(when + 1, 2);
        assert_eq!(w.next_expiration(), Some(when));
        assert_eq!(fired(&mut w, when), [1]);
        assert_eq!(w.next_expiration(), Some(when + 1));
        assert_eq!(fired(&mut w, when + 1), [2]);
    }

    #[test]
    fn fires_in_deadline_order() {
        let mut w = Wheel::new(7);
        let mut rng = Rng(11);
        let mut whens: Vec<u64> = (0..2_000).map(|_| 7 + rng.below(1 << 28)).collect();
        for (i, &when) in whens.iter().enumerate() {
            w.insert(when, (when, i));
        }
        let out = fired(&mut w, 7 + (1 << 28));
        let got: Vec<u64> = out.iter().map(|&(when, _)| when).collect();
        whens.sort_unstable();
        assert_eq!(got, whens);
        // Equal deadlines fire in insertion order.
        for pair in out.windows(2) {
            if pair[0].0 == pair[1].0 {
                assert!(pair[0].1 < pair[1].1);
            }
        }
    }

    /// 100,000 timers, deadlines up to 50 s ahead (some in the past),
    /// inserted while the clock moves in random steps and jumps; half are
    /// removed at random times. Each fires exactly once, on the first
    /// advance that reaches its deadline, and removed ones never fire.
    #[test]
    fn random_timers_fire_once_on_time() {
        const TOTAL: usize = 100_000;
        /// Not yet fired nor removed.
        const LIVE: u8 = 0;
        /// Fired.
        const FIRED: u8 = 1;
        /// Removed before firing.
        const REMOVED: u8 = 2;

        let mut rng = Rng(0x5eed);
        let start = 1_234_567;
        let mut w = Wheel::new(start);
        let mut now = start;
        let mut advances = 0u64;
        let mut when = Vec::with_capacity(TOTAL);
        let mut inserted_at = Vec::with_capacity(TOTAL);
        let mut state = Vec::with_capacity(TOTAL);
        let mut to_remove: Vec<(Key, usize)> = Vec::new();
        let mut last = start;
        let mut fires = 0usize;
        let mut removals = 0usize;

        while when.len() < TOTAL || !to_remove.is_empty() {
            for _ in 0..rng.below(21) {
                if when.len() == TOTAL {
                    break;
                }
                let id = when.len();
                let deadline = if rng.below(20) == 0 {
                    now - rng.below(now - start + 1)
                } else {
                    now + rng.below(50_000)
                };
                last = last.max(deadline);
                when.push(deadline);
                inserted_at.push(advances);
                state.push(LIVE);
                let key = w.insert(deadline, id);
                if rng.below(2) == 0 {
                    to_remove.push((key, id));
                }
            }
            for _ in 0..rng.below(12) {
                if to_remove.is_empty() {
                    break;
                }
                let pick = rng.below(to_remove.len() as u64) as usize;
                let (key, id) = to_remove.swap_remove(pick);
                let got = w.remove(key);
                if state[id] == FIRED {
                    assert_eq!(got, None);
                } else {
                    assert_eq!(got, Some(id));
                    state[id] = REMOVED;
                    removals += 1;
                }
                assert_eq!(w.remove(key), None);
            }
            let step = match rng.below(100) {
                0..=79 => rng.below(20),
                80..=96 => rng.below(1_000),
                _ => rng.below(30_000),
            };
            let prev = now;
            now += step;
            advances += 1;
            w.advance(now, |id| {
                assert_eq!(state[id], LIVE, "timer {id} fired twice or after removal");
                assert!(when[id] <= now, "timer {id} fired early");
                assert!(
                    when[id] > prev || inserted_at[id] == advances - 1,
                    "timer {id} fired late"
                );
                state[id] = FIRED;
                fires += 1;
            });
            assert_eq!(w.len(), when.len() - fires - removals);
        }
        w.advance(last, |id| {
            assert_eq!(state[id], LIVE);
            assert!(when[id] <= last);
            state[id] = FIRED;
            fires += 1;
        });
        assert!(w.is_empty());
        assert_eq!(w.next_expiration(), None);
        assert_eq!(fires + removals, TOTAL);
        assert!(removals > TOTAL / 3, "removed {removals}");
        assert!(state.iter().all(|&s| s != LIVE));
    }

    /// Random inserts (near, far, past, beyond the top level and near
    /// `u64::MAX`), removals and advances checked against a `BTreeMap`:
    /// exactly the entries due fire, and `next_expiration` is `None` iff the
    /// wheel is empty, never later than the earliest live deadline, and after
    /// the current tick unless an entry is already due.
    #[test]
    fn next_expiration_matches_model() {
        let mut rng = Rng(42);
        let start = 1 << 40;
        let mut w = Wheel::new(start);
        let mut model: BTreeMap<(u64, usize), ()> = BTreeMap::new();
        let mut keys: Vec<(Key, u64, usize)> = Vec::new();
        let mut next_id = 0usize;
        for _ in 0..60_000 {
            let now = w.now();
            match rng.below(100) {
                0..=44 => {
                    let when = match rng.below(10) {
                        0 => now - rng.below(1_000).min(now),
                        1 => now + rng.below(64),
                        2 => now + rng.below(4_096),
                        3 => now + rng.below(1 << 18),
                        4 => now + rng.below(1 << 26),
                        5 => now + rng.below(1 << 33),
                        6 => now + rng.below(1 << 38),
                        7 => now.saturating_add(rng.below(1 << 50)),
                        8 => u64::MAX - rng.below(1_000),
                        _ => now + 1 + rng.below(64 * 64),
                    };
                    let id = next_id;
                    next_id += 1;
                    keys.push((w.insert(when, id), when, id));
                    model.insert((when, id), ());
                }
                45..=59 => {
                    if !keys.is_empty() {
                        let pick = rng.below(keys.len() as u64) as usize;
                        let (key, when, id) = keys.swap_remove(pick);
                        let expected = model.remove(&(when, id)).map(|()| id);
                        assert_eq!(w.remove(key), expected);
                    }
                }
                _ => {
                    let target = match rng.below(10) {
                        0..=2 => now + rng.below(64),
                        3..=4 => now + rng.below(10_000),
                        5 => now + rng.below(1 << 32),
                        6 => now + (1 << 36) + rng.below(1 << 36),
                        7 => now.saturating_sub(rng.below(100)),
                        _ => w.next_expiration().unwrap_or(now + 1),
                    };
                    let target = target.max(now);
                    let rest = model.split_off(&(target + 1, 0));
                    let mut expected: Vec<(u64, usize)> = model.into_keys().collect();
                    model = rest;
                    let mut got = Vec::new();
                    w.advance(target, |id| got.push(id));
                    assert_eq!(w.now(), target);
                    let whens: BTreeMap<usize, u64> =
                        expected.iter().map(|&(when, id)| (id, when)).collect();
                    let mut got_pairs: Vec<(u64, usize)> =
                        got.iter().map(|&id| (whens[&id], id)).collect();
                    if target - now < RANGE {
                        // Without a full-rotation jump, entries that were not
                        // yet due fire in deadline order, after the due ones.
                        let later: Vec<u64> = got_pairs.iter().map(|p| p.0).collect();
                        let split = later.iter().position(|&when| when > now);
                        let later = &later[split.unwrap_or(later.len())..];
                        assert!(later.iter().all(|&when| when > now));
                        assert!(later.windows(2).all(|p| p[0] <= p[1]));
                    }
                    got_pairs.sort_unstable();
                    expected.sort_unstable();
                    assert_eq!(got_pairs, expected);
                }
            }
            assert_eq!(w.len(), model.len());
            match (w.next_expiration(), model.keys().next()) {
                (None, None) => {}
                (Some(next), Some(&(earliest, _))) => {
                    assert!(next <= earliest, "next {next} after earliest {earliest}");
                    if earliest > w.now() {
                        assert!(next > w.now(), "next {next} not after now");
                    }
                }
                (next, earliest) => panic!("next {next:?} vs earliest {earliest:?}"),
            }
        }
    }

    /// Advancing to `next_expiration` over and over drains the wheel with a
    /// bounded number of calls: every call fires or cascades something.
    #[test]
    fn insert_at_reports_what_next_expiration_becomes() {
        let mut rng = Rng(0x5eed_7135);
        let mut w = Wheel::new(rng.below(1 << 40));
        let mut keys = Vec::new();
        for step in 0..20_000 {
            match rng.below(10) {
                0..=5 => {
                    let before = w.next_expiration();
                    let now = w.now();
                    // Due, near, far, and past the top level's reach.
                    let when = match rng.below(4) {
                        0 => now.saturating_sub(rng.below(3)),
                        1 => now + 1 + rng.below(64),
                        2 => now + 1 + rng.below(1 << 30),
                        _ => now + rng.below(1 << 40),
                    };
                    let (k, at) = w.insert_at(when, step);
                    keys.push(k);
                    assert!(
                        at <= when,
                        "step {step}: looked at {at} after its deadline {when}"
                    );
                    let want = before.map_or(at, |b| b.min(at));
                    assert_eq!(w.next_expiration(), Some(want), "step {step}: when {when}");
                }
                6..=7 => {
                    if !keys.is_empty() {
                        let k = keys.swap_remove(rng.below(keys.len() as u64) as usize);
                        w.remove(k);
                    }
                }
                _ => {
                    let bits = rng.below(36);
                    let to = w.now() + rng.below(1 << bits);
                    w.advance(to, |_| {});
                }
            }
        }
    }

    #[test]
    fn next_expiration_makes_progress() {
        let mut rng = Rng(7);
        let mut w = Wheel::new(99);
        let n = 5_000u64;
        for i in 0..n {
            let when = 99 + rng.below(1 << (6 * (1 + i % 7)));
            w.insert(when, when);
        }
        let mut calls = 0;
        let mut last = 0;
        while let Some(next) = w.next_expiration() {
            calls += 1;
            w.advance(next, |when| {
                assert_eq!(when, next);
                assert!(when >= last);
                last = when;
            });
        }
        assert!(calls <= 7 * n, "{calls} calls");
    }

    /// Jumps of an hour, a year and centuries visit only occupied slots.
    #[test]
    fn big_jumps_cost_no_ticks() {
        const HOUR: u64 = 3_600_000;
        const DAY: u64 = 24 * HOUR;
        const YEAR: u64 = 365 * DAY;
        let start = 1_700_000_000_000;
        let mut w = Wheel::new(start);
        w.insert(start + 5, 'a');
        w.insert(start + 70_000, 'b');
        w.insert(start + 3_000_000, 'c');
        let late = start + 400 * DAY;
        w.insert(late, 'd');
        w.insert(u64::MAX, 'e');
        w.insert(u64::MAX - 1, 'f');

        assert_eq!(fired(&mut w, start + HOUR), ['a', 'b', 'c']);
        assert!(w.steps <= 12, "{} steps for an hour", w.steps);
        w.steps = 0;
        assert!(fired(&mut w, start + HOUR + YEAR).is_empty());
        assert!(w.steps <= 12, "{} steps for a year", w.steps);
        w.steps = 0;
        assert!(fired(&mut w, late - 1).is_empty());
        assert_eq!(fired(&mut w, late), ['d']);
        assert!(w.steps <= 12, "{} steps to the late one", w.steps);
        w.steps = 0;
        // Centuries: one re-placement pass.
        assert!(fired(&mut w, late + 300 * YEAR).is_empty());
        assert!(w.steps <= 12, "{} steps for centuries", w.steps);
        w.steps = 0;
        assert!(fired(&mut w, u64::MAX - 2).is_empty());
        assert_eq!(fired(&mut w, u64::MAX - 1), ['f']);
        assert_eq!(fired(&mut w, u64::MAX), ['e']);
        assert!(w.steps <= 12, "{} steps to the end of time", w.steps);
        assert!(w.is_empty());
        assert_eq!(w.now(), u64::MAX);
        // The clock cannot go further; due entries still fire.
        w.insert(u64::MAX, 'g');
        w.insert(0, 'h');
        assert_eq!(fired(&mut w, u64::MAX), ['g', 'h']);
    }

    /// Deadlines beyond the top level are placed again as their clamped
    /// slot comes due, and fire exactly at their tick, never early.
    #[test]
    fn far_future_is_clamped_not_early() {
        let mut w = Wheel::new(0);
        let far = 3 * RANGE + 777;
        let k_max = w.insert(u64::MAX, "max");
        w.insert(far, "far");
        w.insert(far + RANGE / 2, "later");
        let next = w.next_expiration().unwrap();
        assert!(next > 0 && next <= MAX_SPAN);
        // Steps shorter than a rotation walk the clamped slots one by one.
        let mut now = 0;
        while now + RANGE / 3 < far {
            now += RANGE / 3;
            assert!(fired(&mut w, now).is_empty());
            assert!(w.next_expiration().unwrap() > now);
        }
        assert!(fired(&mut w, far - 1).is_empty());
        assert_eq!(w.next_expiration(), Some(far));
        assert_eq!(fired(&mut w, far), ["far"]);
        assert!(fired(&mut w, far + RANGE / 2 - 1).is_empty());
        assert_eq!(fired(&mut w, far + RANGE / 2), ["later"]);
        assert_eq!(w.len(), 1);
        assert_eq!(w.remove(k_max), Some("max"));
        assert!(w.is_empty());
        // Placement near the end of the tick range does not overflow.
        let mut w = Wheel::new(u64::MAX - 5);
        w.insert(u64::MAX, 1);
        w.insert(u64::MAX - 5, 2);
        assert_eq!(w.next_expiration(), Some(u64::MAX - 5));
        assert_eq!(fired(&mut w, u64::MAX - 1), [2]);
        assert_eq!(w.next_expiration(), Some(u64::MAX));
        assert_eq!(fired(&mut w, u64::MAX), [1]);
    }

    #[test]
    fn drain_takes_everything() {
        let mut w = Wheel::new(500);
        let keys: Vec<Key> = [0, 500, 501, 600, 100_000, 1 << 40, u64::MAX]
            .iter()
            .enumerate()
            .map(|(i, &when)| w.insert(when, i))
            .collect();
        assert_eq!(w.remove(keys[3]), Some(3));
        let mut out = Vec::new();
        w.drain(|i| out.push(i));
        out.sort_unstable();
        assert_eq!(out, [0, 1, 2, 4, 5, 6]);
        assert!(w.is_empty());
        assert_eq!(w.next_expiration(), None);
        assert_eq!(w.now(), 500);
        assert!(keys.iter().all(|&k| w.remove(k).is_none()));
        // Still usable afterwards.
        let k = w.insert(502, 9);
        assert!(keys.iter().all(|&k| w.remove(k).is_none()));
        assert_eq!(w.len(), 1);
        assert_eq!(fired(&mut w, 502), [9]);
        assert_eq!(w.remove(k), None);
    }

    #[test]
    fn panicking_fire_leaves_wheel_consistent() {
        let mut w = Wheel::new(0);
        for i in 0..4 {
            w.insert(1_000, i);
        }
        w.insert(2_000, 9);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.advance(5_000, |i| assert_ne!(i, 1));
        }));
        assert!(result.is_err());
        assert_eq!(w.len(), 3);
        assert!(w.next_expiration().unwrap() <= 1_000);
        assert_eq!(fired(&mut w, 5_000), [2, 3, 9]);
        assert!(w.is_empty());
    }

    #[test]
    fn level_and_slot_math() {
        assert_eq!(level_for(0, 1), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(63, 64), 1);
        assert_eq!(level_for(0, 4_095), 1);
        assert_eq!(level_for(0, 4_096), 2);
        assert_eq!(level_for(0, RANGE - 1), 5);
        assert_eq!(level_for(0, RANGE), 5);
        assert_eq!(level_for(0, u64::MAX), 5);
        assert_eq!(slot_for(100, 1), 1);
        assert_eq!(slot_for(RANGE - 1, 5), 63);
        // Slot 1 of level 1 from tick 10 starts at 64.
        assert_eq!(slot_deadline(10, 1, 1 << 1), (1, 64));
        // A top-level slot behind the current one is in the next rotation.
        let now = 5 * TOP_SLOT_TICKS + 3;
        assert_eq!(
            slot_deadline(now, 5, 1 << 2),
            (2, RANGE + 2 * TOP_SLOT_TICKS)
        );
    }
}
