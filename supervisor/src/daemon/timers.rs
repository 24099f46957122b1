//! The timer queue: everything squadd does at a time rather than on a file
//! event. One ordered queue; its head is the daemon's next wake-up, so
//! nothing scans sessions or tasks to find the next deadline, and an idle
//! daemon with nothing scheduled never wakes.

use super::core::RootId;
use chrono::{DateTime, Utc};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub(crate) use super::core::timer::Timer;

/// The queue.
///
/// Each timer is held once and shared by the queue and the index.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    queue: BTreeSet<(Instant, Rc<Timer>)>,
    at: HashMap<Rc<Timer>, Instant>,
}

impl Timers {
    /// Sets (or moves) a timer.
    pub(crate) fn set(&mut self, timer: Timer, at: Instant) {
        let timer = match self.at.remove_entry(&timer) {
            Some((held, old)) => {
                self.queue.remove(&(old, held.clone()));
                held
            }
            None => Rc::new(timer),
        };
        self.at.insert(timer.clone(), at);
        self.queue.insert((at, timer));
    }

    /// Sets a timer unless it is already set earlier (a burst keeps the first
    /// deadline: coalescing never postpones).
    pub(crate) fn set_earlier(&mut self, timer: Timer, at: Instant) {
        match self.at.get(&timer) {
            Some(old) if *old <= at => {}
            _ => self.set(timer, at),
        }
    }

    /// Sets a timer at a wall-clock moment (`wall` is the current wall time
    /// that `now` corresponds to).
    pub(crate) fn set_wall(
        &mut self,
        timer: Timer,
        at: DateTime<Utc>,
        wall: DateTime<Utc>,
        now: Instant,
    ) {
        self.set(timer, instant_at(at, wall, now));
    }

    /// Cancels a timer.
    pub(crate) fn cancel(&mut self, timer: &Timer) {
        if let Some((held, old)) = self.at.remove_entry(timer) {
            self.queue.remove(&(old, held));
        }
    }

    /// Cancels every timer of a session (it was removed).
    pub(crate) fn cancel_session(&mut self, root: RootId, session: &str) {
        let gone: Vec<Timer> = self
            .at
            .keys()
            .filter(|t| t.root() == Some(root) && t.session() == Some(session))
            .map(|t| Timer::clone(t))
            .collect();
        for t in gone {
            self.cancel(&t);
        }
    }

    /// Cancels every timer of a root (another squadd took it over).
    pub(crate) fn cancel_root(&mut self, root: RootId) {
        for t in self.of_root(root) {
            self.cancel(&t);
        }
    }

    /// Every timer of a root that is set (for the core at shutdown).
    pub(crate) fn of_root(&self, root: RootId) -> Vec<Timer> {
        let mut armed: Vec<Timer> = self
            .at
            .keys()
            .filter(|t| t.root() == Some(root))
            .map(|t| Timer::clone(t))
            .collect();
        // The map's order is arbitrary: the core sees a stable one.
        armed.sort();
        armed
    }

    #[cfg(test)]
    /// When a timer is set for.
    pub(crate) fn get(&self, timer: &Timer) -> Option<Instant> {
        self.at.get(timer).copied()
    }

    #[cfg(test)]
    /// Whether a timer is set.
    pub(crate) fn contains(&self, timer: &Timer) -> bool {
        self.at.contains_key(timer)
    }

    /// The head of the queue: the next moment something is due.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.queue.first().map(|(at, _)| *at)
    }

    /// Removes and returns every timer due at `now`, earliest first.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Vec<Timer> {
        let mut out = Vec::new();
        while let Some((at, _)) = self.queue.first() {
            if *at > now {
                break;
            }
            if let Some((_, t)) = self.queue.pop_first() {
                self.at.remove(&*t);
                out.push(Rc::unwrap_or_clone(t));
            }
        }
        out
    }

    #[cfg(test)]
    /// Timers set (for tests and health).
    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }

    #[cfg(test)]
    /// Whether no timer is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Sessions of a root with a held-back status write.
    pub(crate) fn held_sessions(&self, root: RootId) -> impl Iterator<Item = &str> {
        self.at.keys().filter_map(move |t| match &**t {
            Timer::Status { root: r, session } | Timer::WrapUp { root: r, session }
                if *r == root =>
            {
                Some(session.as_str())
            }
            _ => None,
        })
    }
}

/// The monotonic instant of a wall-clock moment; moments in the past are now.
pub(crate) fn instant_at(at: DateTime<Utc>, wall: DateTime<Utc>, now: Instant) -> Instant {
    let wait = (at - wall).to_std().unwrap_or(Duration::ZERO);
    instant_after(now, wait)
}

/// `now + after` without the panic of `Instant + Duration` past the clock's
/// range (a delay can come from a file): too far is a year away, which the
/// timer loop treats as "not soon" and re-arms on the next change.
pub(crate) fn instant_after(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .or_else(|| now.checked_add(Duration::from_secs(86_400 * 365)))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_the_earliest_and_setting_again_moves_a_timer() {
        let t0 = Instant::now();
        let mut q = Timers::default();
        assert_eq!(q.next(), None);
        q.set(Timer::Context(RootId::nth(0)), t0 + Duration::from_secs(5));
        q.set(Timer::Locks(RootId::nth(0)), t0 + Duration::from_secs(2));
        assert_eq!(q.next(), Some(t0 + Duration::from_secs(2)));
        q.set(Timer::Locks(RootId::nth(0)), t0 + Duration::from_secs(9));
        assert_eq!(q.next(), Some(t0 + Duration::from_secs(5)));
        assert_eq!(q.len(), 2);
        // set_earlier never postpones.
        q.set_earlier(Timer::Context(RootId::nth(0)), t0 + Duration::from_secs(7));
        assert_eq!(
            q.get(&Timer::Context(RootId::nth(0))),
            Some(t0 + Duration::from_secs(5))
        );
        q.set_earlier(Timer::Context(RootId::nth(0)), t0 + Duration::from_secs(1));
        assert_eq!(q.next(), Some(t0 + Duration::from_secs(1)));
        let due = q.pop_due(t0 + Duration::from_secs(6));
        assert_eq!(due, vec![Timer::Context(RootId::nth(0))]);
        assert_eq!(
            q.pop_due(t0 + Duration::from_secs(9)),
            vec![Timer::Locks(RootId::nth(0))]
        );
        assert!(q.is_empty() && q.next().is_none());
    }

    #[test]
    fn cancelling_a_session_leaves_other_sessions_and_roots() {
        let t0 = Instant::now();
        let mut q = Timers::default();
        let due = |root, session: &str| Timer::TaskDue {
            root: RootId::nth(root),
            session: session.into(),
            task: "t".into(),
        };
        let status = |root, session: &str| Timer::Status {
            root: RootId::nth(root),
            session: session.into(),
        };
        q.set(due(0, "a"), t0);
        q.set(status(0, "a"), t0);
        q.set(due(0, "b"), t0);
        q.set(due(1, "a"), t0);
        q.set(Timer::Context(RootId::nth(0)), t0);
        q.cancel_session(RootId::nth(0), "a");
        assert_eq!(q.len(), 3);
        assert!(!q.contains(&due(0, "a")));
        assert!(q.contains(&due(1, "a")));
    }

    #[test]
    fn wall_moments_in_the_past_are_due_now() {
        let now = Instant::now();
        let wall = Utc::now();
        assert_eq!(
            instant_at(wall - chrono::Duration::hours(1), wall, now),
            now
        );
        assert_eq!(
            instant_at(wall + chrono::Duration::seconds(3), wall, now),
            now + Duration::from_secs(3)
        );
    }

    #[test]
    fn a_delay_past_the_clock_is_a_year_away_not_a_panic() {
        let now = Instant::now();
        let far = instant_after(now, Duration::MAX);
        assert!(far > now);
        assert_eq!(
            instant_after(now, Duration::from_secs(2)),
            now + Duration::from_secs(2)
        );
    }
}
