//! [`Span`]: the workers of a level or a group.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// A set of workers: the workers of a [`Level`](crate::Level) or of one of
/// its groups.
///
/// Workers are numbered in hwloc's logical order, so a core, a cache, a
/// NUMA node or a package is a contiguous range of workers, and so is
/// almost every span: a range is the fast common case (no allocation;
/// membership is two comparisons). The kernel's NUMA levels are not always
/// ranges: the level of distance `d` of a worker spans the nodes within `d`
/// of its node, which need not be neighbours in worker order (on a
/// Magny-Cours machine with 8 nodes the nodes one hop away from node 0 are
/// 0, 1, 2, 4 and 6). Such a span is a bitmap, one word per 64 workers,
/// with its runs (maximal ranges) kept beside it for walks over its
/// members.
///
/// ```
/// use hwsched::Span;
/// let s = Span::from_workers([0, 1, 2, 3, 8, 9]);
/// assert_eq!(s.len(), 6);
/// assert!(s.contains(9) && !s.contains(5));
/// assert_eq!(s.runs(), [0..4, 8..10]);
/// assert_eq!(s.as_range(), None);
/// assert_eq!(Span::from(4..8).as_range(), Some(&(4..8)));
/// assert_eq!(s.to_string(), "0..4+8..10");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Span {
    /// The first member to one past the last.
    hull: Range<usize>,
    /// How many members.
    len: usize,
    /// `None` when the span is its hull.
    set: Option<Arc<Bits>>,
}

/// A non-contiguous span's members.
#[derive(PartialEq, Eq, Hash)]
struct Bits {
    /// Bit `w % 64` of word `w / 64` is set for each member `w`.
    words: Box<[u64]>,
    /// The maximal ranges of members, in order (at least two).
    runs: Box<[Range<usize>]>,
}

impl Span {
    /// The workers `range`.
    pub fn range(range: Range<usize>) -> Span {
        Span {
            len: range.len(),
            hull: range,
            set: None,
        }
    }

    /// Worker `w` alone.
    pub fn single(w: usize) -> Span {
        Span::range(w..w + 1)
    }

    /// The given workers (in any order, repeats ignored): a range if they
    /// are contiguous.
    pub fn from_workers(workers: impl IntoIterator<Item = usize>) -> Span {
        let mut ws: Vec<usize> = workers.into_iter().collect();
        ws.sort_unstable();
        ws.dedup();
        let mut runs: Vec<Range<usize>> = Vec::new();
        for w in ws {
            match runs.last_mut() {
                Some(r) if r.end == w => r.end = w + 1,
                _ => runs.push(w..w + 1),
            }
        }
        Span::from_runs(runs)
    }

    /// From sorted, disjoint, non-adjacent non-empty ranges.
    fn from_runs(runs: Vec<Range<usize>>) -> Span {
        match runs.as_slice() {
            [] => Span::range(0..0),
            [one] => Span::range(one.clone()),
            [first, .., last] => {
                let hull = first.start..last.end;
                let mut words = vec![0u64; hull.end.div_ceil(64)];
                let mut len = 0;
                for r in &runs {
                    len += r.len();
                    for w in r.clone() {
                        words[w / 64] |= 1 << (w % 64);
                    }
                }
                Span {
                    hull,
                    len,
                    set: Some(Arc::new(Bits {
                        words: words.into_boxed_slice(),
                        runs: runs.into_boxed_slice(),
                    })),
                }
            }
        }
    }

    /// How many workers (the kernel's `span_weight`).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the span has no worker.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `w` is a member.
    #[inline]
    pub fn contains(&self, w: usize) -> bool {
        if !self.hull.contains(&w) {
            return false;
        }
        match &self.set {
            None => true,
            Some(b) => b.words[w / 64] & (1 << (w % 64)) != 0,
        }
    }

    /// The first member (the span's start when it is a range).
    #[inline]
    pub fn first(&self) -> usize {
        self.hull.start
    }

    /// From the first member to one past the last.
    #[inline]
    pub fn hull(&self) -> &Range<usize> {
        &self.hull
    }

    /// The span as a range, when it is contiguous.
    #[inline]
    pub fn as_range(&self) -> Option<&Range<usize>> {
        match self.set {
            None => Some(&self.hull),
            Some(_) => None,
        }
    }

    /// Whether the span is one range of workers.
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.set.is_none()
    }

    /// The maximal ranges of members, in worker order: one for a
    /// contiguous span.
    #[inline]
    pub fn runs(&self) -> &[Range<usize>] {
        match &self.set {
            None => std::slice::from_ref(&self.hull),
            Some(b) => &b.runs,
        }
    }

    /// The members in worker order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + Clone + '_ {
        self.runs().iter().flat_map(Clone::clone)
    }

    /// Whether every worker of `range` is a member.
    fn holds_range(&self, range: &Range<usize>) -> bool {
        if range.is_empty() {
            return true;
        }
        if range.start < self.hull.start || range.end > self.hull.end {
            return false;
        }
        match &self.set {
            None => true,
            Some(b) => {
                // The run holding the range's start must reach its end.
                let i = b.runs.partition_point(|r| r.end <= range.start);
                b.runs
                    .get(i)
                    .is_some_and(|r| r.start <= range.start && range.end <= r.end)
            }
        }
    }

    /// Whether every member is one of `other`'s.
    pub fn is_subset(&self, other: &Span) -> bool {
        if self.len > other.len {
            return false;
        }
        match (&self.set, &other.set) {
            (None, _) => other.holds_range(&self.hull),
            (Some(a), Some(b)) => {
                self.hull.start >= other.hull.start
                    && self.hull.end <= other.hull.end
                    && a.words
                        .iter()
                        .zip(b.words.iter().chain(std::iter::repeat(&0)))
                        .all(|(x, y)| x & !y == 0)
            }
            (Some(a), None) => a.runs.iter().all(|r| other.holds_range(r)),
        }
    }

    /// The members of either.
    pub fn union(&self, other: &Span) -> Span {
        if other.is_subset(self) {
            return self.clone();
        }
        if self.is_subset(other) {
            return other.clone();
        }
        let mut runs: Vec<Range<usize>> = self.runs().iter().chain(other.runs()).cloned().collect();
        runs.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<usize>> = Vec::with_capacity(runs.len());
        for r in runs {
            match merged.last_mut() {
                Some(m) if r.start <= m.end => m.end = m.end.max(r.end),
                _ => merged.push(r),
            }
        }
        Span::from_runs(merged)
    }
}

impl From<Range<usize>> for Span {
    fn from(range: Range<usize>) -> Span {
        Span::range(range)
    }
}

impl PartialEq<Range<usize>> for Span {
    fn eq(&self, other: &Range<usize>) -> bool {
        self.as_range() == Some(other)
    }
}

impl fmt::Display for Span {
    /// `4..8` for a range, `0..4+8..10` for several runs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.runs().iter().enumerate() {
            if i > 0 {
                f.write_str("+")?;
            }
            write!(f, "{}..{}", r.start, r.end)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_stay_ranges() {
        let s = Span::from_workers([5, 3, 4, 4]);
        assert_eq!(s, Span::range(3..6));
        assert_eq!(s.as_range(), Some(&(3..6)));
        assert_eq!(s.len(), 3);
        assert!(s.contains(3) && s.contains(5) && !s.contains(6) && !s.contains(2));
        assert_eq!(s.iter().collect::<Vec<_>>(), [3, 4, 5]);
    }

    #[test]
    fn bitmaps_hold_what_ranges_cannot() {
        let s = Span::from_workers([0, 1, 64, 65, 66, 200]);
        assert!(!s.is_contiguous());
        assert_eq!(s.runs(), [0..2, 64..67, 200..201]);
        assert_eq!(s.len(), 6);
        assert_eq!(s.first(), 0);
        assert_eq!(s.hull(), &(0..201));
        for w in 0..256 {
            assert_eq!(
                s.contains(w),
                [0, 1, 64, 65, 66, 200].contains(&w),
                "worker {w}"
            );
        }
        assert_eq!(s, Span::from_workers(s.iter()));
    }

    #[test]
    fn subsets_and_unions() {
        let a = Span::from_workers([0, 1, 4, 5]);
        let b = Span::range(0..8);
        let c = Span::range(4..6);
        assert!(a.is_subset(&b) && !b.is_subset(&a));
        assert!(c.is_subset(&a) && !Span::range(3..5).is_subset(&a));
        assert!(a.is_subset(&a) && Span::range(0..0).is_subset(&c));
        let d = Span::from_workers([0, 1, 4, 5, 9]);
        assert!(a.is_subset(&d) && !d.is_subset(&a) && !d.is_subset(&b));
        assert_eq!(a.union(&Span::range(2..4)), Span::range(0..6));
        assert_eq!(a.union(&c), a);
        assert_eq!(c.union(&Span::range(7..8)).runs(), [4..6, 7..8]);
    }
}
